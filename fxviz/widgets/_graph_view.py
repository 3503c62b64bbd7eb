"""GraphView: a graph laid out in the browser (WebAssembly Graphviz), stepping-ready."""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from fxviz._static import STATIC
from fxviz.render._api import _default_overlays, draw
from fxviz.render._collapse import (
    BIG_GRAPH,
    group_wide,
    module_id,
    opening_depth,
    unit_path,
    units,
)
from fxviz.render._dot import render

__all__ = ["BIG_GRAPH", "GraphView", "search_index"]


class GraphView(anywidget.AnyWidget):
    """A graph in the notebook: pan/zoom, click to inspect, search, collapse modules.

    Traits (synced with the browser):
        dot: the DOT being shown (laid out in the browser, never in the kernel).
        selected: name of the selected node.
        node_states: ``{node: ["done" | "current" | "pending" | "error" | "breakpoint" |
            "nonfinite", ...]}``, applied as CSS classes without re-layout.
        units: ``{node: title of what draws it}`` (a collapsed module's box, or itself).
        depth / expanded / collapsed: how modules are collapsed; clicking a box expands
            it, double-clicking a module's frame collapses it.
        inspector, rows, status, error: what the side panel, table, status line and error
            area show. render_ms: the browser's last layout + paint time.
        index: ``[[name, target, module], ...]`` for every node: what search looks in.

    Example:
        >>> import torch, fxviz
        >>> view = fxviz.GraphView(fxviz.trace(torch.nn.Linear(4, 2)))
        >>> view.dot.startswith("digraph")
        True
    """

    _esm = STATIC / "widget.js" if (STATIC / "widget.js").is_file() else "export default {}"
    _css = STATIC / "widget.css" if (STATIC / "widget.css").is_file() else ""

    mode = traitlets.Unicode("graph").tag(sync=True)
    dot = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    node_states = traitlets.Dict().tag(sync=True)
    units = traitlets.Dict().tag(sync=True)
    depth = traitlets.Int(None, allow_none=True).tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    collapsed = traitlets.List(traitlets.Unicode()).tag(sync=True)
    inspector = traitlets.Dict().tag(sync=True)
    rows = traitlets.List().tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    render_ms = traitlets.Float(0.0).tag(sync=True)
    layout_timeout_s = traitlets.Float(30.0).tag(sync=True)
    index = traitlets.List().tag(sync=True)

    def __init__(self, obj: Any, *, depth: int | None = None, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(self.class_trait_names())
        if unknown:
            raise TypeError(
                f"GraphView() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
            )
        super().__init__(**kwargs)
        self._obj = obj
        self._draw = group_wide(draw(obj))  # wide levels (flat 20k-node chains) in groups
        self._names = {n.id: n.name for n in self._draw.nodes}
        self.depth = depth if depth is not None else opening_depth(self._draw)
        self.observe(self._redraw, names=["depth", "expanded", "collapsed"])
        self.observe(self._on_select, names=["selected"])
        self.on_msg(self._on_message)
        self._redraw()
        self.rows = self._rows()
        self.index = search_index(self._draw)

    # -- what to draw ---------------------------------------------------------------------
    def _redraw(self, _change: Any = None) -> None:
        try:
            digraph = render(
                self._draw,
                depth=self.depth,
                expand=self.expanded,
                collapse=self.collapsed,
                overlays=_default_overlays(self._obj),
                legend=False,  # the widget draws its legend in HTML, beside the graph
            )
        except Exception as e:  # never a blank view: say what failed
            self.error = f"could not draw the graph: {type(e).__name__}: {e}"
            return
        with self.hold_sync():  # one message: the browser never sees new units on an old SVG
            self.units = self._units()
            self.dot = digraph.source

    def _units(self) -> dict[str, str]:
        return units(self._draw, self.depth, frozenset(self.expanded), frozenset(self.collapsed))

    def _rows(self) -> list[dict[str, Any]]:
        from fxviz.render._inspect import table_rows

        records = [n.record for n in self._draw.nodes if n.record is not None]
        if records:
            return table_rows(records)
        return [
            {"name": n.name, "op": n.kind, "target": n.title, "shape": n.out_label}
            for n in self._draw.nodes
        ]

    # -- browser events ----------------------------------------------------------------------
    def _on_message(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        try:
            self.handle(content)
        except Exception as e:  # shown in the widget, never swallowed
            self.error = f"{type(e).__name__}: {e}"

    def handle(self, content: dict[str, Any]) -> None:
        """Act on one message from the browser (also callable from Python, for tests)."""
        kind = content.get("type")
        if kind == "toggle_module":
            self._toggle(content.get("unit", ""))
        elif kind == "collapse_cluster":
            self._collapse(content.get("cluster", ""))
        elif kind == "layout_failed":
            message = content.get("message", "layout failed")
            if self.depth is None or self.depth > 1:
                self.error = f"{message}: showing a collapsed view instead"
                self.depth = 1 if self.depth is None else self.depth - 1
            else:
                self.error = f"{message}, even with every module collapsed"

    def _unit(self, module: str) -> str | None:
        return unit_path(module, self.depth, frozenset(self.expanded), frozenset(self.collapsed))

    def expand(self, path: str) -> None:
        """Open a collapsed module."""
        self.collapsed = [p for p in self.collapsed if p != path]
        if self._unit_of_path(path) == path:
            self.expanded = [*self.expanded, path]

    def collapse(self, path: str) -> None:
        """Draw a module as one box."""
        self.expanded = [p for p in self.expanded if p != path and not p.startswith(path + ".")]
        self.collapsed = [*self.collapsed, path]

    def _unit_of_path(self, path: str) -> str | None:
        node = next(
            (n for n in self._draw.nodes if n.module == path or n.module.startswith(path + ".")),
            None,
        )
        return self._unit(node.module) if node is not None else None

    def _toggle(self, unit: str) -> None:
        for name, title in self.units.items():
            if title == unit:
                node = next(n for n in self._draw.nodes if n.name == name)
                path = self._unit(node.module)
                if path:
                    self.expand(path)
                return

    def _collapse(self, cluster: str) -> None:
        paths = {p for n in self._draw.nodes for p in _prefixes(n.module)}
        for path in sorted(paths):
            if f"cluster_{module_id(path, 'm_')}" == cluster:
                self.collapse(path)
                return

    def _on_select(self, change: Any) -> None:
        from fxviz.render._inspect import inspector_data

        name = change["new"]
        node = next((n for n in self._draw.nodes if n.name == name), None)
        if node is None:
            self.inspector = {}
            return
        fx_node = _fx_node(self._obj, name)
        self.inspector = inspector_data(name, fx_node, node.record)

    def __repr__(self) -> str:
        return f"<fxviz.GraphView: {len(self._draw.nodes)} nodes, depth={self.depth}>"


def search_index(drawing: Any) -> list[list[str]]:
    """What the browser's search looks in: ``[name, target, module]`` for every node."""
    return [[n.name, n.title, n.module] for n in drawing.nodes]


def _prefixes(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _fx_node(obj: Any, name: str) -> Any:
    gm = getattr(obj, "graph_module", obj)
    graph = getattr(gm, "graph", None)
    if graph is None or not hasattr(graph, "nodes"):
        return None
    return next((n for n in graph.nodes if n.name == name), None)
