"""Positional constructors for frozen, slotted dataclasses: every slot set directly.

A frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__``, which
looks the field up by name on the class each time: ~70 ns a field, 1.2 µs for the 17 of a
:class:`~fxviz._record._records.NodeRecord` or a
:class:`~fxviz._record._summary.TensorSummary`, made once a node whenever a recording is
read. Calling each slot's descriptor takes about half that.

    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True, slots=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> make = positional_constructor(Point)
    >>> make(1, 2) == Point(1, 2), make(1, 2)
    (True, Point(x=1, y=2))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["positional_constructor"]

T = TypeVar("T")


def positional_constructor(cls: type[T]) -> Callable[..., T]:
    """A function that takes every field of the frozen, slotted dataclass ``cls``,
    positionally and in order (no defaults), and returns what ``cls(*args)`` returns."""
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if not hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} is not a slotted dataclass without __post_init__")
    setters = {f"_set_{name}": getattr(cls, name).__set__ for name in fields}
    body = "".join(f"        _set_{name}(self, {name})\n" for name in fields)
    source = (
        f"def bind({', '.join(setters)}, _new, _cls):\n"
        f"    def make({', '.join(fields)}):\n"
        f"        self = _new(_cls)\n{body}"
        "        return self\n"
        "    return make\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the names: the dataclass's own fields
    make = namespace["bind"](*setters.values(), object.__new__, cls)
    make.__qualname__ = make.__name__ = f"new_{cls.__name__}"
    return make
