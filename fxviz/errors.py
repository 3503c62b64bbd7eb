"""Exceptions and warnings raised by fxviz.

Every error is an :class:`FxvizError` and also subclasses the matching builtin, so
``except TypeError`` keeps working for callers that do not know fxviz::

    >>> import fxviz
    >>> issubclass(fxviz.InputError, TypeError) and issubclass(fxviz.InputError, fxviz.FxvizError)
    True
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "DebuggerError",
    "DrawingWarning",
    "FxvizDeprecationWarning",
    "FxvizError",
    "FxvizWarning",
    "InputError",
    "NodeError",
    "NonFiniteStep",
    "PlacementError",
    "RecordingFileError",
    "RecordingInterrupted",
    "RenderError",
    "ShapeError",
    "SpecError",
    "TargetError",
    "TraceError",
    "UnknownNodeError",
    "first_line",
    "node_error_type",
    "warn_deprecated",
]


_E = TypeVar("_E", bound="NodeError")


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

    The error raised is also an instance of the node's own exception type, so code
    that catches what plain torch raises keeps working (see :func:`node_error_type`)::

        >>> import torch, fxviz
        >>> try:
        ...     fxviz.record(lambda x: x + "a", torch.ones(1))
        ... except TypeError as e:
        ...     print(type(e).__name__, isinstance(e, fxviz.NodeError), e.node)
        NodeError[TypeError] True add

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
        # Not super().__init__: a NodeError made for another exception type (see
        # node_error_type) must not run that type's own __init__ with our message.
        BaseException.__init__(self, message)
        self.node = node
        self.recording = recording

    @property
    def recording(self) -> Any:
        """Everything recorded up to and including the failing node (``None``: unknown)."""
        found = self.__dict__.get("_recording")
        make = self.__dict__.get("_make_recording")
        if found is None and make is not None:
            made = self.__dict__.get("_made_recording")
            found = None if made is None else made()
            if found is None:
                found = make(error=self)
                self.__dict__["_made_recording"] = weakref.ref(found)
        return found

    @recording.setter
    def recording(self, recording: Any) -> None:
        self.__dict__.update(_recording=recording, _make_recording=None, _made_recording=None)

    def recording_made_by(self, make: Callable[..., Any]) -> None:
        """Make ``.recording`` with ``make(error=self)`` when it is read (the same object
        while anyone holds it) instead of holding it: that recording holds this error as
        its ``.error``, and the two holding each other would keep every value recorded
        alive until the garbage collector's next pass, where dropping them frees the
        values at once."""
        self.__dict__.update(_recording=None, _make_recording=make, _made_recording=None)

    def __str__(self) -> str:  # a NodeError[KeyError] would show its message quoted
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> Any:
        """Pickle by the classes it was made from (``NodeError[TypeError]`` is made at run
        time), without the recording (it holds the model)."""
        origin = type(self).__dict__.get("_fxviz_origin") or (type(self), None)
        state = {k: v for k, v in vars(self).items() if k not in _LEFT_OUT}
        return (_remake, (*origin, str(self)), state)


_HOLDS_MODEL = ("recording", "report")  # left out when pickled, stored as:
_LEFT_OUT = frozenset({"report", "_recording", "_make_recording", "_made_recording"})
_TYPED: dict[tuple[type, type], type] = {}
_TYPED_LOCK = threading.Lock()


def node_error_type(base: type[_E], error_type: type[BaseException]) -> type[_E]:
    """``base`` (``NodeError`` or a subclass), made also a subclass of ``error_type``.

    One class per pair, created once: ``NodeError[TypeError]`` is both a
    :class:`NodeError` and a ``TypeError``. Returns ``base`` itself when it already is
    an ``error_type``, or when no class can derive from both.

        >>> cls = node_error_type(NodeError, ValueError)
        >>> issubclass(cls, ValueError), issubclass(cls, NodeError), cls.__name__
        (True, True, 'NodeError[ValueError]')
        >>> cls is node_error_type(NodeError, ValueError)
        True
    """
    if issubclass(base, error_type) or not issubclass(error_type, Exception):
        return base
    key = (base, error_type)
    with _TYPED_LOCK:
        cls = _TYPED.get(key)
        if cls is None:
            name = f"{base.__name__}[{error_type.__name__}]"
            cls = _derive(name, base, error_type)
            _TYPED[key] = cls
    return cls  # type: ignore[return-value]


def _derive(name: str, base: type, error_type: type[BaseException]) -> type:
    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        # the instance layout is error_type's (an OSError has more fields than a
        # RuntimeError), so error_type allocates it; keyword arguments are ours
        return error_type.__new__(cls, *args)  # type: ignore[call-overload]

    namespace = {
        "__module__": base.__module__,
        "__qualname__": name,
        "__new__": __new__,
        "_fxviz_origin": (base, error_type),
    }
    try:
        cls = type(name, (base, error_type), namespace)
        cls.__new__(cls, "")  # some types cannot be made this way: find out now
    except Exception:  # incompatible layouts, an inconsistent MRO, a strict __new__
        return base
    return cls


def _remake(
    base: type[NodeError], error_type: type[BaseException] | None, message: str
) -> NodeError:
    cls = base if error_type is None else node_error_type(base, error_type)
    error = cls.__new__(cls, message)
    BaseException.__init__(error, message)
    for name in _HOLDS_MODEL:
        setattr(error, name, None)
    return error


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


class PlacementError(FxvizError, RuntimeError):
    """In ``fxviz.shapes(mode="meta" | "fake")`` a node produced a real tensor: it would
    have computed on real data, which those modes never do (it is raised instead)."""


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


class RecordingFileError(FxvizError, ValueError):
    """A saved recording (``.fxrec``) that cannot be read: not one, truncated, corrupted,
    from a newer fxviz, or describing something it must not (a huge shape, a bad offset).
    Nothing in the file is ever executed."""


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


class DrawingWarning(FxvizWarning):
    """An object drawn in a lesser way than asked: a type fxviz does not know, drawn
    through its ``graph_module``, or one part of its view (an overlay, the table, the
    inspector) that failed and was left out. The message says what to pass instead.

    >>> import fxviz
    >>> issubclass(fxviz.errors.DrawingWarning, fxviz.FxvizWarning)
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


class NonFiniteStep(FxvizError, FloatingPointError):
    """A watched training step produced a NaN or an infinity (``fxviz.watch``); the
    optimizer's update of that step was not applied.

    Attributes:
        incident: the :class:`fxviz._training.Incident`: ``.step``, ``.what``, ``.names``,
            and ``.replay()`` to record that exact step again.

    >>> import fxviz
    >>> issubclass(fxviz.NonFiniteStep, FloatingPointError)
    True
    """

    def __init__(self, message: str, *, incident: Any = None) -> None:
        super().__init__(message)
        self.incident = incident

    def __reduce__(self) -> Any:
        """Pickled without the incident (it holds the model and the batch)."""
        return (type(self), (str(self),))
