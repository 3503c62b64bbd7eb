"""Exported graphs of models whose output pytree cannot hold.

``torch.export`` returns only what pytree can flatten. A language model's output holds a
``DynamicCache`` (tensors in plain attributes), so its export traced the whole model and
then failed. While it exports, the model's forward returns the tensors of its output
instead (:func:`flat_output`), and the graph's last node (:class:`RebuiltOutput`) puts
each call's tensors back into the traced output's structure: the call's output object,
with this run's tensors in it.

    >>> import torch
    >>> class Cache:  # an object pytree does not know
    ...     def __init__(self, k): self.keys = [k]
    >>> class M(torch.nn.Module):
    ...     def forward(self, x): return {"y": x + 1, "cache": Cache(x * 2)}
    >>> m = M()
    >>> with flat_output(m) as traced:
    ...     program = torch.export.export(m, (torch.ones(2),))
    >>> rebuild = RebuiltOutput(traced.output)
    >>> out = rebuild(program.module()(torch.zeros(2)))
    >>> out["y"].tolist(), out["cache"].keys[0].tolist(), "forward" in vars(m)
    ([1.0, 1.0], [0.0, 0.0], False)
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree  # private, stable since torch 1.13

from fxviz._capture._segments import substitute, tensors_in
from fxviz.errors import TraceError

__all__ = ["RebuiltOutput", "cannot_flatten", "flat_output"]

# What torch.export returns as it is (AOTAutograd's known output types, less its own)
_RETURNABLE = (torch.Tensor, int, float, bool, str, type(None), torch.ScriptObject)


class _Traced:
    """What :func:`flat_output` saw: the output of the traced call, when pytree could not
    hold it (else ``None``: the forward's output went to export as it was)."""

    output: Any = None


@contextlib.contextmanager
def flat_output(module: torch.nn.Module, hooked: bool = False) -> Iterator[_Traced]:
    """While the block runs (``torch.export.export(module, ...)``), ``module``'s forward
    returns the tensors of its output (:func:`tensors_in`'s order) where pytree cannot
    flatten that output, and the output itself otherwise. Only in this thread: a call
    from another one gets the plain forward. The forward is the instance's again after.
    Nothing is changed for a module with forward hooks, or with ``hooked`` (global forward
    hooks of the user's are set): they would see the tensors."""
    traced = _Traced()
    if hooked or module._forward_hooks:
        # a hook sees (and may change) forward's output: it must get the real one, so the
        # output is left to torch.export (which refuses one it cannot flatten)
        yield traced
        return
    owner = threading.get_ident()
    attrs = vars(module)
    had, before = "forward" in attrs, attrs.get("forward")
    forward = module.forward

    @functools.wraps(forward)  # torch.export names the inputs from its signature
    def flattening(*args: Any, **kwargs: Any) -> Any:
        out = forward(*args, **kwargs)
        if threading.get_ident() != owner or not cannot_flatten(out):
            return out
        traced.output = out
        return tuple(tensors_in(out))

    attrs["forward"] = flattening  # bypasses nn.Module.__setattr__ (no write to watch)
    try:
        yield traced
    finally:
        if had:
            attrs["forward"] = before
        else:
            attrs.pop("forward", None)


def cannot_flatten(value: Any) -> bool:
    """Whether ``value`` holds, among its pytree leaves, an object with tensors inside
    (``torch.export`` would refuse to return it).

    >>> cannot_flatten({"y": torch.ones(1)}), cannot_flatten([type("C", (), {"t": 1})()])
    (False, False)
    """
    leaves, _ = pytree.tree_flatten(value)
    return any(not isinstance(leaf, _RETURNABLE) and tensors_in(leaf) for leaf in leaves)


class RebuiltOutput:
    """The target of an exported graph's last node when the model's output is an object
    pytree does not know: called with the graph's flat tensors, it returns the traced
    output's structure (containers and plain objects copied, non-tensor values as traced)
    with those tensors where the traced ones were. The traced tensors are not kept: each
    slot is an empty tensor standing in for one."""

    __name__ = __qualname__ = "unflatten"
    __module__ = "fxviz"
    writes_nothing = True  # graph plumbing (see fxviz._torch_compat.writes_nothing)

    def __init__(self, traced: Any) -> None:
        tensors = tensors_in(traced)
        self.slots = [torch.empty(0) for _ in tensors]
        stand_ins = {id(t): slot for t, slot in zip(tensors, self.slots, strict=True)}
        self.template = substitute(traced, stand_ins, {})
        left = [t for t in tensors_in(self.template) if not any(t is s for s in self.slots)]
        if left:  # held where tensors_in looks and substitute does not (a set)
            kind = type(traced)
            raise TraceError(
                f"the output ({kind.__module__}.{kind.__qualname__}) holds tensors fxviz "
                "cannot put back after an export. Capture one run instead: "
                "fxviz.trace(model, *args, method='dynamo')"
            )

    def __call__(self, flat: list[Any]) -> Any:
        if len(flat) != len(self.slots):
            raise TraceError(
                f"the exported graph gave {len(flat)} tensors where its output holds "
                f"{len(self.slots)}"
            )
        return substitute(
            self.template, {id(s): v for s, v in zip(self.slots, flat, strict=True)}, {}
        )

    def __repr__(self) -> str:
        kind = type(self.template)
        return f"<unflatten {kind.__module__}.{kind.__qualname__}>"
