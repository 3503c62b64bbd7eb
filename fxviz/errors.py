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
    "FxvizDeprecationWarning",
    "FxvizError",
    "FxvizWarning",
    "InputError",
    "NodeError",
    "RecordingInterrupted",
    "RenderError",
    "ShapeError",
    "SpecError",
    "TargetError",
    "TraceError",
    "UnknownNodeError",
    "first_line",
    "warn_deprecated",
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


class ShapeError(NodeError):
    """A node failed during shape propagation; ``.report`` holds the nodes done before it.

    >>> import torch, fxviz
    >>> try:
    ...     fxviz.shapes(torch.nn.Linear(4, 2), fxviz.spec(3, 5), mode="meta")
    ... except fxviz.ShapeError as e:
    ...     e.node, e.report.complete
    ('linear', False)
    """

    def __init__(self, message: str, *, node: str, report: Any) -> None:
        super().__init__(message, node=node, recording=report.recording)
        self.report = report


class SpecError(FxvizError, ValueError):
    """An input spec that cannot be parsed or made (``fxviz.spec``, ``--input``)."""


class RenderError(FxvizError, RuntimeError):
    """A graph could not be drawn (no ``dot`` for SVG, an object fxviz cannot draw)."""


class TargetError(FxvizError, ValueError):
    """A command-line TARGET that cannot be found or turned into a model."""


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
    """Warnings fxviz emits (a memory budget reached, an in-place write it could not
    foresee, an overlay or optional part that failed and was left out)."""


class FxvizDeprecationWarning(FxvizWarning, DeprecationWarning):
    """A name or behaviour that still works but will go; the message names its successor.

    >>> import warnings, fxviz
    >>> issubclass(fxviz.FxvizDeprecationWarning, DeprecationWarning)
    True
    """


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (``""`` when it has none).

    >>> first_line(ValueError("\\nbad input\\nmore detail"))
    'bad input'
    """
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return ""


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (an FxvizDeprecationWarning)."""
    import warnings

    warnings.warn(
        f"{old} is deprecated; use {new} instead (the old name keeps working for now)",
        FxvizDeprecationWarning,
        stacklevel=stacklevel,
    )
