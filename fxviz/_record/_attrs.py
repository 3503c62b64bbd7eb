"""``getattr`` on a module, as Python does it, without raising and catching an
``AttributeError`` at every step of a dotted path.

A parameter, buffer or submodule is not in the instance's ``__dict__``: plain ``getattr``
finds it only after the normal lookup fails, builds an ``AttributeError`` with its
message, and calls ``Module.__getattr__``, ~0.6 µs a step. The recording engine fetches
every ``get_attr`` node's value on every run (a 12-layer model: hundreds of steps), so
:func:`module_attr` takes the same path directly where the result is the same: for a
module class that keeps ``object.__getattribute__`` and ``Module.__getattr__`` and
defines no class attribute of that name (a class attribute, a property, would come
first), the value is the instance ``__dict__``'s entry, else ``Module.__getattr__``'s.
Anything else is plain ``getattr``. A class is read once (its names over its MRO), so a
class attribute added to it after that is not seen.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Linear(2, 3))
    >>> module_attr(module_attr(m, "0"), "weight") is m[0].weight
    True
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import torch

__all__ = ["module_attr"]

_MODULE_GETATTR = torch.nn.Module.__getattr__
_REGISTRIES = ("_parameters", "_buffers", "_modules")  # Module.__getattr__'s order
# id(class) -> (a weak reference to it, the names its MRO defines, or None: plain getattr)
_CLASSES: dict[int, tuple[weakref.ref[type], frozenset[str] | None]] = {}


def module_attr(obj: Any, name: str) -> Any:
    """``getattr(obj, name)`` (the same value, or an ``AttributeError``)."""
    names = _class_names(type(obj))
    if names is None or name in names:
        return getattr(obj, name)
    attrs = obj.__dict__
    if name in attrs:
        return attrs[name]
    for registry in _REGISTRIES:
        found = attrs.get(registry)
        if found is not None and name in found:
            return found[name]
    return getattr(obj, name)  # its own AttributeError


def _class_names(cls: type) -> frozenset[str] | None:
    found = _CLASSES.get(id(cls))
    if found is not None and found[0]() is cls:
        return found[1]
    plain = (
        issubclass(cls, torch.nn.Module)
        and cls.__getattribute__ is object.__getattribute__
        and cls.__getattr__ is _MODULE_GETATTR
    )
    names = frozenset(n for k in cls.__mro__ for n in vars(k)) if plain else None
    _CLASSES[id(cls)] = (weakref.ref(cls, functools.partial(_forget, id(cls))), names)
    return names


def _forget(key: int, ref: weakref.ref[type]) -> None:
    found = _CLASSES.get(key)
    if found is not None and found[0] is ref:
        del _CLASSES[key]
