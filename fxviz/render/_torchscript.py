"""TorchScript graphs (``torch.jit.script``/``trace``/``freeze``) as a :class:`DrawGraph`.

A view-only adapter: ``prim::If``/``prim::Loop`` blocks and ``prim::fork`` subgraphs become
nested clusters, and a fork's result is linked to the ``aten::wait`` that consumes its
future. This module is the one place that walks ``torch._C`` graph objects; TorchScript is
deprecated upstream, so its warnings are silenced here, inside fxviz's own calls only.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import torch

from fxviz.render._model import DrawEdge, DrawGraph, DrawNode

__all__ = ["draw_torchscript", "is_torchscript", "script_graph"]


def is_torchscript(obj: Any) -> bool:
    """Whether ``obj`` is a ScriptModule, ScriptFunction or ``torch.Graph``."""
    return isinstance(obj, (torch.jit.ScriptModule, torch.jit.ScriptFunction, torch.Graph))


def script_graph(obj: Any) -> torch.Graph:
    """The graph to draw: method calls inlined for modules and functions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        if isinstance(obj, torch.Graph):
            return obj
        return obj.inlined_graph


def draw_torchscript(obj: Any) -> DrawGraph:
    """Draw a TorchScript module, function or graph."""
    name = getattr(obj, "original_name", None) or getattr(obj, "name", None) or "TorchScript"
    walker = _Walker(str(name))
    walker.graph(script_graph(obj))
    walker.result.internal_paths = True
    return walker.result


class _Walker:
    def __init__(self, name: str) -> None:
        self.result = DrawGraph(name, [], [])
        self.ids = (f"ts{i}" for i in itertools.count())
        self.producer: dict[Any, str] = {}  # torch.Value -> drawn node id
        self.attr_path: dict[Any, str] = {}  # torch.Value -> "self.sub.lin"
        self.fork_result: dict[Any, str] = {}  # future value -> node making its result
        self.positions: dict[str, int] = {}

    def graph(self, graph: torch.Graph) -> None:
        for value in graph.inputs():
            node_id = next(self.ids)
            name = value.debugName()
            self._add(
                DrawNode(
                    node_id,
                    name,
                    "placeholder",
                    name,
                    [str(value.type())],
                    tooltip=f"input {name}: {value.type()}",
                ),
                align=(f"input:{name.split('.')[0]}",),
            )
            self.producer[value] = node_id
            if name.split(".")[0] == "self":
                self.attr_path[value] = "self"
        for node in graph.nodes():
            self.node(node, "")
        ret = graph.return_node()
        out_id = next(self.ids)
        self._add(
            DrawNode(out_id, "output", "output", "output", tooltip="return"), align=("output",)
        )
        for value in ret.inputs():
            self._edge(value, out_id)

    def node(self, node: Any, path: str) -> None:
        kind = node.kind()
        node_id = next(self.ids)
        outputs = list(node.outputs())
        name = outputs[0].debugName() if outputs else kind
        draw_kind, title, align = "call_function", kind, ()
        if kind == "prim::Constant":
            draw_kind, title = "constant", _constant_text(node)
            align = (f"attr:{name}",) if name.startswith("self.") else (f"const:{title}",)
        elif kind == "prim::GetAttr":
            base = self.attr_path.get(node.input(), "?")
            attr = f"{base}.{node.s('name')}"
            self.attr_path[node.output()] = attr
            draw_kind, title, align = "get_attr", attr, (f"attr:{attr}",)
        count = self.positions[kind] = self.positions.get(kind, -1) + 1
        named = (f"value:{name}",) if not name.split(".")[0].isdigit() else ()  # not %12
        align = (*align, *named, f"kind:{kind}#{count}")
        lines = [_type_text(v) for v in outputs[:2]]
        source = _source(node)
        tooltip = (
            f"{name} = {kind}\n" + "\n".join(lines) + (f"\nsource: {source}" if source else "")
        )
        self._add(
            DrawNode(
                node_id,
                name,
                draw_kind,
                title,
                [line for line in lines if line],
                module=path,
                tooltip=tooltip,
                color_key=kind,
            ),
            align=align,
        )
        for value in node.inputs():
            self._edge(value, node_id)
            if kind == "aten::wait" and value in self.fork_result:
                self.result.edges.append(
                    DrawEdge(self.fork_result[value], node_id, "future", "dashed")
                )
        for value in outputs:
            self.producer[value] = node_id
        if kind == "prim::fork":
            self._fork(node, node_id, path)
        for i, block in enumerate(node.blocks()):
            label = _block_label(kind, i)
            block_path = ".".join(p for p in (path, f"{node_id}_{label}") if p)
            self.result.modules[block_path] = f"{kind} {label}"
            for value in block.inputs():
                self.producer[value] = node_id
            for inner in block.nodes():
                self.node(inner, block_path)
            for value in block.outputs():
                if value in self.producer and self.producer[value] != node_id:
                    self.result.edges.append(
                        DrawEdge(self.producer[value], node_id, style="dashed")
                    )

    def _fork(self, node: Any, node_id: str, path: str) -> None:
        subgraph = node.g("Subgraph")
        fork_path = ".".join(p for p in (path, f"{node_id}_fork") if p)
        calls = [n for n in subgraph.nodes() if n.kind() == "prim::CallFunction"]
        callee = str(next(calls[0].inputs()).type()).rsplit(".", 1)[-1] if calls else "subgraph"
        self.result.modules[fork_path] = f"prim::fork → {callee}"
        for inner_value, outer_value in zip(subgraph.inputs(), node.inputs(), strict=False):
            self.producer[inner_value] = self.producer.get(outer_value, node_id)
        first = len(self.result.nodes)
        for inner in subgraph.nodes():
            self.node(inner, fork_path)
        spawned = [n for n in self.result.nodes[first:] if n.kind != "constant"]
        if spawned:
            self.result.edges.append(DrawEdge(node_id, spawned[0].id, "runs", "dotted"))
        results = [self.producer[v] for v in subgraph.outputs() if v in self.producer]
        if results:
            self.fork_result[node.output()] = results[0]

    def _add(self, node: DrawNode, *, align: tuple[str, ...]) -> None:
        node.align = align
        self.result.nodes.append(node)

    def _edge(self, value: Any, node_id: str) -> None:
        source = self.producer.get(value)
        if source is not None and source != node_id:
            self.result.edges.append(DrawEdge(source, node_id))


def _block_label(kind: str, index: int) -> str:
    if kind == "prim::If":
        return "then" if index == 0 else "else"
    if kind == "prim::Loop":
        return "body"
    return f"block{index}"


def _constant_text(node: Any) -> str:
    text = str(node).strip()
    if "prim::Constant[value=" in text:
        return text.split("prim::Constant[value=", 1)[1].rsplit("]", 1)[0][:40]
    return "None" if "NoneType" in text else "constant"


def _type_text(value: Any) -> str:
    kind = value.type()
    sizes = None
    if isinstance(kind, torch.TensorType):
        sizes = kind.sizes()
        dtype = kind.dtype()
        if sizes is not None:
            return "×".join(map(str, sizes)) + (
                f" {str(dtype).removeprefix('torch.')}" if dtype else ""
            )
    return str(kind)


def _source(node: Any) -> str:
    try:
        text = node.sourceRange()
    except RuntimeError:
        return ""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " ".join(lines[:2])[:160]
