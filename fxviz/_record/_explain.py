"""Messages that explain a failed node: which node, what it called, with which shapes."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import torch
from torch.fx import interpreter as fx_interpreter

from fxviz._record._codegen import GENERATED
from fxviz._record._records import NodeRecord
from fxviz._record._summary import dtype_name
from fxviz.errors import NodeError, first_line, node_error_type

if TYPE_CHECKING:
    from fxviz._record._recorder import Recorder

__all__ = ["describe_failure", "describe_input", "drop_own_frames", "wrap_node_failure"]


# fxviz's own frames and the interpreter's: a node's error keeps only the frames of the
# code it called (their locals are what a post-mortem looks at), and the generated code's
_OWN = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.abspath(fx_interpreter.__file__),
)


def drop_own_frames(error: BaseException) -> None:
    """Drop the leading frames of fxviz and of ``torch.fx.Interpreter`` from the traceback
    of ``error``, a node's exception where the run stopped, and the locals of those of
    its frames that returned (the generated code's line, which shows the node's call,
    stays): they hold the recorder, which holds the error, so the run's values would wait
    for the garbage collector (a dropped partial recording, a restarted debugger). The
    frames of what the node called stay as they were.

    >>> try:
    ...     raise ValueError("boom")
    ... except ValueError as e:
    ...     drop_own_frames(e)  # a doctest's frame is not fxviz's: kept
    ...     e.__traceback__ is not None
    True
    """
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN):
        tb = tb.tb_next
    error.__traceback__ = tb
    # each frame kept holds its caller's (``f_back``): fxviz's and the interpreter's
    # frames under the one where the run stopped have returned, and let go of their locals
    frame = tb.tb_frame if tb is not None else None
    while frame is not None:
        if frame.f_code.co_filename.startswith((*_OWN, GENERATED)):
            with contextlib.suppress(RuntimeError):  # a frame still running is left alone
                frame.clear()  # its locals: the recorder, the run, every node's value
                # before Python 3.13 a frame keeps the dict its f_locals made (the engine
                # read one): read again, it is synced with the cleared locals, so emptied
                _ = frame.f_locals
        frame = frame.f_back


def describe_input(name: str, shape: Any, dtype: torch.dtype | None) -> str:
    """``"relu: float32[64, 100]"``, or ``"k: (not a tensor)"``."""
    if shape is None:
        return f"{name}: (not a tensor)"
    return f"{name}: {dtype_name(dtype) if dtype else '?'}{list(shape)}"


def describe_failure(record: NodeRecord, module: torch.nn.Module | None = None) -> str:
    """Explain why ``record``'s node failed and what to do next."""
    error = record.error
    what = f"{record.op} {record.target}"
    if record.op == "call_module" and module is not None:
        what += f" = {_module_repr(module, record.target)}"
    first = first_line(error) if error is not None else ""
    lines = [f"node {record.name!r} ({what}) raised {type(error).__name__}: {first}"]
    if record.inputs:
        described = (
            describe_input(n, s, d)
            for n, s, d in zip(record.inputs, record.input_shapes, record.input_dtypes, strict=True)
        )
        lines.append("  inputs: " + ", ".join(described))
    if record.module:
        lines.append(f"  in module: {record.module}")
    if record.source:
        lines.append(f"  source: {record.source}")
    lines.append(
        "What to do: fix the shapes or dtypes above, or step to this node with "
        "fxviz.Debugger(model, *inputs).run_to(" + repr(record.name) + ") and look at "
        "dbg.inputs(); err.recording holds every node recorded before it."
    )
    return "\n".join(lines)


def _module_repr(root: torch.nn.Module, path: str) -> str:
    try:
        sub = root.get_submodule(path)
    except (AttributeError, KeyError):
        return "?"
    text = repr(sub).splitlines()[0]
    return text if len(text) <= 120 else text[:117] + "..."


def wrap_node_failure(
    recorder: Recorder, error: BaseException, module: torch.nn.Module
) -> NodeError | None:
    """The :class:`NodeError` for ``error`` if the node being recorded raised it (torch
    may have turned a ``KeyError`` into a ``RuntimeError`` on the way), else ``None``.

    Its class is also the original exception's (``NodeError[TypeError]``)."""
    failed = recorder.records[-1] if recorder.entries else None
    if failed is None or failed.error is None:
        return None
    original = failed.error
    if error is not original and error.__cause__ is not original:
        return None
    cls = node_error_type(NodeError, type(original))
    if not issubclass(cls, type(original)):  # no class can be both: raise the original
        with contextlib.suppress(AttributeError):  # with the recording on it, if it can
            original.recording = recorder.recording()  # type: ignore[attr-defined]
            add_note = getattr(original, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(describe_failure(failed, module).splitlines()[0])
        return None
    wrapped = cls.__new__(cls, "")
    # attributes the original carries (an OSError's errno, a custom error's fields)
    vars(wrapped).update(getattr(original, "__dict__", {}))
    NodeError.__init__(wrapped, describe_failure(failed, module), node=failed.name)
    # made when read: the recording holds the error, which must not hold it in turn
    wrapped.recording_made_by(recorder.recording)
    return wrapped
