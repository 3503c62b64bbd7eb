"""Late binding across layers: a lower layer calls, by name, what a higher layer provides.

A few methods of low-layer objects need a higher layer's work: ``Recording.table()`` the
shape pass's FLOP count, ``Recording.save()`` the file writer, ``JointGraph.record()`` the
recorder. Importing it would run up the layers, so the lower layer asks for it here by
name, and the layer that implements it registers it (``fxviz/_wiring.py``, imported by
the facade, wires all of them, each importing its implementation only when called).

>>> provide("example.double", lambda x: 2 * x)
>>> provider("example.double")(21)
42
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fxviz.errors import FxvizError

__all__ = ["provide", "provider"]

_PROVIDED: dict[str, Callable[..., Any]] = {}


def provide(name: str, implementation: Callable[..., Any]) -> None:
    """Register ``implementation`` as what ``provider(name)`` returns (the last one wins)."""
    _PROVIDED[name] = implementation


def provider(name: str) -> Callable[..., Any]:
    """The implementation registered as ``name``.

    Raises:
        FxvizError: nothing registered it (``import fxviz`` wires every one).
    """
    try:
        return _PROVIDED[name]
    except KeyError:
        raise FxvizError(
            f"{name} is provided by a part of fxviz that is not loaded: import fxviz first"
        ) from None
