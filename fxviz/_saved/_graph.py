"""The graph of a saved recording: what the drawing code needs, without the model.

A saved file holds the recording's :class:`~fxviz.render._model.DrawGraph` (node names,
ops, titles, module paths, edges, tooltips, source lines, alignment keys) as JSON. On
load a :class:`SavedGraph` stands in for the ``GraphModule``: it rebuilds the same
drawing with the loaded records attached, and offers ``graph.nodes`` with each node's
op, target and module for the inspector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fxviz.errors import RecordingFileError
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode

__all__ = ["SavedGraph", "drawing_to_json"]

_NODE_TEXT = ("id", "name", "kind", "title", "module", "tooltip", "color_key", "out_label")


def drawing_to_json(drawing: DrawGraph, records: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready form of ``drawing`` (records are saved separately)."""
    nodes = []
    for n in drawing.nodes:
        record = records.get(n.name)
        item: dict[str, Any] = {key: getattr(n, key) for key in _NODE_TEXT}
        item |= {"lines": list(n.lines), "cluster": n.cluster, "align": list(n.align)}
        item |= {
            "op": record.op if record is not None else n.kind,
            "target": record.target if record is not None else n.title,
        }
        nodes.append(item)
    return {
        "name": drawing.name,
        "nodes": nodes,
        "edges": [[e.src, e.dst, e.label, e.style] for e in drawing.edges],
        "modules": dict(drawing.modules),
        "params": dict(drawing.params),
        "clusters": dict(drawing.clusters),
        "internal_paths": drawing.internal_paths,
    }


class SavedNode:
    """A node of a saved graph, with what the inspector reads of an FX node."""

    __slots__ = ("meta", "name", "op", "target")

    def __init__(self, name: str, op: str, target: str, module: str) -> None:
        self.name, self.op, self.target = name, op, target
        self.meta: dict[str, Any] = {"nn_module_stack": {module: (module, "")}} if module else {}

    def __repr__(self) -> str:
        return f"<saved node {self.name}: {self.op} {self.target}>"


class _Nodes:
    def __init__(self, nodes: list[SavedNode]) -> None:
        self.nodes = nodes


class SavedGraph:
    """Stands in for the ``GraphModule`` of a loaded recording (the model is not needed).

    Attributes:
        name: the model's class name when it was saved.
        graph: ``graph.nodes`` lists :class:`SavedNode` objects (op, name, target, module).
    """

    def __init__(self, data: Any) -> None:
        self._data = _checked(data)
        self.name: str = self._data["name"]
        self.graph = _Nodes(
            [SavedNode(n["name"], n["op"], n["target"], n["module"]) for n in self._data["nodes"]]
        )

    def draw(self, records: Mapping[str, Any] | None = None) -> DrawGraph:
        """A fresh drawing model, with ``records`` attached to their nodes."""
        records = records or {}
        nodes = [
            DrawNode(
                **{key: n[key] for key in _NODE_TEXT},
                lines=list(n["lines"]),
                cluster=n["cluster"],
                align=tuple(n["align"]),
                record=records.get(n["name"]),
            )
            for n in self._data["nodes"]
        ]
        edges = [DrawEdge(*e) for e in self._data["edges"]]
        d = self._data
        return DrawGraph(
            d["name"],
            nodes,
            edges,
            dict(d["modules"]),
            dict(d["params"]),
            dict(d["clusters"]),
            d["internal_paths"],
        )

    def __repr__(self) -> str:
        return f"<saved graph of {self.name}: {len(self.graph.nodes)} nodes>"


def _checked(data: Any) -> dict[str, Any]:
    """``data`` if it has the shape :func:`drawing_to_json` writes, else RecordingFileError."""
    _expect(isinstance(data, dict), "graph")
    _expect(isinstance(data.get("name"), str), "graph.name")
    nodes = data.get("nodes")
    _expect(isinstance(nodes, list), "graph.nodes")
    for i, n in enumerate(nodes):
        where = f"graph.nodes[{i}]"
        _expect(isinstance(n, dict), where)
        for key in (*_NODE_TEXT, "op", "target"):
            _expect(isinstance(n.get(key), str), f"{where}.{key}")
        for key in ("lines", "align"):
            _expect(_strings(n.get(key)), f"{where}.{key}")
        _expect(n.get("cluster") is None or isinstance(n["cluster"], str), f"{where}.cluster")
    edges = data.get("edges")
    _expect(isinstance(edges, list), "graph.edges")
    for i, e in enumerate(edges):
        _expect(_strings(e) and len(e) == 4, f"graph.edges[{i}]")
    for key, kind in (("modules", str), ("params", int), ("clusters", str)):
        table = data.get(key)
        _expect(
            isinstance(table, dict)
            and all(isinstance(k, str) and type(v) is kind for k, v in table.items()),
            f"graph.{key}",
        )
    _expect(isinstance(data.get("internal_paths"), bool), "graph.internal_paths")
    return data


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _expect(ok: bool, where: str) -> None:
    if not ok:
        raise RecordingFileError(
            f"the saved recording is corrupted: {where} is missing or malformed "
            "(was the file edited or cut short?)"
        )
