"""While fxviz captures, the model's code sees what eager PyTorch would tell it.

``torch.compiler.is_compiling()`` is True while Dynamo or ``torch.export`` traces, so a
branch only compiled code takes would be captured as if eager ran it. fxviz records what
``model(*args)`` does, so during a capture the user's code is told ``False``; torch's own
code (which relies on the answer to trace at all) still gets the real one. Installed
libraries are told the truth too (their compile-only branches are often what lets them
trace: transformers' caches skip ``mark_static_address``, which Dynamo cannot trace),
except the files that define the model's own modules when ``model_files`` names them: a
Dynamo capture whose output differs from one eager call is made again that way
(transformers' Mamba scans with ``associative_scan`` only when compiling; see
``fxviz/_capture/_dynamo.py``).

Private APIs, quarantined here (checked on torch 2.13): Dynamo's table of the answers
it constant-folds (``torch._dynamo.variables.torch.tracing_state_functions``) and the
name ``tx`` of the frame being traced in its handler. Without them the Dynamo side does
nothing (the capture is then as before).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from fxviz._capture._segments import tensors_in
from fxviz._capture._state import restored_state
from fxviz._torch_compat import same_bits, version_of

__all__ = [
    "divergence",
    "eager_is_compiling",
    "eager_output",
    "gradient_divergence",
    "input_marks",
    "is_user_file",
]

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


@functools.lru_cache(maxsize=4096)
def _users_code(filename: str, model_files: frozenset[str] = frozenset()) -> bool:
    """The model's own code: not torch's or fxviz's, nor an installed library's (a
    library's compile-only branch is its own business, and often what lets it trace),
    but for ``model_files``. Remembered: an export asks it thousands of times (~10 µs
    each, 4% of a 4-layer GPT-2's first record)."""
    if filename in model_files:
        return True
    return is_user_file(filename) and not _LIBRARY.search(filename)


def model_files(model: Any) -> frozenset[str]:
    """The source files of the classes of ``model``'s modules (or of the function)."""
    objects = [type(m) for m in model.modules()] if isinstance(model, torch.nn.Module) else [model]
    found = set()
    for obj in objects:
        try:
            path = inspect.getsourcefile(inspect.unwrap(obj))
        except TypeError:  # a builtin
            continue
        if path and is_user_file(path):
            found.add(os.path.abspath(path))
    return frozenset(found)


@contextlib.contextmanager
def eager_is_compiling(
    *,
    dynamo: bool,
    model_files: frozenset[str] = frozenset(),
    told_true: list[str] | None = None,
) -> Iterator[None]:
    """The user's code sees ``is_compiling() == False`` while the block captures.

    ``dynamo``: the block runs Dynamo, which answers from its table for the frame it
    traces (a patched function would be traced instead); otherwise the functions
    themselves answer the user's callers. ``model_files`` (Dynamo only): installed
    files told ``False`` too (those that define the model's modules). ``told_true``
    (Dynamo only) collects the library frames told ``True`` (``file:line (function)``):
    where a compile-only branch may have been taken.
    """
    if dynamo:
        with _dynamo_answers(model_files, told_true if told_true is not None else []):
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
def _dynamo_answers(model_files: frozenset[str], told_true: list[str]) -> Iterator[None]:
    """Dynamo's table of constant answers, answering ``False`` to ``is_compiling`` asked
    from the user's frames (read from the handler's ``tx``: the frame being traced);
    the other askers go to ``told_true``."""
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
                tx = sys._getframe(1).f_locals.get("tx")
                asker = _asker(tx)
                if asker is not None and _users_code(asker, model_files):
                    return False
                where = _where(tx)
                if where and where not in told_true:
                    told_true.append(where)
            return value

    answers = Answers(table)
    variables.tracing_state_functions = lambda: answers
    try:
        yield
    finally:
        variables.tracing_state_functions = original


def _asker(tx: Any) -> str | None:
    """The file of the frame Dynamo traces that asked, past wrappers such as
    transformers' ``is_torchdynamo_compiling`` (``tx.parent``: the calling frame)."""
    for _ in range(8):
        code = getattr(tx, "f_code", None)
        if code is None:
            return None
        if "compiling" not in code.co_name:
            return code.co_filename
        tx = getattr(tx, "parent", None)
    return None


def _where(tx: Any) -> str:
    """``file:line (function)`` of the first frame past the ``is_compiling`` wrappers
    (transformers' ``is_torchdynamo_compiling`` and ``is_tracing``) that asked."""
    for _ in range(8):
        code = getattr(tx, "f_code", None)
        if code is None:
            return ""
        if "compiling" not in code.co_name and "tracing" not in code.co_name:
            path = _LIBRARY.split(code.co_filename)[-1]
            return f"{path}:{getattr(tx, 'lineno', 0)} ({code.co_name})"
        tx = getattr(tx, "parent", None)
    return ""


def gradient_divergence(got: Any, want: Any, model: Any) -> str:
    """How the parameters' gradients of the sum of ``got``'s tensors differ from those
    of ``want``'s (``""``: bitwise the same, or nothing to differentiate: no output
    holds an autograd graph, as under ``torch.no_grad()``, or eager's own backward pass
    fails, as RWKV's does after writing its state in place: the recording's backward
    pass then says why)."""
    if not isinstance(model, torch.nn.Module):
        return ""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    roots = [[t for t in tensors_in(o) if t.requires_grad] for o in (got, want)]
    if not named or not all(roots) or len(roots[0]) != len(roots[1]):
        return ""
    params = [p for _, p in named]
    grads: list[Any] = []
    with torch.enable_grad():  # the outputs' graphs are there: differentiate them
        for r in roots:
            try:
                ones = [torch.ones_like(t) for t in r]
                grads.append(torch.autograd.grad(r, params, ones, allow_unused=True))
            except RuntimeError as e:  # autograd refuses (a saved tensor written in place)
                grads.append(e)
    if isinstance(grads[1], RuntimeError):  # eager's fails: no gradients to compare with
        return ""
    if isinstance(grads[0], RuntimeError):
        return f"its backward pass fails where eager's runs ({str(grads[0]).splitlines()[0]})"
    for (name, _), x, y in zip(named, *grads, strict=True):
        if (x is None) != (y is None) or (x is not None and not same_bits(x, y)):
            by = ""
            if x is not None and y is not None:
                by = f" (by up to {(x.double() - y.double()).abs().max().item():.3g})"
            return f"the gradient of {name} differs from eager's{by}"
    return ""


def input_marks(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[int, int | None]]:
    """Which tensors the inputs hold, and their versions: a capture that changes them
    (a cache object passed in, an input written in place) cannot be checked against an
    eager call, which would see other inputs."""
    return [(id(t), version_of(t)) for t in tensors_in([args, kwargs])]


def eager_output(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One eager call, leaving the model, the inputs and the random stream as they were."""
    with restored_state(model, inputs=tensors_in([args, kwargs])):
        return model(*args, **kwargs)


def divergence(got: Any, want: Any) -> str:
    """How the tensors of ``got`` differ from ``want``'s (``""``: bitwise the same)."""
    a, b = tensors_in(got), tensors_in(want)
    if len(a) != len(b):
        return f"the output holds {len(a)} tensors, eager's {len(b)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return (
                f"output tensor {i} is {x.dtype}{list(x.shape)}, eager's {y.dtype}{list(y.shape)}"
            )
        if not same_bits(x, y):
            by = ""
            if x.is_floating_point():
                by = f" (by up to {(x.detach().double() - y.detach().double()).abs().max().item():.3g})"
            return f"output tensor {i} {list(x.shape)} differs from eager's{by}"
    return ""
