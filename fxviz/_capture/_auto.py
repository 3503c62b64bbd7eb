"""``method="auto"``'s memory and probes, so it does not pay for methods that fail.

The method that captured a model class with inputs of one structure is tried right after
symbolic tracing (which fails in milliseconds) for the next model of that class, so the
costly methods that failed on the first one are not paid for again (a Hugging Face
model's failed export costs seconds). Before the first export of a model, one eager call
shows whether ``torch.export`` could return its output at all (a language model's
``DynamicCache``: export traces the whole model, then fails on it).

    >>> import torch
    >>> remember(torch.nn.ReLU(), ((torch.ones(1),), {}), "dynamo")
    >>> auto_order(torch.nn.ReLU(), ((torch.ones(2),), {}), ("symbolic", "export", "dynamo"))
    ('symbolic', 'dynamo', 'export')
    >>> forget()
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

from fxviz._capture._eager import eager_output
from fxviz._capture._segments import tensors_in
from fxviz._capture._state import UnrestorableWrite

__all__ = ["auto_order", "export_cannot_return", "forget", "remember"]

# model class -> {input structure: the method auto used}; classes are weakly held
_chosen: weakref.WeakKeyDictionary[type, dict[Any, str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_CHEAP = ("symbolic",)  # fails in milliseconds: always tried first


def auto_order(obj: Any, inputs: Any, order: tuple[str, ...]) -> tuple[str, ...]:
    """``order``, with the method that last captured a model of ``obj``'s class and inputs
    of this structure moved before every costly one (the rest keep their order: they are
    tried when it fails)."""
    key = _structure(obj, inputs)
    if key is None:
        return order
    with _lock:
        found = _chosen.get(type(obj), {}).get(key)
    if found is None or found not in order:
        return order
    cheap = tuple(name for name in order if name in _CHEAP and name != found)
    return (*cheap, found, *(name for name in order if name not in cheap and name != found))


def remember(obj: Any, inputs: Any, method: str) -> None:
    """Note that ``method`` captured ``obj`` (an ``nn.Module``) with ``inputs``."""
    key = _structure(obj, inputs)
    if key is not None:
        with _lock:
            _chosen.setdefault(type(obj), {})[key] = method


# What torch.export returns as it is (AOTAutograd's known output types, less its own)
_RETURNABLE = (torch.Tensor, int, float, bool, str, type(None), torch.ScriptObject)


def export_cannot_return(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """Why ``torch.export`` would fail on ``obj``'s output (``""``: it may not): one
    eager call (under ``torch.no_grad()``, leaving the model and the random stream as
    they were) whose output holds an object pytree does not know that holds tensors
    (export traces the whole model, then finds it in the output). A call that fails says
    nothing: export then reports its own error."""
    from torch.utils import _pytree as pytree  # private, stable since torch 1.13

    try:
        with torch.no_grad():
            leaves, _ = pytree.tree_flatten(eager_output(obj, args, kwargs))
    except UnrestorableWrite:
        raise  # the model is as the call left it: nothing may run it again
    except Exception:
        return ""
    for leaf in leaves:
        if not isinstance(leaf, _RETURNABLE) and tensors_in(leaf):
            kind = type(leaf)
            return (
                f"one call's output holds a {kind.__module__}.{kind.__qualname__}, which "
                "torch.export cannot return (pytree does not know it): export not tried"
            )
    return ""


def forget() -> None:
    """Forget every remembered method."""
    with _lock:
        _chosen.clear()


def _structure(obj: Any, inputs: Any) -> Any:
    """The inputs' tree and each leaf's type; ``None`` for what is not a module."""
    if not isinstance(obj, torch.nn.Module):
        return None
    from torch.utils import _pytree as pytree  # private, stable since torch 1.13

    leaves, spec = pytree.tree_flatten(inputs)
    key = (spec, *map(type, leaves))
    try:
        hash(key)
    except TypeError:  # an unhashable context in the tree: not remembered
        return None
    return key
