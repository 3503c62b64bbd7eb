"""The ``python`` nodes of a capture: the Python that ran between two graphs, replayed."""

from __future__ import annotations

import contextlib
import copy
import copyreg
import functools
import types
from collections.abc import Sequence
from typing import Any

import torch

from fxviz._capture._inputs import describe_value
from fxviz._torch_compat import is_fake, same_bits
from fxviz.errors import InputError

__all__ = ["PythonSegment", "attributes", "check_same_inputs", "substitute", "tensors_in"]


class PythonSegment:
    """The target of a ``python`` node: Python ran here in the captured run.

    Calling it returns what that Python produced: with ``fresh``, a tuple of new copies
    of its tensors each call, so nothing a later node writes in place reaches the
    capture; otherwise the value itself (the model's output object). The first one also
    checks that the inputs are the captured ones: a capture holds one run, not a
    function of new inputs.

    ``written`` (argument position: value) are the model's tensors that Python wrote in
    place there (``self.steps += 1`` where Dynamo did not compile): the node takes each
    as an argument and writes into it the value it had when that Python was done, so
    the graphs after it read, and the model is left with, what a call leaves.
    """

    def __init__(
        self,
        label: str,
        values: Any,
        *,
        expected: Sequence[Any] | None = None,
        fresh: bool = True,
        replace: dict[int, int] | None = None,
        writes: Sequence[tuple[Any, str | None, str, Any]] = (),
        written: dict[int, torch.Tensor] | None = None,
    ) -> None:
        self.__name__ = self.__qualname__ = label
        self.__module__ = "python"
        self.values = values
        self.expected = expected
        self.fresh = fresh
        self.replace = replace or {}
        self.writes = list(writes)
        self.written = written or {}

    def __call__(self, *args: Any) -> Any:
        if self.expected is not None and not any(_is_abstract(a) for a in args):
            check_same_inputs(self.expected, args[: len(self.expected)])
        if self.written and not any(_is_abstract(a) for a in args):
            with torch.no_grad():
                for i, value in self.written.items():
                    if args[i].shape != value.shape:  # Python resized it
                        args[i].resize_(value.shape)
                    args[i].copy_(value)
        if self.fresh:
            return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in self.values)
        new = {k: args[i] for k, i in self.replace.items()}
        if self.writes and not any(_is_abstract(a) for a in args):
            _assign(self.writes, new)  # also when no graph made the output
        return substitute(self.values, new, {}) if new else self.values

    def __repr__(self) -> str:
        return f"<python {self.__name__}>"


def _is_abstract(value: Any) -> bool:
    """Fake or meta tensors (shape propagation): nothing to compare, values pass through."""
    if not isinstance(value, torch.Tensor):
        return False
    return value.is_meta or is_fake(value)


def check_same_inputs(expected: Sequence[Any], given: Sequence[Any]) -> None:
    for i, (want, got) in enumerate(zip(expected, given, strict=False)):
        if isinstance(want, torch.Tensor) and not isinstance(got, torch.Tensor):
            continue  # a spec or a placeholder for shape propagation: nothing to compare
        if isinstance(got, torch.Tensor):
            if _is_abstract(got):
                continue
            same = isinstance(want, torch.Tensor) and same_bits(got, want)  # NaN too
        else:
            same = got is want or bool(got == want)
        if not same:
            raise InputError(
                f"input {i} ({describe_value(got)}) is not the one this capture was made "
                f"with ({describe_value(want)}): a capture holds one run of the model. "
                "Capture the new inputs: fxviz.trace(model, *args, **kwargs)"
            )


def tensors_in(value: Any, _seen: set[int] | None = None) -> list[torch.Tensor]:
    """Every tensor in ``value``: containers, dataclasses and plain objects (a Hugging Face
    ``DynamicCache`` holds its tensors in attributes pytree cannot see), their slots and a
    container subclass's own attributes too; in the order :func:`substitute` walks them."""
    seen = set() if _seen is None else _seen
    if id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (torch.nn.Module, type)):
        return []
    if isinstance(value, dict):  # a ModelOutput's fields are its items (and attributes)
        items: list[Any] = list(value.values())
    else:
        items = list(value) if isinstance(value, (list, tuple, set)) else []
    items += attributes(value).values()
    found: list[torch.Tensor] = []
    for item in items:
        found.extend(tensors_in(item, seen))
    return found


def attributes(value: Any) -> dict[str, Any]:
    """An object's own attributes: its ``__dict__`` and the slots that are set (none for
    a builtin container or a class), read past any ``__getattr__`` of its class.

    >>> class Slotted:
    ...     __slots__ = ("a", "__b", "c")
    ...     def __init__(self): self.a, self.__b = 1, 2
    >>> attributes(Slotted()), attributes([1]), attributes(Slotted)
    ({'_Slotted__b': 2, 'a': 1}, {}, {})
    """
    cls = type(value)
    if cls in _BUILTIN_CONTAINERS or isinstance(value, type):
        return {}
    found = dict(object.__getattribute__(value, "__dict__")) if cls.__dictoffset__ else {}
    for name, slot in _slots(cls):
        with contextlib.suppress(AttributeError):  # a slot not set
            found.setdefault(name, slot.__get__(value, cls))
    return found


_BUILTIN_CONTAINERS = (dict, list, tuple, set, frozenset)


@functools.lru_cache(maxsize=1024)
def _slots(cls: type) -> tuple[tuple[str, Any], ...]:
    """``(name, descriptor)`` of each slot of ``cls`` and its bases (names as Python
    stores them: private ones mangled)."""
    found = []
    for klass in cls.__mro__:
        if "__slots__" in klass.__dict__:
            found += [
                (name, d)
                for name, d in klass.__dict__.items()
                if isinstance(d, types.MemberDescriptorType)
            ]
    return tuple(found)


def _assign(writes: Sequence[tuple[Any, str | None, str, Any]], new: dict[int, Any]) -> None:
    """Assign what the captured run assigned (the ``MISSING`` marker: delete)."""
    from fxviz._capture._state import MISSING

    for module, registry, name, value in writes:
        where = getattr(module, registry) if registry else vars(module)
        if value is MISSING:
            where.pop(name, None)
        else:
            where[name] = substitute(value, new, {})


def substitute(value: Any, new: dict[int, Any], memo: dict[int, Any]) -> Any:
    """``value`` with each tensor whose ``id`` is in ``new`` replaced, containers and plain
    objects (their ``__dict__`` and slots) copied where something inside changed (the
    captured value is left alone)."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        return new.get(id(value), value)
    if isinstance(value, (str, bytes, int, float, bool, type(None), torch.nn.Module, type)):
        return value
    memo[id(value)] = value  # a cycle reads the original
    result = value
    if isinstance(value, dict):
        items = {k: substitute(v, new, memo) for k, v in value.items()}
        changed = _changed_attributes(value, new, memo)  # a subclass's own
        if changed or any(items[k] is not v for k, v in value.items()):
            result = _copied(value)
            for k, v in items.items():  # item by item: a ModelOutput refuses update()
                if v is not value[k]:
                    result[k] = v
            _set_attributes(result, changed)
    elif isinstance(value, (list, tuple)):
        items_list = [substitute(v, new, memo) for v in value]
        changed = _changed_attributes(value, new, memo)
        if changed or any(a is not b for a, b in zip(items_list, value, strict=True)):
            if isinstance(value, list):
                result = type(value)(items_list)
            elif hasattr(value, "_fields"):  # a namedtuple
                result = type(value)(*items_list)
            else:
                result = type(value)(items_list)
            _set_attributes(result, {**attributes(value), **changed})  # a subclass's own
    else:
        changed = _changed_attributes(value, new, memo)
        if changed:
            result = _copied(value)
            _set_attributes(result, changed)
    memo[id(value)] = result
    return result


def _changed_attributes(value: Any, new: dict[int, Any], memo: dict[int, Any]) -> dict[str, Any]:
    """The attributes of ``value`` that :func:`substitute` changes, with their new values."""
    changed = {}
    for name, item in attributes(value).items():
        got = substitute(item, new, memo)
        if got is not item:
            changed[name] = got
    return changed


def _set_attributes(obj: Any, values: dict[str, Any]) -> None:
    """Set ``values`` on ``obj`` as they are: into its slots (past a frozen dataclass's
    ``__setattr__``), or its ``__dict__``."""
    cls = type(obj)
    slots = dict(_slots(cls))
    for name, value in values.items():
        if name in slots:
            slots[name].__set__(obj, value)
        else:
            object.__getattribute__(obj, "__dict__")[name] = value


def _copied(value: Any) -> Any:
    """A shallow copy of ``value`` to put new tensors into; a ``TypeError`` where its copy
    is itself (an enum member, a ``__copy__`` that returns ``self``): setting them would
    change the captured object every later call reads."""
    made = _shallow_copy(value)
    if made is value:
        kind = type(value)
        raise TypeError(
            f"cannot put this call's tensors into a {kind.__module__}.{kind.__qualname__}: "
            "its copy is the object itself, which every call shares"
        )
    return made


def _shallow_copy(obj: Any) -> Any:
    """``copy.copy(obj)``, made directly for a plain object (what ``copy`` does for one,
    without its generic protocol: a language model's cache has a few a record).

    >>> class Plain: ...
    >>> p = Plain(); p.a = [1]
    >>> q = _shallow_copy(p)
    >>> type(q) is Plain, q.a is p.a, q is p
    (True, True, False)
    """
    cls: Any = type(obj)
    if not _copied_plainly(cls):
        return copy.copy(obj)
    made = cls.__new__(cls)
    made.__dict__.update(obj.__dict__)
    return made


@functools.lru_cache(maxsize=1024)
def _copied_plainly(cls: type) -> bool:
    """Whether ``copy.copy`` of a ``cls`` instance is ``cls.__new__(cls)`` given the same
    ``__dict__``: a plain Python class (object's ``__new__``, no builtin base), with no
    copy or pickling hook of its own, and no slots."""
    return (
        cls.__new__ is object.__new__
        and all(
            k is object or ("__module__" in vars(k) and k.__module__ != "builtins")
            for k in cls.__mro__
        )
        and getattr(cls, "__getnewargs__", None) is None
        and getattr(cls, "__getnewargs_ex__", None) is None
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None)
        and getattr(cls, "__copy__", None) is None
        and getattr(cls, "__setstate__", None) is None
        and cls.__dictoffset__ != 0
        and not _slots(cls)
        and copy._copy_dispatch.get(cls) is None  # type: ignore[attr-defined]
        and copyreg.dispatch_table.get(cls) is None
    )
