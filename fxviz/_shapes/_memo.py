"""A meta pass that runs each distinct call once: later calls of the same op on inputs of
the same metadata are answered from what the first one made.

torch's meta kernels are mostly Python (``torch._refs``, ``torch._meta_registrations``):
on torch 2.13 an elementwise op costs ~0.1 ms on meta tensors, ``layer_norm`` ~1.2 ms,
where the CPU computes a small tensor's in ~5 µs. A model repeats its blocks, so most of
a graph's calls repeat a call made before on inputs of the same metadata (size, strides,
offset, dtype, grad flag, conj/neg bits), under the same grad and autocast modes and
default dtype. Such a call is answered from the first one's outputs (new meta tensors of
the same size, strides, dtype, grad flag and leafness; its FLOPs counted again) when it is

- a torch op (an ``OpOverload``, a function of ``torch``, ``operator``'s arithmetic), a
  tensor method, or a module of ``torch.nn`` without children or hooks (but
  ``FlopCounterMode``'s, which only tracks where FLOPs are counted), not named as one that
  writes in place (``add_``, ``inplace=True``), called on meta tensors and plain values
  only (numbers, strings, dtypes, slices...), and
- its first call gave tensors (alone, or in tuples and lists) of offset 0, viewing none
  of its inputs (made again, a view would own its memory: a report counts a view's as its
  base's), and wrote none of them (their version counters: ``F.embedding(max_norm=...)``
  renormalises its weight).

Anything else (a user's function, a value-dependent call, a view, a new kind of
argument) runs as before; so does every call under a torch mode of the caller's
(``propagate`` turns the memo off).

    >>> import torch
    >>> memo = MetaMemo()
    >>> x = torch.empty(2, 3, device="meta")
    >>> first = memo.call("call_function", torch.tanh, (x,), {}, lambda: torch.tanh(x))
    >>> again = memo.call("call_function", torch.tanh, (x,), {}, lambda: 1 / 0)
    >>> again.shape, again.device.type, again is first, memo.hits
    (torch.Size([2, 3]), 'meta', False, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch
import torch.fx
from torch.utils.module_tracker import ModuleTracker

from fxviz._capture._symbolic import global_mode
from fxviz._record._summary import iter_tensors
from fxviz._shapes._counting import FlopCounter
from fxviz._torch_compat import extract_tensor_metadata, is_alias_of

__all__ = ["MetaMemo"]

_PLAIN = (bool, int, float, complex, str, type(None), type(Ellipsis))
_HASHABLE = (torch.dtype, torch.device, torch.memory_format, torch.layout)
_TENSORS = (torch.Tensor, torch.nn.Parameter)
# operator's functions that write into their first argument
_WRITES = frozenset({
    "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul", "imatmul", "ior",
    "ipow", "irshift", "isub", "itruediv", "ixor", "setitem", "delitem",
})  # fmt: skip
# what every module's __dict__ holds; the rest is what a subclass set (its configuration)
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))


class MetaMemo:
    """The outputs of the calls made so far in one meta pass, by what they were called
    with; ``hits``: how many calls were answered without running."""

    def __init__(self) -> None:
        self._made: dict[Hashable, Any] = {}
        self._metadata: dict[Hashable, Any] = {}
        self.hits = 0

    def tensor_metadata(self, t: torch.Tensor) -> Any:
        """``extract_tensor_metadata(t)``, found once for each size, strides, dtype and
        grad flag of a meta tensor (its memory format is read off them in Python)."""
        if type(t) not in _TENSORS or not t.is_meta or t.is_quantized:
            return extract_tensor_metadata(t)
        key = (tuple(t.shape), t.stride(), t.dtype, t.requires_grad)
        found = self._metadata.get(key)
        if found is None:
            found = self._metadata[key] = extract_tensor_metadata(t)
        return found

    def call(
        self,
        op: str,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run: Callable[[], Any],
        module: torch.nn.Module | None = None,
        counter: FlopCounter | None = None,
    ) -> Any:
        """What ``run()`` gives for node kind ``op`` (``call_function``, ``call_method``,
        ``call_module``: then ``module`` is the module called) of ``target`` on ``args``
        and ``kwargs``: made from an earlier call's outputs when it repeats one (and the
        FLOPs it counted credited to ``counter``, when one counts)."""
        key = _call_key(op, target, args, kwargs, module)
        if key is None:
            return run()
        made = self._made.get(key)
        if made is not None:
            self.hits += 1
            described, flops = made
            if counter is not None:
                counter.credit(flops)
            return _remake(described)
        given = _given(args, kwargs, module)
        versions = _versions(given)
        before = counter.total() if counter is not None else 0
        value = run()
        described = _described(value)
        if (
            described is not None
            and versions is not None
            and _versions(given) == versions  # it wrote no input (F.embedding's max_norm)
            and not _views_an_input(value, given)
        ):
            flops = counter.total() - before if counter is not None else 0
            self._made[key] = (described, flops)
        return value


def _call_key(
    op: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], module: Any
) -> Hashable | None:
    if op == "call_function":
        if not _pure_function(target):
            return None
        owner: Hashable = target
    elif op == "call_method":
        if not (args and type(args[0]) in _TENSORS) or target.endswith("_"):
            return None
        owner = target
    elif op == "call_module":
        owner = _module_key(module)
        if owner is None:
            return None
    else:
        return None
    inputs = _key((args, kwargs))
    if inputs is None:
        return None
    return (op, owner, inputs, global_mode(), torch.get_default_dtype())


def _pure_function(target: Any) -> bool:
    """A torch op or function, or one of ``operator``'s, that writes into no argument."""
    if isinstance(target, torch._ops.OpOverload):
        return not target._schema.is_mutable
    if isinstance(target, torch._ops.OpOverloadPacket):
        return not target.__name__.endswith("_")
    name = getattr(target, "__name__", "")
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return name not in _WRITES
    owner = getattr(target, "__module__", None) or ""
    return (owner == "torch" or owner.startswith("torch.")) and not name.endswith("_")


def _module_key(m: Any) -> Hashable | None:
    """A ``torch.nn`` module without children, hooks or ``inplace=True``, by its type,
    mode, configuration and parameters' and buffers' metadata."""
    if not type(m).__module__.startswith("torch.nn.modules.") or m._modules:
        return None
    if m._forward_hooks or m._forward_pre_hooks or getattr(m, "inplace", False):
        return None
    if not _only_tracking_hooks():
        return None
    config = [(k, _key(v)) for k, v in vars(m).items() if k not in _MODULE_INTERNALS]
    tensors = [(k, _key(t)) for k, t in (*m._parameters.items(), *m._buffers.items())]
    if any(v is None for _, v in config) or any(v is None for _, v in tensors):
        return None
    return (type(m), m.training, tuple(config), tuple(tensors))


def _only_tracking_hooks() -> bool:
    """Whether every global module hook is a ``ModuleTracker``'s (``FlopCounterMode``
    tracks which modules a FLOP is counted in: fxviz reads only the totals)."""
    hooks = (
        *torch.nn.modules.module._global_forward_hooks.values(),
        *torch.nn.modules.module._global_forward_pre_hooks.values(),
    )
    return all(isinstance(getattr(h, "__self__", None), ModuleTracker) for h in hooks)


def _key(value: Any) -> Hashable | None:
    """``value`` as a hashable key, tensors by their metadata; ``None`` where something in
    it is neither a meta tensor nor a plain value (nothing is known of what it does)."""
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        if not value.is_meta or value.layout != torch.strided:
            return None
        return (
            kind, value.shape, value.stride(), value.storage_offset(), value.dtype,
            value.requires_grad, value.is_conj(), value.is_neg(),
        )  # fmt: skip
    if kind in _PLAIN or kind in _HASHABLE or kind is torch.Size:
        return (kind, value)
    if kind is tuple or kind is list or isinstance(value, (tuple, list)):
        items = [_key(v) for v in value]
        return None if None in items else (kind, tuple(items))
    if isinstance(value, dict):
        pairs = [(k, _key(v)) for k, v in value.items()]
        return None if any(v is None for _, v in pairs) else (kind, tuple(pairs))
    if kind is slice:
        parts = (_key(value.start), _key(value.stop), _key(value.step))
        return None if None in parts else (kind, parts)
    return None


def _described(value: Any) -> Any:
    """What :func:`_remake` needs to make ``value`` again: tensors (at least one) by their
    metadata, in tuples and lists; ``None`` for anything else."""
    found = _outputs(value)
    return None if found is None or not _has_tensor(found) else found


def _outputs(value: Any) -> Any:
    kind = type(value)
    if kind is torch.Tensor:
        if (
            not value.is_meta
            or value.layout != torch.strided
            or value.storage_offset()
            or value.is_conj()
            or value.is_neg()
        ):
            return None
        made = (
            "t", tuple(value.shape), value.stride(), value.dtype, value.requires_grad,
            value.is_leaf,
        )  # fmt: skip
        return made if _remade_alike(made) else None
    if kind in (tuple, list):
        items = [_outputs(v) for v in value]
        return None if None in items else ("seq", kind, items)
    if kind in _PLAIN:
        return ("v", value)
    return None


def _views_an_input(value: Any, given: list[torch.Tensor]) -> bool:
    """Whether a tensor of ``value`` shares memory with one ``given`` (a view: made again,
    it would not, and a report counts a view's memory as its base's)."""
    made = [t for _, t in iter_tensors(value)]
    return any(is_alias_of(t, g) for g in given for t in made)


def _versions(tensors: list[torch.Tensor]) -> list[int] | None:
    """The tensors' version counters (``None`` where one has none: not answered)."""
    try:
        return [t._version for t in tensors]
    except RuntimeError:  # an inference tensor
        return None


def _given(args: Any, kwargs: Any, module: Any) -> list[torch.Tensor]:
    """The tensors a call is given: in its arguments, and a module's own."""
    given = [t for _, t in iter_tensors((args, kwargs))]
    if module is not None:
        given += [*module.parameters(recurse=False), *module.buffers(recurse=False)]
    return given


def _has_tensor(described: Any) -> bool:
    if described[0] == "t":
        return True
    return described[0] == "seq" and any(_has_tensor(d) for d in described[2])


def _remake(described: Any) -> Any:
    tag = described[0]
    if tag == "v":
        return described[1]
    if tag == "seq":
        return described[1](_remake(d) for d in described[2])
    _, shape, stride, dtype, grad, leaf = described
    t = torch.empty_strided(shape, stride, dtype=dtype, device="meta", requires_grad=grad)
    # a tensor an op made (not a leaf) takes an in-place op where a leaf that requires
    # grad refuses one (torch.zeros(n, requires_grad=True) makes such a leaf); clone
    # keeps dense strides
    return t.clone() if grad and not leaf else t


def _remade_alike(described: Any) -> bool:
    """Whether :func:`_remake` gives these strides back (``clone`` makes a tensor that
    needs grad dense, so an expanded or sliced one is not remade)."""
    return _remake(described).stride() == described[2]
