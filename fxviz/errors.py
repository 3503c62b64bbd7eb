"""Exceptions and warnings raised by fxviz.

Every error is an :class:`FxvizError` and also subclasses the matching builtin, so
``except TypeError`` keeps working for callers that do not know fxviz::

    >>> import fxviz
    >>> issubclass(fxviz.InputError, TypeError) and issubclass(fxviz.InputError, fxviz.FxvizError)
    True
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DebuggerError",
    "FxvizError",
    "FxvizWarning",
    "InputError",
    "NodeError",
    "PlacementError",
    "RecordingInterrupted",
    "TraceError",
    "UnknownNodeError",
]


class FxvizError(Exception):
    """Base class of every error fxviz raises on purpose."""


class TraceError(FxvizError, RuntimeError):
    """A model or function could not be turned into a ``torch.fx.GraphModule``."""


class InputError(FxvizError, TypeError):
    """The inputs given do not fit the graph (count, kind or spec)."""


class NodeError(FxvizError, RuntimeError):
    """A node raised while the graph ran.

    Attributes:
        node: name of the FX node that raised.
        recording: everything recorded up to and including the failing node.
    """

    def __init__(self, message: str, *, node: str, recording: Any = None) -> None:
        super().__init__(message)
        self.node = node
        self.recording = recording


class PlacementError(FxvizError, RuntimeError):
    """In ``fxviz.shapes(mode="meta" | "fake")`` a node produced a real tensor: it would
    have computed on real data, which those modes never do (it is raised instead)."""


class UnknownNodeError(FxvizError, KeyError):
    """A node name that is not in the graph (the message suggests close names)."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


class DebuggerError(FxvizError, RuntimeError):
    """A debugger command that cannot be carried out in the current state."""


class RecordingInterrupted(KeyboardInterrupt):
    """Ctrl-C arrived mid-recording; ``.recording`` holds what was recorded so far.

    It is a ``KeyboardInterrupt`` (not an ``FxvizError``) on purpose: a generic
    ``except Exception`` must never swallow the user's Ctrl-C.
    """

    def __init__(self, message: str, *, recording: Any = None) -> None:
        super().__init__(message)
        self.recording = recording


class FxvizWarning(UserWarning):
    """Warnings fxviz emits (a memory budget reached, an in-place write it could not foresee)."""
