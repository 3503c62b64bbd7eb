"""While fxviz captures, the model's code sees what eager PyTorch would tell it.

``torch.compiler.is_compiling()`` is True while Dynamo or ``torch.export`` traces, so a
branch only compiled code takes would be captured as if eager ran it. fxviz records what
``model(*args)`` does, so during a capture the user's code is told ``False``; torch's own
code (which relies on the answer to trace at all) still gets the real one.

Private APIs, quarantined here (checked on torch 2.13): Dynamo's table of the answers
it constant-folds (``torch._dynamo.variables.torch.tracing_state_functions``) and the
name ``tx`` of the frame being traced in its handler. Without them the Dynamo side does
nothing (the capture is then as before).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["eager_is_compiling", "is_user_file"]

_TORCH_DIR = os.path.dirname(torch.__file__)
_FXVIZ_DIR = os.path.dirname(os.path.dirname(__file__))


def is_user_file(path: str) -> bool:
    """Whether ``path`` is the user's code: not torch's, not fxviz's, not ``<string>``
    (compares whole path components, so ``torchvision/`` is the user's side)."""
    if path.startswith("<"):
        return False
    path = os.path.abspath(path)
    return all(os.path.commonpath([path, d]) != d for d in (_TORCH_DIR, _FXVIZ_DIR))


def _compiling_functions() -> list[tuple[Any, str, Callable[[], bool]]]:
    """``(module, attribute, function)`` of every public ``is_compiling`` spelling."""
    import torch._dynamo.external_utils as external_utils
    import torch._utils

    found = [
        (torch.compiler, "is_compiling", torch.compiler.is_compiling),
        (torch.compiler, "is_dynamo_compiling", torch.compiler.is_dynamo_compiling),
        (torch._utils, "is_compiling", torch._utils.is_compiling),
        (external_utils, "is_compiling", external_utils.is_compiling),
    ]
    return [(m, a, f) for m, a, f in found if callable(f)]


_LIBRARY = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


def _users_code(filename: str) -> bool:
    """The model's own code: not torch's or fxviz's, nor an installed library's (a
    library's compile-only branch is its own business, and often what lets it trace)."""

    return is_user_file(filename) and not _LIBRARY.search(filename)


@contextlib.contextmanager
def eager_is_compiling(*, dynamo: bool) -> Iterator[None]:
    """The user's code sees ``is_compiling() == False`` while the block captures.

    ``dynamo``: the block runs Dynamo, which answers from its table for the frame it
    traces (a patched function would be traced instead); otherwise the functions
    themselves answer the user's callers.
    """
    if dynamo:
        with _dynamo_answers():
            yield
        return
    functions = _compiling_functions()

    def patched(original: Callable[[], bool]) -> Callable[[], bool]:
        @functools.wraps(original)
        def is_compiling() -> bool:
            return False if _users_code(sys._getframe(1).f_code.co_filename) else original()

        return is_compiling

    for module, name, original in functions:
        setattr(module, name, patched(original))
    try:
        yield
    finally:
        for module, name, original in functions:
            setattr(module, name, original)


@contextlib.contextmanager
def _dynamo_answers() -> Iterator[None]:
    """Dynamo's table of constant answers, answering ``False`` to ``is_compiling`` asked
    from the user's frames (read from the handler's ``tx``: the frame being traced)."""
    try:
        import torch._dynamo.variables.torch as variables
    except ImportError:
        yield
        return
    original = getattr(variables, "tracing_state_functions", None)
    table = original() if callable(original) else None
    if not isinstance(table, dict):
        yield
        return
    compiling = {f for _, _, f in _compiling_functions()}

    class Answers(dict):
        def __getitem__(self, key: Any) -> Any:
            value = dict.__getitem__(self, key)
            if key in compiling:
                code = getattr(sys._getframe(1).f_locals.get("tx"), "f_code", None)
                if code is not None and _users_code(code.co_filename):
                    return False
            return value

    answers = Answers(table)
    variables.tracing_state_functions = lambda: answers
    try:
        yield
    finally:
        variables.tracing_state_functions = original
