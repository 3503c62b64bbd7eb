"""FX graphs (and what was recorded about them) as a :class:`DrawGraph`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.node import map_arg

from fxviz._nodes import is_bookkeeping, module_path, source_line, target_text
from fxviz._record._rank import collective_text, is_collective
from fxviz._record._records import NodeRecord
from fxviz._record._summary import dtype_name
from fxviz._shapes._report import format_shape
from fxviz._torch_compat import CONV_MODULES, NORM_MODULES
from fxviz.render._fold import (
    Params,
    call_paths,
    fetched_tensor,
    foldable,
    is_parameter_fetch,
    real_path,
)
from fxviz.render._model import DrawGraph, deferred_node, dot_id, new_edge

__all__ = ["draw_fx", "module_label"]

_ABBREVIATIONS = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def draw_fx(
    gm: torch.nn.Module,
    *,
    records: Mapping[str, NodeRecord] | None = None,
    kinds: Mapping[str, str] | None = None,
    targets: Mapping[str, str] | None = None,
    name: str | None = None,
    params: Params = "fold",
) -> DrawGraph:
    """Turn ``gm.graph`` into a DrawGraph; ``records`` add shapes and statistics,
    ``kinds`` re-labels placeholders (``parameter``, ``buffer``... for exported programs)
    and ``targets`` names what they hold.

    ``params="fold"`` (the default) draws no node for a parameter, buffer or constant
    fetch: it is listed, with its shape, in the label and tooltip of each node using it.
    ``"show"`` draws each fetch as a node of its own. A module called more than once
    gets one group per call (``pool``, ``pool@2``). Telemetry calls nothing uses
    (``torch._C._log_api_usage_once``, which Dynamo captures) are not drawn.
    """
    if params not in ("fold", "show"):
        raise ValueError(f"params must be 'fold' or 'show', not {params!r}")
    graph: torch.fx.Graph = gm.graph  # type: ignore[assignment]
    records = records or {}
    kinds = kinds or {}
    targets = targets or {}
    modules = dict(gm.named_modules())
    stacks = call_paths(graph)  # call paths and class names, one pass
    paths = stacks.paths
    folded = {
        node
        for node in graph.nodes
        # only a get_attr or a node ``kinds`` names can be a fetch (the rest: no call)
        if (node.op == "get_attr" or node.name in kinds)
        and params == "fold"
        and is_parameter_fetch(gm, node, kinds)
        and foldable(node)
    }
    nodes, edges = [], []
    ids: dict[torch.fx.Node, str] = {}  # dot_id per node, made once (edges name them again)
    drawn_fx: list[torch.fx.Node] = []
    kind_of: dict[tuple[str, Any], str] = {}  # per op and target: is_collective is slow
    # what a node's label, colour and tooltip need is made when first read (the DOT of a
    # drawn node, the inspector, a diff): most nodes of a big graph sit in collapsed boxes
    ctx = _Labels(gm, modules, records, kinds, targets, folded, drawn_fx, kind_of)
    fill = ctx.fill  # one function for every node: see deferred_node
    edge = new_edge
    for node in graph.nodes:
        if node in folded or is_bookkeeping(node):  # telemetry: recorded, never drawn
            continue
        node_name = node.name
        node_id = ids[node] = dot_id(node_name)
        drawn_fx.append(node)
        kind: str | None = kinds.get(node_name)
        if kind is None:
            kind = _kind(node, kind_of)
        module = (
            paths.get(node_name) or module_path(node)
            if node.op not in ("placeholder", "output")
            else ""
        )
        nodes.append(
            deferred_node(node_id, node_name, kind, module, records.get(node_name), fill, node)
        )
        # ``all_input_nodes`` copies the node's inputs into a new list: read them in place
        for source in node._input_nodes:
            if source not in folded:
                edges.append(edge(ids[source], node_id))
    labels = stacks.types
    labels |= {path: module_label(m) for path, m in modules.items() if path and _is_real(m)}
    counts = _param_counts(modules)
    called = {n.module for n in nodes if "@" in n.module}  # modules called more than once
    for drawn in {prefix for module in called for prefix in _prefixes(module) if "@" in prefix}:
        if real_path(drawn) in labels:
            labels[drawn] = labels[real_path(drawn)]
        if real_path(drawn) in counts:
            counts[drawn] = counts[real_path(drawn)]
    return DrawGraph(name or type(gm).__name__, nodes, edges, labels, counts)


class _Labels:
    """Makes a drawn node's deferred fields (:data:`fxviz.render._model.DEFERRED`)."""

    def __init__(
        self,
        gm: torch.nn.Module,
        modules: Mapping[str, torch.nn.Module],
        records: Mapping[str, NodeRecord],
        kinds: Mapping[str, str],
        targets: Mapping[str, str],
        folded: set[torch.fx.Node],
        drawn: list[torch.fx.Node],
        kind_of: dict[tuple[str, Any], str],
    ) -> None:
        self.gm, self.modules, self.records = gm, modules, records
        self.kinds, self.targets, self.folded, self.drawn = kinds, targets, folded, drawn
        self.kind_of = kind_of
        self.texts: dict[tuple[str, Any], str] = {}  # target_text per target: names are slow
        self._align: dict[str, tuple[str, ...]] | None = None

    def target(self, node: torch.fx.Node) -> str:
        text = self.texts.get((node.op, node.target))
        if text is None:
            text = self.texts[node.op, node.target] = target_text(node)
        return text

    def align(self, name: str) -> tuple[str, ...]:
        """A node's alignment keys: its rank among the drawn nodes of its target needs
        every node before it, so all of them are made at the first ask (a diff)."""
        if self._align is None:
            seen: dict[str, int] = {}
            self._align = {n.name: _align_keys(n, seen, self.target(n)) for n in self.drawn}
        return self._align[name]

    def fill(self, node: torch.fx.Node) -> dict[str, Any]:
        """The deferred fields of ``node``'s drawing."""
        kind = self.kinds.get(node.name)
        return self.fields(node, _kind(node, self.kind_of) if kind is None else kind)

    def fields(self, node: torch.fx.Node, kind: str) -> dict[str, Any]:
        records, targets, gm = self.records, self.targets, self.gm
        record = records.get(node.name)
        shape = _shape_text(node, record, gm)
        target = self.target(node)
        title = targets.get(node.name) or _title(node, self.modules, kind, target)
        lines = [shape] if shape else []
        if kind == "collective":  # its reduce op and group, read from its arguments
            lines.append(collective_text(node))
        fetched = tuple(
            (_fetch_name(f, targets), _shape_text(f, records.get(f.name), gm))
            for f in node.all_input_nodes
            if f in self.folded
        )
        if fetched:
            lines.append(_fetched_line(fetched))
        return {
            "title": title,
            "lines": lines,
            "color_key": target if node.op.startswith("call") else kind,
            "out_label": shape.split(" ")[0] if shape else "",
            "align": functools.partial(self.align, node.name),
            "folded": fetched,
            "tooltip": functools.partial(
                _make_tooltip, node, kind, title, shape, record, fetched, targets, target
            ),
        }


def _kind(node: torch.fx.Node, known: dict[tuple[str, Any], str]) -> str:
    """The node's op, or ``collective``: found once per op and target."""
    key = (node.op, node.target)
    try:
        kind = known.get(key)
    except TypeError:  # an unhashable target
        return "collective" if is_collective(node) else node.op
    if kind is None:
        kind = known[key] = "collective" if is_collective(node) else node.op
    return kind


def _param_counts(modules: Mapping[str, torch.nn.Module]) -> dict[str, int]:
    """Parameters under each module path, each parameter counted once, under its first
    name (as ``gm.named_parameters()`` names it), read from the modules already listed:
    a generator per module is slow when a graph has tens of thousands of them."""
    counts: dict[str, int] = {}
    seen: set[int] = set()
    for path, module in modules.items():  # named_modules' order: a shared one's first path
        own: int | None = None
        for p in module._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                own = (own or 0) + p.numel()
        while own is not None and path:  # the module and each module it sits in
            counts[path] = counts.get(path, 0) + own
            path = path.rpartition(".")[0]
    return counts


def _prefixes(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _fetch_name(node: torch.fx.Node, targets: Mapping[str, str]) -> str:
    return targets.get(node.name) or (str(node.target) if node.op == "get_attr" else node.name)


def _fetched_line(fetched: tuple[tuple[str, str], ...]) -> str:
    """``+ weight 64×64 · bias 64``: the folded inputs by their last name and shape."""
    return "+ " + " · ".join(
        f"{name.rsplit('.', 1)[-1]} {shape.split(' ')[0]}".strip() for name, shape in fetched
    )


def _is_real(module: torch.nn.Module) -> bool:
    """Not one of the plain ``nn.Module`` placeholders a GraphModule makes for containers."""
    return type(module) is not torch.nn.Module


def _align_keys(node: torch.fx.Node, seen: dict[str, int], text: str) -> tuple[str, ...]:
    """How a diff finds this node in another graph: provenance, name, target and rank."""
    sources = [getattr(s, "name", None) for s in node.meta.get("from_node") or ()]
    target = f"{node.op}:{text}"
    rank = seen[target] = seen.get(target, -1) + 1
    return (*(f"name:{s}" for s in sources if s), f"name:{node.name}", f"target:{target}#{rank}")


def module_label(module: torch.nn.Module) -> str:
    """``Linear(1000→100)``, ``Conv2d(3→64, k=7, s=2)``, ``Embedding(50257, 768)``;
    other modules by class name."""
    kind = type(module).__name__
    if isinstance(module, torch.nn.Linear):
        return f"{kind}({module.in_features}→{module.out_features})"
    if isinstance(module, CONV_MODULES):
        conv: Any = module
        k = "×".join(map(str, conv.kernel_size))
        s = "×".join(map(str, conv.stride))
        return f"{kind}({module.in_channels}→{module.out_channels}, k={k}, s={s})"
    if isinstance(module, torch.nn.Embedding):
        return f"{kind}({module.num_embeddings}, {module.embedding_dim})"
    if isinstance(module, NORM_MODULES):
        size = getattr(module, "normalized_shape", None) or (getattr(module, "num_features", ""),)
        return f"{kind}({', '.join(map(str, size))})"
    return kind


def _title(
    node: torch.fx.Node, modules: Mapping[str, torch.nn.Module], kind: str, target: str
) -> str:
    if node.op == "call_module":
        module = modules.get(str(node.target))
        return module_label(module) if module is not None else str(node.target)
    if node.op == "call_method":
        return f".{node.target}()"
    if node.op == "get_attr" or kind in ("parameter", "buffer", "constant"):
        return str(node.target) if node.op == "get_attr" else node.name
    if node.op == "placeholder":
        return str(node.target)
    return target


def _shape_text(
    node: torch.fx.Node, record: NodeRecord | None, gm: torch.nn.Module | None = None
) -> str:
    """``64×100 f32`` from the record, else from ShapeProp/export metadata, else (for a
    parameter fetch) from the tensor itself."""
    if record is not None and record.outputs:
        first = record.outputs[0]
        more = f" (+{len(record.outputs) - 1})" if len(record.outputs) > 1 else ""
        return f"{format_shape(first.shape)} {_short(dtype_name(first.dtype))}{more}"
    meta = node.meta.get("val", node.meta.get("tensor_meta"))
    if isinstance(meta, (list, tuple)) and meta:
        meta = meta[0]
    if meta is None and gm is not None:
        meta = fetched_tensor(gm, node)
    shape, dtype = getattr(meta, "shape", None), getattr(meta, "dtype", None)
    if shape is None or not isinstance(dtype, torch.dtype):
        return ""
    return f"{format_shape(tuple(d if isinstance(d, int) else str(d) for d in shape))} {_short(dtype_name(dtype))}"


def _short(dtype: str) -> str:
    return _ABBREVIATIONS.get(dtype, dtype)


def _make_tooltip(
    node: torch.fx.Node,
    kind: str,
    title: str,
    shape: str,
    record: NodeRecord | None,
    fetched: tuple[tuple[str, str], ...],
    targets: Mapping[str, str],
    target: str,
) -> str:
    """A node's tooltip: its op, target, arguments, module, output and statistics, the
    parameters folded into it and its source line."""
    tooltip = _tooltip(node, title, shape, record, target)
    if kind in ("parameter", "buffer", "constant") and node.name in targets:
        tooltip = f"{kind} {targets[node.name]}\n{tooltip}"
    if fetched:
        tooltip += "\nparameters and buffers:" + "".join(
            f"\n  {n}: {shape or '?'}" for n, shape in fetched
        )
    return tooltip


def _tooltip(
    node: torch.fx.Node, title: str, shape: str, record: NodeRecord | None, target: str
) -> str:
    lines = [f"{node.name}: {node.op} {title}"]
    if node.op not in ("placeholder", "output", "get_attr"):
        lines.append(f"target: {target}")
    if node.args:
        lines.append(f"args: {_brief(node.args)}")
    if node.kwargs:
        lines.append(f"kwargs: {_brief(node.kwargs)}")
    path = module_path(node)
    if path:
        lines.append(f"module: {path}")
    if shape:
        lines.append(f"output: {shape}")
    if record is not None:
        for summary in record.outputs[:4]:
            if summary.mean is not None:
                lines.append(
                    f"{summary.path or 'value'}: min {summary.min:.4g} max {summary.max:.4g} "
                    f"mean {summary.mean:.4g} std {summary.std if summary.std is None else format(summary.std, '.4g')}"
                )
            if summary.nonfinite_count:
                lines.append(f"NaN {summary.nan}, +Inf {summary.posinf}, -Inf {summary.neginf}")
        if record.error is not None:
            lines.append(f"error: {type(record.error).__name__}: {record.error}")
    source = source_line(node)
    if source:
        lines.append(f"source: {source}")
    return "\n".join(lines)


def _brief(value: Any, limit: int = 200) -> str:
    text = repr(map_arg(value, _named))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _named(node: torch.fx.Node) -> Any:
    return _Named(node.name)


class _Named:
    """Shows a node argument as its name in tooltips."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"%{self.name}"
