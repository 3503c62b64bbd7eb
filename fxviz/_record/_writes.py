"""Which inputs a node is about to write in place, and which earlier outputs share memory.

A recording must show each value as it was when its node ran, even when a later node
writes into it (``add_``, ``relu_(inplace=True)``, ``x[i] = v``, ``out=``). fxviz
foresees such writes from the op's schema or name, snapshots only the values about to be
overwritten, and checks ``Tensor._version`` afterwards to catch writes it did not foresee.

    >>> import torch, torch.fx
    >>> gm = torch.fx.symbolic_trace(lambda x: (x * 2).add_(1))
    >>> [written_locations(n, {}) for n in gm.graph.nodes]
    [(), (), (('arg', 0),), ()]
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.fx
from torch.fx.node import map_arg

from fxviz._capture._segments import PythonSegment
from fxviz._nodes import target_text
from fxviz._torch_compat import (
    OpOverload,
    OpOverloadPacket,
    op_name,
    op_written_arguments,
    shares_storage,
    storage_id,
    writes_nothing,
)
from fxviz.errors import FxvizWarning

__all__ = [
    "aliased_inputs",
    "flat_tensors",
    "graph_module_target",
    "runs_unknown_code",
    "storage_key",
    "tensor_inputs",
    "warn_unforeseen",
    "written_locations",
    "written_tensors",
]

_T = TypeVar("_T")
Location = tuple[str, Any]  # ("arg", index) or ("kwarg", name)

_INPLACE_OPERATORS = frozenset(
    {
        operator.setitem,
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
        operator.imatmul,
    }
)
# ``a & b``, ``a | b``, ``not a``, ``a is b``: the trailing "_" only avoids a keyword (Dynamo
# graphs call ``operator.and_`` for every mask ``&``); they write nothing
_OPERATOR_WORDS = frozenset({operator.and_, operator.or_, operator.not_, operator.is_})
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def written_locations(node: torch.fx.Node, submodules: Mapping[str, Any]) -> tuple[Location, ...]:
    """Where in ``node.args``/``node.kwargs`` the node writes in place, foreseen statically."""
    found: list[Location] = []
    if "out" in node.kwargs:
        found.append(("kwarg", "out"))
    target = node.target
    if node.op == "call_function":
        found.extend(_running_stats_writes(node))
        if isinstance(target, PythonSegment):  # the model's tensors Python wrote there
            found.extend(("arg", i) for i in target.written)
        elif isinstance(target, torch._ops.HigherOrderOperator):
            found.extend(_region_writes(node, submodules))
        elif isinstance(target, (OpOverload, OpOverloadPacket)):
            found.extend(_schema_writes(target))
        elif (
            target in _INPLACE_OPERATORS
            or (target not in _OPERATOR_WORDS and _inplace_name(getattr(target, "__name__", "")))
            or _inplace_flag(target, node)
        ):
            found.append(("arg", 0))
            first = _first_parameter(target)
            if first is not None:
                found.append(("kwarg", first))  # nn.init.normal_(tensor=y)
    elif node.op == "call_method":
        if isinstance(target, str) and (_inplace_name(target) or target == "__setitem__"):
            found.append(("arg", 0))
    elif node.op == "call_module":
        module = submodules.get(str(target))
        # vars(), not getattr(): nn.Module.__getattr__ is slow when the name is missing
        if module is not None and vars(module).get("inplace") is True:
            found.append(("arg", 0))
    return tuple(dict.fromkeys(found))


# torch.export's regions: ``hop(*settings, body, *operands)``, the body a GraphModule whose
# placeholders are the operands, in order (a ``no_grad`` or ``autocast`` block)
_REGIONS = frozenset({"wrap_with_set_grad_enabled", "wrap_with_autocast"})


def _region_writes(node: torch.fx.Node, submodules: Mapping[str, Any]) -> list[Location]:
    """The operands a region's body writes in place (an EMA buffer's ``mul_`` inside
    ``torch.no_grad()``), as the region node's argument positions.

        >>> class Ema(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.register_buffer("avg", torch.zeros(2))
        ...     def forward(self, x):
        ...         with torch.no_grad():
        ...             self.avg.mul_(0.9).add_(x)
        ...         return x * 2
        >>> gm = torch.export.export(Ema(), (torch.ones(2),)).module()
        >>> region = next(n for n in gm.graph.nodes if "wrap" in str(n.target))
        >>> [region.args[i].name for _, i in _region_writes(region, dict(gm.named_modules()))]
        ['avg']
    """
    if getattr(node.target, "_name", None) not in _REGIONS:
        return []
    bodies = [
        (i, submodules.get(str(a.target)))
        for i, a in enumerate(node.args)
        if isinstance(a, torch.fx.Node) and a.op == "get_attr"
    ]
    at, body = next(((i, b) for i, b in bodies if isinstance(b, torch.fx.GraphModule)), (0, None))
    if body is None:
        return []
    written = _body_writes(body)
    return [("arg", at + 1 + k) for k in sorted(written) if at + 1 + k < len(node.args)]


def _body_writes(body: torch.fx.GraphModule) -> set[int]:
    """The positions of ``body``'s placeholders that its nodes write in place, through
    the aliases in-place ops and views return."""
    placeholders = body.graph.find_nodes(op="placeholder")
    root: dict[torch.fx.Node, int] = {p: k for k, p in enumerate(placeholders)}
    modules = dict(body.named_modules())
    written: set[int] = set()
    for n in body.graph.nodes:
        if n.op != "call_function":
            continue
        for kind, key in written_locations(n, modules):
            arg = n.args[key] if kind == "arg" and key < len(n.args) else None
            arg = n.kwargs.get(key) if kind == "kwarg" else arg
            for m in _nodes_in(arg):
                if m in root:
                    written.add(root[m])
        first = n.args[0] if n.args else None
        if first in root and _returns_alias(n.target):
            root[n] = root[first]
    return written


def _nodes_in(arg: Any) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    map_arg(arg, found.append)
    return found


def _returns_alias(target: Any) -> bool:
    """Whether an op gives back (a view of) its first input: ``add_``, ``view``."""
    if not isinstance(target, OpOverload):
        return False
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None


_KNOWN_MODULES = ("builtins", "_operator", "operator", "math")


def _setitem(obj: Any, key: Any, value: Any) -> Any:
    obj[key] = value
    return obj


def graph_module_target(target: Any) -> Any:
    """What a ``call_function`` node with ``target`` calls, for its value to be the one
    ``GraphModule``'s code gives it: ``operator.setitem`` runs as ``obj[key] = value;
    node = obj`` there (torch.fx's ``Interpreter`` gives setitem's ``None``); every other
    target as itself.

        >>> x = torch.zeros(2)
        >>> graph_module_target(operator.setitem)(x, 0, 7.0) is x, x
        (True, tensor([7., 0.]))
    """
    return _setitem if target is operator.setitem else target


def runs_unknown_code(node: torch.fx.Node, submodules: Mapping[str, Any]) -> bool:
    """Whether a node calls code fxviz does not know (a wrapped function of the user's, a
    module of the user's that the trace kept whole), which could write into its inputs
    where :func:`written_locations` cannot foresee it.

    torch's own functions, ops, tensor methods and ``torch.nn`` modules write only where
    their schema, name or ``inplace`` flag says.

        >>> import torch, torch.fx
        >>> gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU()))
        >>> [runs_unknown_code(n, dict(gm.named_modules())) for n in gm.graph.nodes]
        [False, False, False]
    """
    target = node.target
    if node.op == "call_function":
        # a capture's Python segment replays values it holds: it writes no input but the
        # model tensors it names (``written_locations`` foresees them)
        if isinstance(target, (OpOverload, OpOverloadPacket, PythonSegment)):
            return False
        if writes_nothing(target):  # an exported graph's output unflatten
            return False
        module = getattr(target, "__module__", None) or ""
        return not (module in _KNOWN_MODULES or module == "torch" or module.startswith("torch."))
    if node.op == "call_module":
        submodule = submodules.get(str(target))
        if writes_nothing(submodule):  # torch.export's guard checks
            return False
        return not type(submodule).__module__.startswith("torch.nn.")
    if node.op == "call_method":  # ``__iadd__`` and kin write without a trailing "_"
        return str(target).startswith("__")
    return False


def written_tensors(
    node: torch.fx.Node, locations: Iterable[Location], env: Mapping[torch.fx.Node, Any]
) -> list[torch.Tensor]:
    """The tensors at ``locations``, looked up in the interpreter's ``env``."""
    tensors: list[torch.Tensor] = []
    for kind, key in locations:
        if kind == "arg":
            arg = node.args[key] if key < len(node.args) else None
        else:
            arg = node.kwargs.get(key)
        value = map_arg(arg, lambda n: env.get(n))
        tensors.extend(flat_tensors(value))
    return tensors


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flat_tensors(item)]
    return []


def _inplace_name(name: str) -> bool:
    """``add_``, ``relu_``, ``_foreach_mul_``; not dunders such as ``__iand__``'s kin."""
    return name.endswith("_") and not name.startswith("__")


def _weak_cache(fn: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """Like ``functools.cache`` for a function of one callable, without keeping the
    callable alive: a target can be a closure or a bound method that holds a model."""
    weak: weakref.WeakKeyDictionary[Any, _T] = weakref.WeakKeyDictionary()
    strong: dict[Any, _T] = {}  # builtins cannot be weakly referenced (and never die)

    @functools.wraps(fn)
    def cached(key: Any) -> _T:
        try:
            cache: Any = weak
            return weak[key]
        except TypeError:
            cache = strong
            if key in strong:
                return strong[key]
        except KeyError:
            pass
        value = fn(key)
        with contextlib.suppress(TypeError):  # unhashable: not cached
            cache[key] = value
        return value

    return cached


@_weak_cache
def _first_parameter(target: Callable[..., Any]) -> str | None:
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0].name if params and params[0].kind is params[0].POSITIONAL_OR_KEYWORD else None


# Ops that update running statistics in place without saying so in their schema and
# without bumping Tensor._version: (positions of running_mean/var, the flag that turns the
# update on, its position, its default).
_ATEN_NORM = ((3, 4), 5, None)
_HIDDEN_WRITERS: dict[str, tuple[tuple[int, int], int, bool | None]] = {
    "aten::batch_norm": _ATEN_NORM,
    "aten::native_batch_norm": _ATEN_NORM,
    "aten::cudnn_batch_norm": _ATEN_NORM,
    "aten::miopen_batch_norm": _ATEN_NORM,
    "aten::instance_norm": _ATEN_NORM,
    "torch.nn.functional.batch_norm": ((1, 2), 5, False),
    "torch.nn.functional.instance_norm": ((1, 2), 5, True),
}
_FLAG_NAMES = ("training", "use_input_stats")


def _running_stats_writes(node: torch.fx.Node) -> list[Location]:
    """Running-statistics buffers that batch/instance norm update while training."""
    target = node.target
    if isinstance(target, (OpOverload, OpOverloadPacket)):
        key = op_name(target)
    else:
        module = getattr(target, "__module__", None) or ""
        name = getattr(target, "__name__", "")
        key = f"aten::{name}" if module == "torch" else f"{module}.{name}"  # torch.batch_norm
    spec = _HIDDEN_WRITERS.get(key)
    if spec is None:
        return []
    positions, flag_at, default = spec
    if flag_at < len(node.args):
        flag = node.args[flag_at]
    else:
        flag = next((node.kwargs[k] for k in _FLAG_NAMES if k in node.kwargs), default)
    if flag is False:
        return []
    written: list[Location] = [("arg", i) for i in positions if i < len(node.args)]
    written += [("kwarg", k) for k in ("running_mean", "running_var") if k in node.kwargs]
    return written


# ops whose schema marks ``self`` written (``Tensor(a!)``) that change only its autograd
# state, never its values or its version (an exported language model's cache update
# runs ``detach_``): nothing of a recorded value to keep from them
_AUTOGRAD_ONLY = frozenset({"aten::detach_", "aten::requires_grad_"})


@functools.cache
def _schema_writes(target: OpOverload | OpOverloadPacket) -> tuple[Location, ...]:
    if isinstance(target, OpOverloadPacket):
        overloads = [getattr(target, name) for name in target.overloads()]
        return tuple(dict.fromkeys(loc for o in overloads for loc in _schema_writes(o)))
    if target._schema.name in _AUTOGRAD_ONLY:
        return ()
    found: list[Location] = []
    for i, name, kwarg_only in op_written_arguments(target):
        if not kwarg_only:
            found.append(("arg", i))
        found.append(("kwarg", name))
    return tuple(found)


def _inplace_flag(target: Any, node: torch.fx.Node) -> bool:
    """``F.relu(x, inplace=True)`` and ``F.dropout(x, 0.5, True, True)``."""
    if node.kwargs.get("inplace") is True:
        return True
    position = _inplace_position(target)
    return position is not None and position < len(node.args) and node.args[position] is True


@_weak_cache
def _inplace_position(target: Callable[..., Any]) -> int | None:
    try:
        params = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None
    return params.index("inplace") if "inplace" in params else None


def storage_key(t: torch.Tensor) -> int | None:
    """Identity of the memory under a real tensor (shared by its views), else ``None``."""
    if type(t) not in _PLAIN_TENSORS or t.is_meta or t.layout != torch.strided:
        return None
    return storage_id(t)


def tensor_inputs(
    inputs: Sequence[torch.fx.Node], values: Sequence[Any]
) -> list[tuple[torch.fx.Node, torch.Tensor, int]]:
    """``(input, tensor, version)`` for the tensors a node reads, to spot in-place writes."""
    found = []
    for n, value in zip(inputs, values, strict=True):
        if isinstance(value, torch.Tensor):
            if not value.is_inference():  # inference tensors have no version counter
                found.append((n, value, value._version))
        elif isinstance(value, (tuple, list)):
            found.extend(
                (n, t, t._version)
                for t in value
                if isinstance(t, torch.Tensor) and not t.is_inference()
            )
    return found


def aliased_inputs(
    value: Any, inputs: list[tuple[torch.fx.Node, torch.Tensor, int]]
) -> tuple[str, ...]:
    """Inputs whose storage a node's output shares: it is a view of them, or wrote into them."""
    outputs = _tensors(value)
    if not outputs:
        return ()
    found: list[str] = []
    for node, t, _ in inputs:
        for out in outputs:
            if shares_storage(out, t):
                if node.name not in found:
                    found.append(node.name)
                break
    return tuple(found)


def _tensors(value: Any) -> list[torch.Tensor]:
    """Tensors in a value and one level of tuple/list (what a node can write through)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def warn_unforeseen(
    node: torch.fx.Node,
    foreseen: Sequence[torch.Tensor],
    values: dict[str, Any],
    written: tuple[str, ...],
) -> None:
    """Warn when a node wrote to inputs (``values`` by name) in place somewhere
    ``written_locations`` did not foresee (``foreseen``: the tensors it did)."""
    keys = {storage_key(t) for t in foreseen}
    for name in written:
        if {storage_key(t) for t in _tensors(values.get(name))} & keys:
            continue
        warnings.warn(
            f"node {node.name!r} ({node.op} {target_text(node)}) wrote to {name!r} in "
            "place in a way fxviz did not foresee, so kept values that share its memory "
            "show it after that write (their statistics are from before). Please "
            "report the op.",
            FxvizWarning,
            stacklevel=3,
        )
