"""Keyword and nested inputs as one flat, named list: what a captured graph's placeholders take.

>>> import torch
>>> def f(x, mask=None, *, scale=1.0):
...     return x
>>> names, leaves = flatten_inputs(f, (torch.ones(2),), {"scale": 2.0, "mask": None})
>>> names, leaves[1:]
(['x', 'mask', 'scale'], [None, 2.0])
"""

from __future__ import annotations

import inspect
import re
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from fxviz.errors import InputError

__all__ = ["describe_value", "flatten_inputs"]

_NOT_IDENTIFIER = re.compile(r"\W")


def flatten_inputs(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[str], list[Any]]:
    """``(names, leaves)``: every input leaf (tensors, numbers, ``None``) named after the
    parameter it fills (``input_ids``; ``past_0``, ``past_1``... for nested values)."""
    from torch.utils import _pytree as pytree  # private, stable since torch 1.13

    bound = _bind(fn, args, kwargs)
    names: list[str] = []
    leaves: list[Any] = []
    for name, value in bound:
        parts = pytree.tree_leaves(value, is_leaf=lambda v: v is None)
        if len(parts) == 1 and parts[0] is value:
            names.append(name)
            leaves.append(value)
            continue
        for i, part in enumerate(parts):
            names.append(f"{name}_{i}")
            leaves.append(part)
    return _unique(names), leaves


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple]:
    """``[(name, value)]`` in parameter order, for the arguments actually given."""
    try:
        signature = _signature(fn.forward if isinstance(fn, torch.nn.Module) else fn)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        if kwargs and not isinstance(e, ValueError):
            raise InputError(f"the inputs do not fit {_name(fn)}: {e}") from e
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    pairs: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            pairs.extend((f"{name}_{i}", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            pairs.extend(value.items())
        else:
            pairs.append((name, value))
    return pairs


# a function -> its signature (a bound method's is its function's, less ``self``): read
# on every record of a captured model, and ``inspect.signature`` costs ~15 µs
_SIGNATURES: weakref.WeakKeyDictionary[Any, tuple[Any, inspect.Signature]] = (
    weakref.WeakKeyDictionary()
)


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``inspect.signature(fn)``, kept per plain function or bound method's function."""
    func = getattr(fn, "__func__", fn)
    if type(func) is not types.FunctionType or "__signature__" in vars(func):
        return inspect.signature(fn)
    key = (
        type(fn) is types.MethodType,
        func.__code__,
        func.__defaults__,
        func.__kwdefaults__,
        id(vars(func).get("__wrapped__")),
    )
    found = _SIGNATURES.get(func)
    if found is None or found[0] != key:
        found = _SIGNATURES[func] = (key, inspect.signature(fn))
    return found[1]


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in names:
        name = _NOT_IDENTIFIER.sub("_", name) or "input"
        if name[0].isdigit():
            name = f"arg_{name}"
        base, k = name, 1
        while name in seen:
            name, k = f"{base}_{k}", k + 1
        seen.add(name)
        out.append(name)
    return out


def describe_value(value: Any) -> str:
    """``Tensor[2, 3]``, ``None``, ``int``: how reports name an input."""
    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}"
    if value is None:
        return "None"
    return type(value).__name__


def _name(fn: Any) -> str:
    return type(fn).__name__ if isinstance(fn, torch.nn.Module) else getattr(fn, "__name__", "fn")
