"""``fxviz.to_dot`` and ``fxviz.to_svg``: any graph fxviz knows, as DOT or SVG.

Draw once: :class:`Drawing` turns an object into its drawing model a single time; each
state change of a view (depth, expanded or collapsed modules, overlays) is one call of
:meth:`Drawing.view`, whose :class:`View` carries the DOT and the node -> drawn-box map
computed together. ``to_dot``, the widget and the HTML report are all views of it.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Iterable, Sequence
from typing import Any

import graphviz

from fxviz._capture import Capture
from fxviz._collector import collector_paused
from fxviz._record._records import NodeRecord, Recording
from fxviz.errors import RenderError  # defined in errors.py, re-exported here
from fxviz.render._collapse import fold, group_wide, module_members, opening_depth
from fxviz.render._dot import render
from fxviz.render._fold import Params
from fxviz.render._frames import frame_capture
from fxviz.render._model import DrawGraph
from fxviz.render._overlays import Overlay, guarded
from fxviz.render._shown import ModuleTree
from fxviz.render._source import Source, degrade, source_of

__all__ = ["Drawing", "RenderError", "View", "collector_paused", "draw", "to_dot", "to_svg"]


@dataclasses.dataclass(frozen=True)
class View:
    """One state of a drawn graph: the DOT and, for every node name, the DOT id of what
    draws it (its collapsed module's box, or the node itself)."""

    digraph: graphviz.Digraph
    units: dict[str, str]
    depth: int | None
    boxes: dict[str, str] = dataclasses.field(default_factory=dict)  # box DOT id -> module

    @property
    def dot(self) -> str:
        """The DOT source text."""
        return self.digraph.source


class Drawing:
    """An object's drawing model, made once (``params``: as for :func:`to_dot`);
    :meth:`view` draws one state of it. ``group=True`` splits levels wider than 300
    modules or loose nodes into about 100 groups (:func:`~fxviz.render._collapse.group_wide`):
    what the widget and the report open, so a flat 20,000-node chain stays usable.

    Examples:
        >>> import torch, fxviz
        >>> from fxviz.render import Drawing
        >>> drawing = Drawing(fxviz.trace(torch.nn.Sequential(torch.nn.Linear(4, 2))))
        >>> view = drawing.view(depth=None)
        >>> view.units["_0"], view.dot.startswith("digraph")
        ('_0', True)
    """

    def __init__(self, obj: Any, *, params: Params = "fold", group: bool = False) -> None:
        self.obj = obj
        self.params: Params = params
        self.source: Source = source_of(obj)
        with collector_paused():
            graph = draw(obj, params=params)
            # a model made here is this drawing's own: grouped in place (not the caller's)
            own = graph is not obj
            self.graph: DrawGraph = group_wide(graph, in_place=own) if group else graph
        self.defaults: list[Overlay] = degrade("default overlays", obj, self.source.overlays, [])
        self._opening: tuple[int | None] | None = None
        self._index: list[list[str]] | None = None
        self._tree: ModuleTree | None = None
        self._guarded: tuple[tuple[Overlay, ...], list[Overlay]] | None = None

    @property
    def opening_depth(self) -> int | None:
        """The depth a view of this drawing opens at (:func:`~fxviz.render._collapse.
        opening_depth`), read off :attr:`tree` once that is made."""
        if self._opening is None:
            with collector_paused():
                found = self._tree.opening_depth() if self._tree else opening_depth(self.graph)
            self._opening = (found,)
        return self._opening[0]

    @property
    def tree(self) -> ModuleTree:
        """The drawing's module tree (made at the first ask): what :meth:`shown_view`
        and a widget's units read instead of passing over every node."""
        if self._tree is None:
            with collector_paused():
                self._tree = ModuleTree(self.graph)
        return self._tree

    @functools.cached_property
    def drawn_names(self) -> frozenset[str]:
        """The names of the nodes drawn (parameter fetches folded into their users and
        telemetry calls are not)."""
        return frozenset(n.name for n in self.graph.nodes)

    def records(self) -> list[NodeRecord]:
        """Every record of the drawn run, parameter fetches folded out of the drawing
        included (``[]`` when the object did not run)."""
        recording = self.source.recording()
        return recording.records() if isinstance(recording, Recording) else []

    def inside(self, path: str) -> Drawing:
        """Only module ``path``'s nodes and the edges between them, with this drawing's
        overlays: one collapsed box opened on its own (a report's pre-drawn box)."""
        part = object.__new__(Drawing)
        part.obj, part.params, part.defaults = self.obj, self.params, self.defaults
        part.source = self.source
        part.graph = module_members(self.graph, path)
        part._opening = (None,)
        part._index = None
        part._tree = None
        part._guarded = None
        return part

    def view(
        self,
        *,
        depth: int | None = None,
        expand: Iterable[str] = (),
        collapse: Iterable[str] = (),
        overlay: Overlay | Sequence[Overlay] | None = None,
        **options: Any,
    ) -> View:
        """The DOT and units of one state; ``options`` as for :func:`to_dot`."""
        with collector_paused():
            folding = fold(self.graph, depth, frozenset(expand), frozenset(collapse))
            digraph = render(
                self.graph,
                depth=depth,
                overlays=guarded([*self.defaults, *_as_list(overlay)]),
                folding=folding,
                **options,
            )
            boxes = {box.id: path for path, box in folding.boxes.items()}
            return View(digraph, folding.units(self.graph), depth, boxes)

    def shown_view(
        self,
        *,
        depth: int | None = None,
        expand: Iterable[str] = (),
        collapse: Iterable[str] = (),
        **options: Any,
    ) -> View:
        """The same DOT as :meth:`view` (default overlays only), found by walking the
        modules the view opens (:attr:`tree`) rather than every node; its ``units`` are
        left empty (:meth:`ModuleTree.units` makes them, for one module when only that
        one changed): a 100,000-node graph's module opens in time proportional to what
        it shows.

        >>> import torch, fxviz
        >>> drawing = Drawing(fxviz.trace(torch.nn.Sequential(torch.nn.Linear(4, 2))))
        >>> drawing.shown_view(depth=1).dot == drawing.view(depth=1).dot
        True
        """
        with collector_paused():
            shown = self.tree.shown(depth, frozenset(expand), frozenset(collapse))
            digraph = render(
                self.graph, depth=depth, overlays=self._defaults_guarded(), shown=shown, **options
            )
            return View(digraph, {}, depth, {b.id: b.path for b in shown.boxes})

    def _defaults_guarded(self) -> list[Overlay]:
        """:attr:`defaults`, guarded (:func:`guarded`), as one list object for as long as
        they stay the same: the module tree keeps each box's marks per overlays object
        (:meth:`ModuleTree.marks`), so no view after the first calls them on a box again."""
        key = tuple(self.defaults)
        if self._guarded is None or self._guarded[0] != key:
            self._guarded = (key, guarded(key))
        return self._guarded[1]

    def index(self) -> list[list[str]]:
        """``[[name, title, module], ...]`` for every drawn node: what search looks in
        (made once: it does not change with the view)."""
        if self._index is None:
            with collector_paused():
                self._index = [[n.name, n.title, n.module] for n in self.graph.nodes]
        return self._index


def draw(obj: Any, *, params: Params = "fold") -> DrawGraph:
    """The drawing model of anything :func:`to_dot` accepts (see :mod:`fxviz.render._source`)."""
    if isinstance(obj, DrawGraph):
        return obj
    return _draw(source_of(obj), params)


def _draw(source: Source, params: Params) -> DrawGraph:
    drawing = source.drawing(params)
    captured = source.graph_module()
    if isinstance(captured, Capture):  # graph calls as frames, breaks as markers
        frame_capture(drawing, captured)
    return drawing


def to_dot(
    obj: Any,
    *,
    depth: int | None = None,
    expand: Iterable[str] = (),
    collapse: Iterable[str] = (),
    overlay: Overlay | Sequence[Overlay] | None = None,
    legend: bool = True,
    edge_labels: bool | None = None,
    rankdir: str = "TB",
    max_label: int = 40,
    stub_fanout: int = 6,
    params: Params = "fold",
) -> graphviz.Digraph:
    """The graph as DOT source (a ``graphviz.Digraph``; no ``dot`` binary needed).

    Args:
        obj: a ``GraphModule`` (or ``Capture``), ``Recording`` (live or loaded),
            ``ShapeReport``, ``Debugger``, ``ExportedProgram``, ``JointGraph`` or its
            recording, ``GraphDiff``, ``Comparison``, or a TorchScript ``ScriptModule``/
            ``ScriptFunction``/``torch.Graph``: whatever has a registered source
            (:mod:`fxviz.render._source`).
        depth: collapse every module deeper than this into one box (``None``: draw all
            nodes, grouped into nested module clusters).
        expand: module paths to open although ``depth`` would collapse them.
        collapse: module paths to draw as one box whatever ``depth`` says.
        overlay: an overlay or a list (``node -> fxviz.overlays.Style``), applied in order after
            the defaults (errors and NaN/Inf for recordings, debugger states).
        legend: draw a legend of the node kinds.
        edge_labels: label edges with tensor shapes (default: when known and the graph has
            at most 400 nodes).
        rankdir: ``"TB"`` (top to bottom) or ``"LR"``.
        max_label: longest label line before it is cut (full text in the tooltip).
        stub_fanout: inputs with more users than this are drawn as a small copy beside
            each user (0: never).
        params: ``"fold"`` lists parameters, buffers and constants (with shapes) inside
            the nodes that use them; ``"show"`` draws each fetch as a node of its own.

    Node ids are the FX node names, so the output is stable and the browser can address
    nodes. Never display the returned Digraph directly in a notebook: that calls ``dot``.

    Examples:
        >>> import torch, fxviz
        >>> dot = fxviz.to_dot(fxviz.trace(torch.nn.Sequential(torch.nn.Linear(4, 2))))
        >>> "Linear(4→2)" in dot.source
        True
    """
    return (
        Drawing(obj, params=params)
        .view(
            depth=depth,
            expand=expand,
            collapse=collapse,
            overlay=overlay,
            legend=legend,
            edge_labels=edge_labels,
            rankdir=rankdir,
            max_label=max_label,
            stub_fanout=stub_fanout,
        )
        .digraph
    )


def to_svg(obj: Any, **options: Any) -> str:
    """SVG text laid out by the system ``dot`` (Graphviz), when it is installed.

    ``options`` are those of :func:`to_dot`; a ``graphviz.Digraph`` is laid out as it is.

    Examples:
        >>> import torch, fxviz
        >>> try:
        ...     svg = fxviz.to_svg(fxviz.trace(torch.nn.Linear(4, 2)), legend=False)
        ... except fxviz.RenderError:  # no Graphviz `dot` on this machine
        ...     svg = "<svg></svg>"
        >>> "<svg" in svg
        True

    Raises:
        RenderError: ``dot`` is not on PATH; the notebook widget and the HTML report lay
            graphs out in the browser and need no ``dot`` at all.
    """
    if shutil.which("dot") is None:
        raise RenderError(
            "to_svg needs the Graphviz 'dot' program, which is not installed (apt install "
            "graphviz, brew install graphviz, conda install graphviz). The notebook widget "
            "(fxviz.show) and the HTML report (fxviz.report) lay graphs out in the browser "
            "and need no 'dot' at all; fxviz.to_dot(obj).source gives the DOT text."
        )
    digraph = obj if isinstance(obj, graphviz.Digraph) else to_dot(obj, **options)
    try:
        return digraph.pipe(format="svg", encoding="utf-8")
    except graphviz.CalledProcessError as e:
        raise RenderError(f"dot could not lay out the graph: {e.stderr or e}") from e


def _as_list(overlay: Overlay | Sequence[Overlay] | None) -> list[Overlay]:
    if overlay is None:
        return []
    if callable(overlay):
        return [overlay]
    return list(overlay)
