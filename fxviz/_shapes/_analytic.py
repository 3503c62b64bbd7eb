"""FLOPs per node from recorded shapes and targets, without running anything again.

Each node that can carry FLOPs is counted by torch's own formulas
(``torch.utils.flop_counter``) applied to the shapes the recording holds, so the numbers
are those of ``FlopCounterMode``; a node whose count needs the op's own decomposition
(``einsum``, a ``matmul`` of a vector) runs once on meta tensors under the counter. Every
other op counts 0, as in torch. The counts are cached on the graph per input signature.
"""

from __future__ import annotations

import math
import operator
import re
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch.fx.node import map_arg

if TYPE_CHECKING:
    from fxviz._record._records import Recording

__all__ = ["analytic_flops", "remember_flops"]

# Names of ops that may reach a counted aten op (mm, bmm, convolution, attention...).
_COMPUTES = re.compile(
    r"mm|matmul|linear|conv|attention|einsum|tensordot|multi_dot|bilinear|lstm|gru|rnn|cdist"
)
_TENSORS = (torch.Tensor, torch.nn.Parameter)
_LINEAR_MODULES = (torch.nn.Linear,)
_PLAIN = ("math", "builtins", "_operator", "operator", "cmath")
_CONV_MODULES = (torch.nn.modules.conv._ConvNd,)


class _Unknown(Exception):
    """This node's count needs the whole-graph fake pass."""


def analytic_flops(recording: Recording) -> dict[str, int] | None:
    """Each recorded node's FLOPs from the recorded shapes, or ``None`` when a node's count
    cannot be told without running it (a user's leaf module, a symbolic size).

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(8, 4), torch.ones(3, 8))
    >>> analytic_flops(rec)["linear"] == 2 * 3 * 8 * 4
    True
    """
    gm = recording.graph_module
    graph = getattr(gm, "graph", None)
    if not isinstance(graph, torch.fx.Graph):
        return None
    signature = _signature(recording, graph)
    cache = _cache(graph)
    if signature in cache:
        return cache[signature]
    try:
        found: dict[str, int] | None = {
            node.name: _node_flops(node, recording, gm)
            for node in graph.nodes
            if node in recording.env
            or (node.name in recording and recording[node.name].error is None)
        }
    except _Unknown:
        return None
    if signature is not None:
        cache[signature] = found
    return found


def remember_flops(recording: Recording, flops: dict[str, int]) -> None:
    """Cache counts found otherwise (the fake pass) on the graph, as :func:`analytic_flops`
    caches its own, for the next recording of the same graph and input signature."""
    graph = getattr(recording.graph_module, "graph", None)
    if isinstance(graph, torch.fx.Graph) and recording.complete:
        signature = _signature(recording, graph)
        if signature is not None:
            _cache(graph)[signature] = flops


def _cache(graph: torch.fx.Graph) -> dict[Any, dict[str, int]]:
    return graph.__dict__.setdefault("_fxviz_flops", {})


def _signature(recording: Recording, graph: torch.fx.Graph) -> Any:
    """The placeholders' shapes and dtypes (``None``, never cached, when one is missing)."""
    parts: list[Any] = [len(graph.nodes)]
    for node in graph.find_nodes(op="placeholder"):
        if node.name not in recording:
            return None
        record = recording[node.name]
        parts.append(tuple((o.shape, o.dtype) for o in record.outputs))
    parts.append(len(recording))
    return tuple(parts)


def _shape(arg: Any, recording: Recording) -> tuple[int, ...]:
    if not isinstance(arg, torch.fx.Node):
        if isinstance(arg, torch.Tensor):
            return tuple(arg.shape)
        raise _Unknown
    value = recording.env.get(arg)
    if isinstance(value, torch.Tensor) and type(value) in _TENSORS:  # no record (statistics)
        return tuple(value.shape)
    if arg.name not in recording:
        raise _Unknown
    shape = recording[arg.name].shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise _Unknown
    return tuple(shape)  # type: ignore[arg-type]


def _node_flops(node: torch.fx.Node, recording: Recording, gm: Any) -> int:
    try:
        return _counted(node, recording, gm)
    except _Unknown:
        raise
    except Exception:  # a formula's assumption does not hold (grouped-query attention...)
        return _meta_flops(node, recording)


def _counted(node: torch.fx.Node, recording: Recording, gm: Any) -> int:
    if node.op == "call_module":
        return _module_flops(node, recording, gm)
    if node.op not in ("call_function", "call_method"):
        return 0
    target = node.target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        from torch.utils.flop_counter import flop_registry

        packet = getattr(target, "_overloadpacket", target)
        if packet in flop_registry:
            return _meta_flops(node, recording)
        name = packet.__name__  # aten.linear: counted as what it decomposes to
    else:
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if target is operator.matmul or name in ("matmul", "__matmul__"):
        return _matmul_flops(node, recording)
    if not isinstance(target, str | torch._ops.OpOverload) and not _torch_owned(target):
        if target in vars(operator).values() or getattr(target, "__module__", "") in _PLAIN:
            return 0  # Python's own (operator, math, builtins): no tensor op
        return _meta_flops(node, recording)  # a user's wrapped function
    if not _COMPUTES.search(name):
        return 0
    args = node.args
    if name == "linear":
        x, w = _shape(args[0], recording), _shape(_arg(node, 1, "weight"), recording)
        return 2 * math.prod(x) * w[0]
    if name in ("mm", "bmm", "addmm", "baddbmm"):
        out = _shape(node, recording)
        inner = _shape(args[-1] if name in ("mm", "bmm") else args[2], recording)[-2]
        return 2 * math.prod(out) * inner
    if name == "scaled_dot_product_attention":
        from torch.utils.flop_counter import sdpa_flop_count

        q, k, v = (_shape(_arg(node, i, n), recording) for i, n in enumerate("qkv"))
        return sdpa_flop_count(_batched(q), _batched(k), _batched(v))
    if name.startswith("conv") and "transpose" not in name and name[4:] in ("1d", "2d", "3d"):
        from torch.utils.flop_counter import conv_flop_count

        x, w = _shape(args[0], recording), _shape(_arg(node, 1, "weight"), recording)
        out = _shape(node, recording)
        if len(x) == len(w) - 1:  # unbatched
            x, out = (1, *x), (1, *out)
        return conv_flop_count(list(x), list(w), list(out), transposed=False)
    return _meta_flops(node, recording)


def _arg(node: torch.fx.Node, index: int, keyword: str) -> Any:
    if len(node.args) > index:
        return node.args[index]
    for key in (keyword, {"q": "query", "k": "key", "v": "value"}.get(keyword, keyword)):
        if key in node.kwargs:
            return node.kwargs[key]
    raise _Unknown


def _batched(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Attention's shape as ``(batch, heads, length, dim)``."""
    while len(shape) < 4:
        shape = (1, *shape)
    return (math.prod(shape[:-3]), *shape[-3:])


def _torch_owned(target: Any) -> bool:
    owner = getattr(target, "__objclass__", None)  # a Tensor method
    module = getattr(target, "__module__", None) or getattr(owner, "__module__", None) or ""
    return module.startswith("torch")


def _matmul_flops(node: torch.fx.Node, recording: Recording) -> int:
    a, b = _shape(node.args[0], recording), _shape(node.args[1], recording)
    if len(a) < 2 or len(b) < 2:  # a vector: mv/dot count 0, a row vector mm; let torch say
        return _meta_flops(node, recording)
    return 2 * math.prod(_broadcast(a[:-2], b[:-2])) * a[-2] * a[-1] * b[-1]


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Batch dims broadcast (``torch.broadcast_shapes`` imports ``torch._refs``: seconds).

    >>> _broadcast((2, 1, 3), (4, 1))
    (2, 4, 3)
    """
    a, b = (1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b
    return tuple(max(x, y) if 1 in (x, y) else x for x, y in zip(a, b, strict=True))


def _module_flops(node: torch.fx.Node, recording: Recording, gm: Any) -> int:
    module = gm.get_submodule(node.target)
    x = _shape(node.args[0], recording) if node.args else None
    if isinstance(module, _LINEAR_MODULES) and x is not None:
        return 2 * math.prod(x) * module.out_features
    if isinstance(module, _CONV_MODULES) and x is not None:
        from torch.utils.flop_counter import conv_flop_count

        out = _shape(node, recording)
        if len(x) == module.weight.dim() - 1:
            x, out = (1, *x), (1, *out)
        return conv_flop_count(
            list(x), list(module.weight.shape), list(out), transposed=module.transposed
        )
    kind = type(module)
    if next(module.children(), None) is not None:
        raise _Unknown  # a container traced as a leaf: what it holds may compute
    if kind.__module__.startswith("torch.") and not _COMPUTES.search(kind.__name__.lower()):
        return 0  # an activation, norm, pooling, dropout, embedding, export's guards...
    raise _Unknown  # a user's leaf module, attention, a recurrent layer


def _meta_flops(node: torch.fx.Node, recording: Recording) -> int:
    """Run this one node on meta tensors of the recorded shapes under torch's counter."""
    from torch.utils.flop_counter import FlopCounterMode

    from fxviz._shapes._counting import _missing_formulas

    def meta(arg: torch.fx.Node) -> Any:
        value = recording.env.get(arg)
        if isinstance(value, torch.Tensor) and type(value) in _TENSORS:
            return torch.empty(value.shape, dtype=value.dtype, device="meta")
        if arg in recording.env and not isinstance(value, torch.Tensor | tuple | list | dict):
            return value  # a number, a string, None: the value itself
        if arg.name not in recording:
            raise _Unknown
        record = recording[arg.name]
        if len(record.outputs) != 1 or record.dtype is None:
            if record.kept and not isinstance(record.value, torch.Tensor):
                return record.value
            raise _Unknown
        return torch.empty(_shape(arg, recording), dtype=record.dtype, device="meta")

    args = map_arg(node.args, meta)
    kwargs = map_arg(node.kwargs, meta)
    try:
        with FlopCounterMode(display=False, custom_mapping=_missing_formulas()) as mode:
            if node.op == "call_method":
                getattr(args[0], node.target)(*args[1:], **kwargs)  # type: ignore[arg-type]
            else:
                node.target(*args, **kwargs)  # type: ignore[operator]
    except Exception:
        raise _Unknown from None
    return int(mode.get_total_flops())
