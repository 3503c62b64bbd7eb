"""``method="auto"``'s memory and probes, so it does not pay for methods that fail.

The method that captured a model class with inputs of one structure is tried right after
symbolic tracing (which fails in milliseconds) for the next model of that class, so the
costly methods that failed on the first one are not paid for again (a model's failed
export costs as much as a whole trace of it: seconds for a large one).

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

__all__ = ["auto_order", "forget", "remember"]

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
