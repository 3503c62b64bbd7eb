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
    """Base class of every error fxviz raises on purpose.

    >>> import fxviz
    >>> issubclass(fxviz.NodeError, fxviz.FxvizError), issubclass(fxviz.FxvizWarning, fxviz.FxvizError)
    (True, False)
    """


class TraceError(FxvizError, RuntimeError):
    """A model or function could not be turned into a ``torch.fx.GraphModule``.

    >>> import fxviz
    >>> try:
    ...     fxviz.trace(42)
    ... except fxviz.TraceError as e:
    ...     print(str(e).split(":")[0])
    cannot trace an object of type int
    """


class InputError(FxvizError, TypeError):
    """The inputs given do not fit the graph (count, kind or spec).

    >>> import torch, fxviz
    >>> try:
    ...     fxviz.record(fxviz.trace(torch.nn.Linear(4, 2)), torch.ones(1, 4), torch.ones(1))
    ... except fxviz.InputError as e:
    ...     print(str(e).split(":")[0])
    the graph takes 1 input(s) (input) but 2 were given
    """


class NodeError(FxvizError, RuntimeError):
    """A node raised while the graph ran.

    Attributes:
        node: name of the FX node that raised.
        recording: everything recorded up to and including the failing node.

    >>> import torch, fxviz
    >>> try:
    ...     fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 5))
    ... except fxviz.NodeError as e:
    ...     e.node, list(e.recording)[-1], e.recording.complete
    ('linear', 'linear', False)
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
    """An input spec that cannot be parsed or made (``fxviz.spec``, ``--input``).

    >>> import fxviz
    >>> issubclass(fxviz.SpecError, ValueError)
    True
    """


class RenderError(FxvizError, RuntimeError):
    """A graph could not be drawn (no ``dot`` for SVG, an object fxviz cannot draw).

    >>> import fxviz
    >>> try:
    ...     fxviz.to_dot(3)
    ... except fxviz.RenderError as e:
    ...     print(str(e).split(":")[0])
    cannot draw an object of type int
    """


class TargetError(FxvizError, ValueError):
    """A command-line TARGET that cannot be found or turned into a model.

    >>> import fxviz
    >>> from fxviz._targets import load_target
    >>> try:
    ...     load_target("no_such_module_xyz:Model")
    ... except fxviz.TargetError as e:
    ...     "no_such_module_xyz" in str(e)
    True
    """


class UnknownNodeError(FxvizError, KeyError):
    """A node name that is not in the graph (the message suggests close names).

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4))
    >>> try:
    ...     rec["lienar"]
    ... except fxviz.UnknownNodeError as e:
    ...     "linear" in str(e)
    True
    """

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


class DebuggerError(FxvizError, RuntimeError):
    """A debugger command that cannot be carried out in the current state.

    >>> import torch, fxviz
    >>> dbg = fxviz.Debugger(torch.nn.ReLU(), torch.ones(1))
    >>> _ = dbg.continue_()
    >>> try:
    ...     dbg.step()
    ... except fxviz.DebuggerError as e:
    ...     print(str(e).split(";")[0])
    step(): the graph has already finished (3 nodes)
    """


class RecordingInterrupted(KeyboardInterrupt):
    """Ctrl-C arrived mid-recording; ``.recording`` holds what was recorded so far.

    It is a ``KeyboardInterrupt`` (not an ``FxvizError``) on purpose: a generic
    ``except Exception`` must never swallow the user's Ctrl-C.

    >>> import fxviz
    >>> issubclass(fxviz.RecordingInterrupted, KeyboardInterrupt)
    True
    >>> issubclass(fxviz.RecordingInterrupted, Exception)
    False
    """

    def __init__(self, message: str, *, recording: Any = None) -> None:
        super().__init__(message)
        self.recording = recording


class FxvizWarning(UserWarning):
    """Warnings fxviz emits (a memory budget reached, an in-place write it could not
    foresee, an overlay or optional part that failed and was left out).

    >>> import warnings, torch, fxviz
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = fxviz.to_dot(fxviz.trace(torch.nn.ReLU()), overlay=lambda node: 1 / 0)
    >>> caught[0].category is fxviz.FxvizWarning
    True
    """


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
