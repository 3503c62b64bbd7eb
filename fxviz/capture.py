"""Turn models, functions and exported programs into a ``torch.fx.GraphModule``."""

from __future__ import annotations

import contextlib
import linecache
import logging
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import torch
import torch.fx

from fxviz.errors import TraceError

__all__ = ["trace"]

Method = Literal["auto", "symbolic", "export", "joint"]
_METHODS = ("auto", "symbolic", "export", "joint")
_TORCH_DIR = os.path.dirname(torch.__file__)
_FXVIZ_DIR = os.path.dirname(__file__)


def trace(
    obj: torch.nn.Module | Callable[..., Any] | torch.export.ExportedProgram,
    *example_inputs: Any,
    method: Method = "auto",
    concrete_args: dict[str, Any] | None = None,
) -> torch.fx.GraphModule:
    """Capture ``obj`` as a ``torch.fx.GraphModule``.

    Args:
        obj: an ``nn.Module``, a plain function, a ``GraphModule`` (returned as is) or a
            ``torch.export.ExportedProgram`` (its runnable ``.module()``).
        *example_inputs: inputs for ``method="export"`` (and for ``"auto"``'s fallback).
        method: ``"symbolic"`` (``torch.fx.symbolic_trace``), ``"export"``
            (``torch.export.export``) or ``"auto"``: symbolic, then export when symbolic
            tracing fails and example inputs are given. ``"joint"`` returns a
            ``JointGraph`` instead: AOTAutograd's forward and backward ATen graphs, with
            the saved tensors between them and links from backward to forward nodes.
        concrete_args: passed to ``symbolic_trace`` to specialise arguments (for example
            a flag that drives Python control flow).

    Raises:
        TraceError: the object could not be captured; the message quotes the offending
            line of the user's code and says what to try.

    Example:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'call_module', 'call_module', 'output']
    """
    if method not in _METHODS:
        raise ValueError(f"unknown method: {method!r} (must be one of {list(_METHODS)})")
    if method == "joint":
        from fxviz._joint import trace_joint

        return trace_joint(obj, *example_inputs)  # type: ignore[return-value]
    if isinstance(obj, torch.fx.GraphModule):
        return obj
    if isinstance(obj, torch.export.ExportedProgram):
        return obj.module()
    if not (isinstance(obj, torch.nn.Module) or callable(obj)):
        raise TraceError(
            f"cannot trace an object of type {type(obj).__name__}: pass an nn.Module, a "
            "function, a GraphModule or a torch.export.ExportedProgram"
        )
    if method == "export":
        return _export(obj, example_inputs)
    try:
        return torch.fx.symbolic_trace(obj, concrete_args=concrete_args)
    except Exception as symbolic_error:
        if method == "symbolic" or not example_inputs:
            raise TraceError(
                _describe_failure("torch.fx.symbolic_trace", obj, symbolic_error, example_inputs)
            ) from symbolic_error
        try:
            return _export(obj, example_inputs)
        except TraceError as export_error:
            message = (
                _describe_failure("torch.fx.symbolic_trace", obj, symbolic_error, example_inputs)
                + "\n\nThe torch.export fallback failed too:\n"
                + str(export_error)
            )
            raise TraceError(message) from export_error.__cause__


def _export(obj: Any, example_inputs: Sequence[Any]) -> torch.fx.GraphModule:
    if not example_inputs:
        raise TraceError(
            f"method='export' needs example inputs: fxviz.trace({_name(obj)}, x, method='export')"
        )
    module = obj if isinstance(obj, torch.nn.Module) else _FunctionModule(obj)
    try:
        with warnings.catch_warnings(), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, tuple(example_inputs))
    except Exception as e:
        raise TraceError(_describe_failure("torch.export.export", obj, e, example_inputs)) from e
    return program.module()


@contextlib.contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """torch.export logs graph dumps and guard warnings on failure; fxviz reports instead."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class _FunctionModule(torch.nn.Module):
    """Wraps a plain function so ``torch.export`` can take it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _name(obj: Any) -> str:
    return (
        type(obj).__name__ if isinstance(obj, torch.nn.Module) else getattr(obj, "__name__", "fn")
    )


def _describe_failure(how: str, obj: Any, error: BaseException, inputs: Sequence[Any]) -> str:
    """One message: what failed, the user's offending line, and what to try instead."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    lines = [f"{how} could not capture {_name(obj)}: {type(error).__name__}: {first_line}"]
    where = _user_frame(error)
    if where:
        path, lineno, code = where
        lines.append(f'  File "{path}", line {lineno}:\n    {code}')
    lines.append("What to try:")
    lines.extend(f"  - {hint}" for hint in _hints(how, error, bool(inputs)))
    return "\n".join(lines)


def _hints(how: str, error: BaseException, has_inputs: bool) -> list[str]:
    text = str(error)
    hints = []
    if how.endswith("symbolic_trace"):
        if "control flow" in text or "iteration" in text or "does not support" in text:
            hints.append(
                "if a plain Python argument (a flag, a size) drives that line, fix it with "
                "concrete_args={'name': value}"
            )
        if has_inputs:
            hints.append("method='export' (traces with the example inputs you gave)")
        else:
            hints.append(
                "method='export' with example inputs: fxviz.trace(model, x, method='export')"
            )
    else:
        hints.append("method='symbolic' if the model has no data-dependent shapes")
        hints.append(
            "for data-dependent control flow, rewrite it with torch.cond or move it out of forward"
        )
    return hints


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _user_frame(error: BaseException) -> tuple[str, int, str] | None:
    """The last frame of user code in the traceback (or in torch.export's message)."""
    candidates = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(error.__traceback__)]
    candidates += [(path, int(line)) for path, line in _FILE_LINE.findall(str(error))]
    for path, lineno in reversed(candidates):
        if path.startswith((_TORCH_DIR, _FXVIZ_DIR, "<")):
            continue
        code = linecache.getline(path, lineno).strip()
        if code:
            return path, lineno, code
    return None
