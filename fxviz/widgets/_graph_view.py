"""GraphView: a graph laid out in the browser (WebAssembly Graphviz), stepping-ready."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anywidget
import traitlets

from fxviz._collector import collector_paused
from fxviz._static import widget_css, widget_esm
from fxviz.render._api import Drawing
from fxviz.render._collapse import BIG_GRAPH, unit_path
from fxviz.render._fold import Params
from fxviz.render._inspect import inspector_data
from fxviz.render._payload import TABLE_ROWS, graph_payload, node_rows_page, page_contract
from fxviz.render._source import degrade

__all__ = ["BIG_GRAPH", "TABLE_ROWS", "GraphView", "one_at_a_time"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def one_at_a_time(
    method: Callable[Concatenate[Any, _P], _R],
) -> Callable[Concatenate[Any, _P], _R]:
    """A widget method that waits for any other one running on the same widget.

    JupyterLab sends widget messages to a kernel subshell where the kernel has them
    (ipykernel 7): the browser's messages (a click, a peek at a box) then run in a
    thread of their own, while a cell may be changing the same widget in the main
    thread (``view.depth = None``, ``app.debugger.step()``). One draw at a time keeps
    the view, its boxes and the drawing's nodes from being made by two at once.
    """

    @functools.wraps(method)
    def run(self: Any, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._busy:
            return method(self, *args, **kwargs)

    return run


class GraphView(anywidget.AnyWidget):
    """A graph in the notebook: pan/zoom, click to inspect, search, collapse modules.

    Traits (synced with the browser):
        dot: the DOT being shown (laid out in the browser, never in the kernel).
        selected: name of the selected node.
        node_states: ``{node: ["done" | "current" | "pending" | "error" | "breakpoint" |
            "nonfinite" | "linked", ...]}``, applied as CSS classes without re-layout
            (``linked``: in a joint graph, the nodes linked to the selected one).
        units: ``{node: title of what draws it}`` (a collapsed module's box, or itself).
            The browser is sent it whole only now and then, and ``units_delta`` (the
            entries that differ from what it was last sent) on other changes: expanding
            one module of a 50,000-node graph moves a few hundred nodes, not 50,000.
            Opening or closing a module changes ``units`` in place for that module's
            nodes only, and its DOT comes from the modules the view opens
            (:meth:`fxviz.render._api.Drawing.shown_view`): no pass over every node.
        depth / expanded / collapsed: how modules are collapsed; clicking a box expands
            it, double-clicking a module's frame collapses it. While the pointer rests on
            a box, or as it is pressed on one, the browser asks what opening it would
            show (``{"type": "peek_module"}``, answered by a ``peeked`` message; nothing
            changes) and lays that out ahead; so it does, once idle, for a few boxes in
            view. A change of view state that leaves the DOT as it was sends
            ``{"type": "peeks_stale"}``: what the page peeked at may open otherwise now.
        inspector, rows, status, error: what the side panel, table, status line and error
            area show (the table: the first :data:`TABLE_ROWS` rows; ``rows_total``: how
            many there are). render_ms: the browser's last layout + paint time.
        contract: what the page reads instead of restating Python
            (:func:`fxviz.render._payload.page_contract`).
        index: ``[[name, target, module], ...]`` for every node: what search looks in.
            Empty until the browser asks (``{"type": "index"}``, on first use of search):
            at 50,000 nodes it is megabytes the first paint need not wait for.

    ``units`` too reaches the browser only once it has painted the first view (it asks
    with ``{"type": "painted"}``); in Python it is always up to date.

    Examples:
        >>> import torch, fxviz
        >>> view = fxviz.GraphView(fxviz.trace(torch.nn.Linear(4, 2)))
        >>> view.dot.startswith("digraph")
        True
    """

    # Text, not paths: anywidget connects every instance to a file-watch signal of a Path
    # asset with a closure that holds the instance, so no widget (nor the model it
    # shows) would ever be freed.
    _esm = widget_esm()  # a message saying how to build the front end, when it is missing
    _css = widget_css()

    mode = traitlets.Unicode("graph").tag(sync=True)
    dot = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    node_states = traitlets.Dict().tag(sync=True)
    units = traitlets.Dict().tag(sync=True)
    units_delta = traitlets.Dict().tag(sync=True)
    # kept in Python: the browser sends messages (toggle_module...), never reads these
    depth = traitlets.Int(None, allow_none=True)
    expanded = traitlets.List(traitlets.Unicode())
    collapsed = traitlets.List(traitlets.Unicode())
    inspector = traitlets.Dict().tag(sync=True)
    rows = traitlets.List().tag(sync=True)
    rows_total = traitlets.Int(0).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    render_ms = traitlets.Float(0.0).tag(sync=True)
    layout_timeout_s = traitlets.Float(30.0).tag(sync=True)
    index = traitlets.List().tag(sync=True)
    contract = traitlets.Dict(page_contract()).tag(sync=True)  # states, actions, limits...

    def __init__(
        self, obj: Any, *, depth: int | None = None, params: Params = "fold", **kwargs: Any
    ) -> None:
        unknown = set(kwargs) - set(self.class_trait_names())
        if unknown:
            raise TypeError(
                f"GraphView() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
            )
        self._units_sent: dict[str, str] = {}  # the units the browser was last sent whole
        self._boxes: dict[str, str] = {}  # box DOT id -> module path, in the view shown
        self._by_name: dict[str, Any] | None = None  # drawn nodes by name and by id
        self._by_id: dict[str, Any] | None = None
        self._units_held = True  # until the browser has painted: see _on_painted
        self._busy = threading.RLock()  # see one_at_a_time
        super().__init__(**kwargs)
        self._obj = obj
        # one pause of the collector for the drawing model and the first view: each
        # pause ends with a collection of every object made meanwhile (see collector_paused)
        with collector_paused():
            self._drawing = Drawing(obj, params=params, group=True)  # made once
            self._draw = self._drawing.graph
            if depth is None:  # read off the module tree, which the first view walks anyway
                depth = self._drawing.tree.opening_depth()
            self.depth = depth
            self.observe(self._redraw, names=["depth", "expanded", "collapsed"])
            self.observe(self._on_select, names=["selected"])
            self.on_msg(self._on_message)
            self._redraw()

    # -- what to draw ---------------------------------------------------------------------
    @one_at_a_time
    def _redraw(self, change: Any = None) -> None:
        """One view of the drawing per state change: the DOT (from the modules the view
        opens, not from every node) and, when a module was opened or closed, the units of
        that module's nodes only."""
        with collector_paused():  # tens of thousands of small objects: see collector_paused
            self._draw_view(change)

    def _view(self, expand: frozenset[str], collapse: frozenset[str]) -> Any:
        """The view the widget shows for these opened and closed modules."""
        return self._drawing.shown_view(
            depth=self.depth,
            expand=expand,
            collapse=collapse,
            legend=False,  # the widget draws its legend in HTML, beside the graph
        )

    def _draw_view(self, change: Any = None) -> None:
        expand, collapse = frozenset(self.expanded), frozenset(self.collapsed)
        try:
            view = self._view(expand, collapse)
            tree = self._drawing.tree
            moved: dict[str, str] | None = None
            if change is not None and change["name"] in ("expanded", "collapsed"):
                paths = set(change["old"] or ()) ^ set(change["new"] or ())
                moved = {}
                for top in tree.roots(paths):  # only the modules opened or closed
                    moved.update(tree.units(self.depth, expand, collapse, top=top))
            units = tree.units(self.depth, expand, collapse) if moved is None else None
            payload = graph_payload(self._drawing, view, include_rows=False, include_index=False)
        except Exception as e:  # never a blank view: say what failed
            self.error = f"could not draw the graph: {type(e).__name__}: {e}"
            return
        self._boxes = view.boxes
        with self.hold_sync():  # one message: the browser never sees new units on an old SVG
            if units is not None:
                self._set_units(units)
            else:
                self._move_units(moved or {})
            if self.contract != payload["contract"]:  # a comparison's fill means agreement
                self.contract = payload["contract"]
            if change is not None and payload["dot"] == self.dot:
                # the view shown is the same, what opening its boxes shows may not be (a
                # module opened inside a closed one): the page forgets the peeks it keeps
                self.send({"type": "peeks_stale"})
            self.dot = payload["dot"]
            if not self.rows:
                source = self._drawing.source
                own = degrade("table", self._obj, source.rows, None)  # comparisons: both runs
                if own is not None:
                    self._show_rows(own)
                else:
                    self._show_rows(*node_rows_page(self._drawing, limit=TABLE_ROWS))

    def _show_rows(self, rows: list[dict[str, Any]], total: int | None = None) -> None:
        """Put ``rows`` in the table: the first :data:`TABLE_ROWS` (what the table shows;
        search finds the others), and how many there are (``total``: when ``rows`` holds
        only the first ones)."""
        self.rows_total = len(rows) if total is None else total
        self.rows = rows[:TABLE_ROWS]

    def _set_units(self, units: dict[str, str]) -> None:
        """A new map for every node (the depth changed): sent whole (after the first paint)."""
        self.units = units
        if self._units_held:  # nothing sent yet: the whole map goes after the first paint
            return
        self._send_whole_units()

    def _move_units(self, moved: dict[str, str]) -> None:
        """The nodes of one opened or closed module drawn by something else: ``units``
        changes in place, and the browser gets ``units_delta`` (what differs from the map
        it was last sent whole), or the whole map again once that is a quarter of it."""
        units = self.units
        changed = {k: v for k, v in moved.items() if units.get(k) != v}
        units.update(changed)  # in place: no pass over the other nodes, nothing sent yet
        if self._units_held:
            return
        sent, delta = self._units_sent, dict(self.units_delta)
        for name, unit in changed.items():
            if sent.get(name) == unit:
                delta.pop(name, None)
            else:
                delta[name] = unit
        if len(delta) * 4 > len(units):
            self._send_whole_units()
        else:
            self.units_delta = delta

    def _send_whole_units(self) -> None:
        self._units_sent = dict(self.units)  # units itself changes in place from now on
        self.units_delta = {}
        if self._holding_sync:  # with the DOT, in one message
            self._states_to_send.add("units")
        else:
            self.send_state(["units", "units_delta"])

    def _on_painted(self) -> None:
        """The browser shows its first view: now send it the units, whole."""
        if not self._units_held:
            return
        self._units_held = False
        self._send_whole_units()

    def _should_send_property(self, key: str, value: Any) -> bool:
        # ipywidgets asks this before sending a changed trait: nothing of the units
        # before the first paint (a new page still gets both, whole)
        if key in ("units", "units_delta") and self._units_held:
            return False
        return super()._should_send_property(key, value)

    # -- browser events ----------------------------------------------------------------------
    def _on_message(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        try:
            self.handle(content)
        except Exception as e:  # shown in the widget, never swallowed
            self.error = f"{type(e).__name__}: {e}"

    @one_at_a_time
    def handle(self, content: dict[str, Any]) -> None:
        """Act on one message from the browser (also callable from Python, for tests)."""
        kind = content.get("type")
        if kind == "index":  # search's first use: every node, whatever the view folds
            if not self.index:
                with collector_paused():
                    self.index = self._drawing.index()
        elif kind == "painted":
            self._on_painted()
        elif kind == "toggle_module":
            self._toggle(content.get("unit", ""))
        elif kind == "peek_module":
            self._peek(content.get("unit", ""), content.get("id"))
        elif kind == "collapse_cluster":
            self._collapse(content.get("cluster", ""))
        elif kind == "layout_failed":
            message = content.get("message", "layout failed")
            if self.depth is None or self.depth > 1:
                self.error = f"{message}: showing a collapsed view instead"
                self.depth = 1 if self.depth is None else self.depth - 1
            else:
                self.error = f"{message}, even with every module collapsed"

    @one_at_a_time
    def expand(self, path: str) -> None:
        """Open a collapsed module."""
        expanded, collapsed = self._expanded_lists(path)
        self.collapsed = collapsed
        self.expanded = expanded

    def _expanded_lists(self, path: str) -> tuple[list[str], list[str]]:
        """``expanded`` and ``collapsed`` once ``path`` is opened (nothing changed yet)."""
        collapsed = [p for p in self.collapsed if p != path]
        # what the module's nodes fold into once it is no longer closed: itself, or it opens
        unit = unit_path(path, self.depth, frozenset(self.expanded), frozenset(collapsed))
        opens = path in self._drawing.tree.count and unit == path
        return ([*self.expanded, path] if opens else list(self.expanded)), collapsed

    @one_at_a_time
    def collapse(self, path: str) -> None:
        """Draw a module as one box."""
        self.expanded = [p for p in self.expanded if p != path and not p.startswith(path + ".")]
        self.collapsed = [*self.collapsed, path]

    def _toggle(self, unit: str) -> None:
        path = self._boxes.get(unit)  # a collapsed box's DOT id: its module opens
        if path:
            self.expand(path)

    def _peek(self, unit: str, request: Any) -> None:
        """The DOT that opening box ``unit`` would show, sent to the browser alone (a
        ``peeked`` message with the request's ``id``): the view state stays as it is. The
        browser lays it out while the pointer rests on the box (or from the press that
        starts a click), so the click shows it at once. A ``unit`` that is no box of the
        view shown gets ``dot: null``."""
        path = self._boxes.get(unit)
        dot = None
        if path:
            expanded, collapsed = self._expanded_lists(path)
            with collector_paused():
                view = self._view(frozenset(expanded), frozenset(collapsed))
                dot = graph_payload(self._drawing, view, include_rows=False, include_index=False)[
                    "dot"
                ]
        self.send({"type": "peeked", "id": request, "unit": unit, "dot": dot})

    def _collapse(self, cluster: str) -> None:
        path = self._drawing.tree.cluster_path(cluster)  # a split frame's parts too
        if path is not None:
            self.collapse(path)

    def _node(self, name: str = "", node_id: str = "") -> Any:
        """The drawn node called ``name`` (or of DOT id ``node_id``), found in a map
        made once rather than by a pass over the nodes at every click."""
        if self._by_name is None or self._by_id is None:
            nodes = self._draw.nodes
            self._by_name = {n.name: n for n in reversed(nodes)}  # the first of a name
            self._by_id = {n.id: n for n in nodes}
        return self._by_id.get(node_id) if node_id else self._by_name.get(name)

    @one_at_a_time
    def _on_select(self, change: Any) -> None:
        name = change["new"]
        node = self._selected_node(name)
        source = self._drawing.source
        linked = source.linked(node.id if node is not None else "")  # joint graphs
        if linked is not None:
            self._show_linked(linked)
        if node is None:
            self.inspector = {}
            return
        name = node.name  # the browser may send a drawing id (``fw_relu``)
        own = source.inspector(name)  # comparisons: both runs
        if own is not None:
            self.inspector = own
            return
        fx_node = _fx_node(source.graph_module(), name)
        self.inspector = inspector_data(name, fx_node, node.record, folded=node.folded)

    def _selected_node(self, name: str) -> Any:
        """The drawn node the browser marks for ``name``: the one ``units`` maps it to
        (names can repeat, as in a joint graph's two passes), or the node of that id."""
        return self._node(node_id=self.units.get(name, name)) or self._node(name)

    def _show_linked(self, ids: list[str]) -> None:
        """Mark ``ids`` with the ``linked`` state (and no other node)."""
        states = {k: [s for s in v if s != "linked"] for k, v in self.node_states.items()}
        for node_id in ids:
            states.setdefault(node_id, []).append("linked")
        self.node_states = {k: v for k, v in states.items() if v}

    def __repr__(self) -> str:
        return f"<fxviz.GraphView: {len(self._draw.nodes)} nodes, depth={self.depth}>"


def _fx_node(gm: Any, name: str) -> Any:
    graph = getattr(gm, "graph", None)
    if graph is None or not hasattr(graph, "nodes"):
        return None
    return next((n for n in graph.nodes if n.name == name), None)
