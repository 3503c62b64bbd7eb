"""What ``fxviz.trace`` makes of an object that is not a model: each layer registers its own.

Every verb that runs something (``record``, ``Debugger``, ``shapes``, ``diff``...) traces
its argument first, so this one registry is where fxviz decides, for every type, what
runs: a Debugger's graph, or a one-line refusal that says what to pass instead (a
Recording, a loaded recording, a joint graph to a verb that takes one graph).

>>> import fxviz
>>> traceable(print) is print
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fxviz._capture._joint import JointGraph
from fxviz.errors import InputError

__all__ = ["refuse", "register_traceable", "traceable"]


@functools.singledispatch
def traceable(obj: Any) -> Any:
    """What ``fxviz.trace`` traces for ``obj`` (``obj`` itself unless registered)."""
    return obj


def register_traceable(kind: type, convert: Callable[[Any], Any]) -> None:
    """``convert(obj)`` is what ``fxviz.trace`` traces for an object of type ``kind``."""
    traceable.register(kind, convert)


def refuse(message: str) -> Callable[[Any], Any]:
    """A converter that raises :class:`fxviz.InputError` with ``message`` (one line)."""

    def refused(obj: Any) -> Any:
        raise InputError(message)

    return refused


register_traceable(
    JointGraph,
    refuse(
        "a JointGraph holds two graphs: pass joint.forward or joint.backward here "
        "(fxviz.record, Debugger, shapes, to_dot, show and report take it whole)"
    ),
)
