"""Capture with Dynamo (``torch.compile``): every FX graph it makes, with the breaks between.

This module quarantines the private ``torch._dynamo`` APIs it needs: ``reset``,
``config.patch``, ``optimize(..., guard_export_fn=)``, each graph's
``compile_subgraph_reason`` (reason and user stack of a graph break), and
``symbolic_convert.get_funcname`` with the trace logs that print its answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

from fxviz._capture._eager import (
    divergence,
    eager_is_compiling,
    eager_output,
    input_marks,
    is_user_file,
    model_files,
)
from fxviz._capture._gradient_check import (
    GRADIENTS_DIFFER,
    UNCHECKED,
    GradientCheck,
    capture_gradients,
    gradients_differ_message,
)
from fxviz._capture._inputs import flatten_inputs
from fxviz._capture._segments import tensors_in
from fxviz._capture._state import (
    UnrestorableWrite,
    WriteWatch,
    restored_attributes,
    restored_state,
)
from fxviz._capture._stitch import Capture, GraphBreak, GraphCall, stitch
from fxviz._nodes import source_line
from fxviz.errors import TraceError

__all__ = ["capture_dynamo", "is_user_file", "traced_forward"]


def capture_dynamo(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Capture:
    """Run ``model(*args, **kwargs)`` once under Dynamo, keeping each graph and each call.

    The backend returns every graph's own ``forward``, so the run computes exactly what
    eager PyTorch computes; Dynamo's caches are reset before and after (as
    ``torch._dynamo.explain`` does), so other compiled code recompiles on its next call.

    The run's output is checked against one eager call: when it differs, an installed
    library took a branch only compiled code takes (``torch.compiler.is_compiling()``;
    transformers' Mamba scans with ``associative_scan``), and the model is captured
    again with the files of its own modules told ``False`` too; a capture that still
    differs is refused. Where a library was told ``is_compiling()`` is True, the
    parameters' gradients are checked too (on one more run of the capture and of the
    model, with grad mode on): a compile-only branch may reach the same output by
    another path, whose gradients differ (transformers builds an explicit causal mask
    where eager has SDPA skip it); such a capture says why (:func:`gradients_differ`),
    and its backward pass is not recorded. Where no file of the model's modules asked
    (capturing again cannot change a library's branch), that check waits for the first
    backward pass asked of the capture: a forward-only capture never pays for it. (A
    model whose eager calls differ from each other cannot be checked: its capture is
    kept.)
    """
    marks = input_marks(args, kwargs)
    told_true: list[str] = []
    capture, output = _capture_once(model, args, kwargs, frozenset(), told_true)
    if input_marks(args, kwargs) != marks:  # it changed its inputs: nothing to compare
        return capture
    want = eager_output(model, args, kwargs)
    first = divergence(output, want)
    grads = ""
    if not first:  # the same output: only a library told True can make the gradients differ
        if not told_true:
            return capture
        files = model_files(model)
        if not _asked_from(told_true, files):
            # telling the model's files False changes nothing (a second capture of an LLM
            # costs seconds): the gradients are checked when a backward pass is asked for
            if isinstance(model, torch.nn.Module):
                capture.meta[UNCHECKED] = GradientCheck(model, args, kwargs, told_true)
            return capture
        grads = capture_gradients(model, capture, output, want, args, kwargs)
        if not grads:
            return capture
    else:
        files = model_files(model)
    why = "the files of its modules told is_compiling() False too"
    if files:
        try:
            again_told: list[str] = []
            again, output = _capture_once(model, args, kwargs, files, again_told)
            want = eager_output(model, args, kwargs)
            if not divergence(output, want) and not (
                grads and capture_gradients(model, again, output, want, args, kwargs)
            ):
                if not grads and again_told and isinstance(model, torch.nn.Module):
                    # eager's output now, but a library still told True may take another
                    # path to it (Jamba: its own scan fixed, masking_utils' explicit causal
                    # mask left): checked at the first backward pass, as above
                    again.meta[UNCHECKED] = GradientCheck(model, args, kwargs, again_told, why)
                return again
        except UnrestorableWrite:
            raise  # the model is as the run left it: nothing may run it again
        except Exception as error:  # the library needs the truth to trace at all
            why = f"{why}, Dynamo fails ({type(error).__name__}: {str(error).splitlines()[0]})"
    asked = f"; library code told it True: {', '.join(told_true)}" if told_true else ""
    if not first:  # the same output by another path: only its gradients are not eager's
        capture.meta[GRADIENTS_DIFFER] = gradients_differ_message("Dynamo", grads, asked, why)
        return capture
    if divergence(eager_output(model, args, kwargs), want):  # eager differs from itself
        return capture
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else "the function"
    raise TraceError(
        f"Dynamo's graphs of {name} do not compute what a call computes ({first}): the "
        f"code takes a branch only compiled code takes (torch.compiler.is_compiling(){asked}), "
        f"or Dynamo runs an op differently; with {why}. Capture one real run instead: "
        "fxviz.trace(model, *args, method='real') (method='auto' does)"
    )


def _asked_from(told_true: list[str], files: frozenset[str]) -> bool:
    """Whether any frame told ``is_compiling()`` True (``path:line (function)``, its path
    from the installed-packages folder on) lies in ``files`` (absolute paths)."""
    paths = {where.rsplit(":", 1)[0] for where in told_true}
    return any(f == p or f.endswith(os.sep + p) for f in files for p in paths)


def _capture_once(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    files: frozenset[str],
    told_true: list[str],
) -> tuple[Capture, Any]:
    """One Dynamo run: its capture and its output (``files``, ``told_true``: see
    ``eager_is_compiling``)."""
    import torch._dynamo as dynamo
    import torch._guards

    graphs: list[torch.fx.GraphModule] = []
    reasons: list[Any] = []
    calls: list[GraphCall] = []
    guards: list[str] = []
    recompiles: list[str] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        index = len(graphs)
        graphs.append(gm)
        reasons.append(getattr(gm, "compile_subgraph_reason", None))
        compile_id = torch._guards.CompileContext.current_compile_id()  # "frame/attempt"
        if compile_id is not None and (compile_id.frame_compile_id or 0) > 0:
            recompiles.append(
                f"graph {index}: frame {compile_id.frame_id} compiled again "
                f"(#{compile_id.frame_compile_id}): its guards failed on new values"
            )

        def run(*inputs: Any) -> Any:
            # What Python made (not an input, a parameter or a graph's output), copied
            # before the graph may write it in place.
            before = {
                id(t): t.detach().clone()
                for t in inputs
                if isinstance(t, torch.Tensor) and id(t) not in known
            }
            written = watched.written()
            outputs = gm.forward(*inputs)
            watched.mark()  # the graph's own writes: the graph replays them itself
            calls.append(GraphCall(index, list(inputs), outputs, before=before, written=written))
            known.update(id(t) for t in tensors_in(outputs))
            return outputs

        return run

    def keep_guards(found: Any) -> None:
        guards.extend(str(g) for g in found)

    names, leaves = flatten_inputs(model, args, kwargs)
    known = {id(t) for t in leaves if isinstance(t, torch.Tensor)}
    if isinstance(model, torch.nn.Module):
        known.update(id(t) for t in [*model.parameters(), *model.buffers()])
    watched = WriteWatch(model, leaves)
    dynamo.reset()
    try:
        # torch marks the module it wraps (``_is_torch_compile``): put back afterwards, and
        # no write of the run, which the capture would replay on the model
        with restored_attributes(model):
            compiled = dynamo.optimize(backend, nopython=False, guard_export_fn=keep_guards)(model)
            with (
                _quiet(),
                _unlogged_line_headers(),
                restored_state(model, inputs=leaves) as state,
                eager_is_compiling(dynamo=True, model_files=files, told_true=told_true),
                dynamo.config.patch(suppress_errors=False, verbose=False),
            ):
                watched.mark()
                output = compiled(*args, **kwargs)
                written = watched.written()
                writes = state.writes()
    finally:
        dynamo.reset()
        watched.close()  # Dynamo may keep the backend's ``run``, which must not keep the model
    capture = stitch(
        model,
        names,
        leaves,
        graphs,
        calls,
        output,
        method="dynamo",
        breaks=lambda k: _break_after(k, calls, reasons, graphs),
        guards=guards,
        recompiles=recompiles,
        writes=writes,
        written=written,
    )
    return capture, output


def traced_forward(capture: Capture, model: Any) -> bool:
    """Whether one of the capture's graphs came from ``model``'s own forward (or function)."""
    import inspect

    fn = model.forward if isinstance(model, torch.nn.Module) else model
    codes = [getattr(f, "__code__", None) for f in (fn, inspect.unwrap(fn))]
    spans = []
    for code in codes:
        if code is None:
            continue
        lines = [line for _, _, line in code.co_lines() if line is not None]
        spans.append((code.co_filename, min(lines, default=0), max(lines, default=0)))
    for gm in capture.graphs:
        reason = getattr(gm, "compile_subgraph_reason", None)
        for frame in getattr(reason, "user_stack", None) or ():
            for file, first, last in spans:
                if frame.filename == file and first <= (frame.lineno or 0) <= last:
                    return True
    return False


def _break_after(
    k: int, calls: list[GraphCall], reasons: list[Any], graphs: list[torch.fx.GraphModule]
) -> GraphBreak:
    """What ended graph call ``k`` (``-1``: the Python before the first call)."""
    if k < 0:
        first = graphs[calls[0].graph] if calls else None
        file, line, code = _first_line(first) if first is not None else ("", 0, "")
        return GraphBreak(-1, "Python before the first graph", file, line, code)
    reason = reasons[calls[k].graph]
    text = "the graph's frame returned to Python"
    frames: list[Any] = []
    if reason is not None:
        frames = [f for f in reason.user_stack if is_user_file(f.filename)] or list(
            reason.user_stack
        )
        if reason.graph_break:
            text = " ".join(str(reason.reason).split("Explanation:")[0].split())
    if k == len(calls) - 1 and (reason is None or not reason.graph_break):
        text = "Python after the last graph, until the model returned"
    until = ""
    if k + 1 < len(calls):
        file, line, code = _first_line(graphs[calls[k + 1].graph])
        until = f"{file.rsplit('/', 1)[-1]}:{line}: {code}" if file else ""
    last = frames[-1] if frames else None
    if last is None:
        return GraphBreak(k, text, until=until)
    code = (last.line or "").strip()
    return GraphBreak(k, text, last.filename, last.lineno or 0, code, until=until)


def _first_line(gm: torch.fx.GraphModule) -> tuple[str, int, str]:
    """The user line of the first node with a stack trace in ``gm``."""
    for node in gm.graph.nodes:
        text = source_line(node)
        if text.startswith("File "):
            head, _, code = text.partition(": ")
            parts = head.split('"')
            if len(parts) >= 3:
                line = head.rsplit("line ", 1)[-1].split(",")[0]
                return parts[1], int(line) if line.isdigit() else 0, code
    return "", 0, ""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Dynamo logs graph-break warnings; fxviz reports the breaks instead."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _unlogged_line_headers() -> Iterator[None]:
    """Dynamo names the function around each traced call for its ``trace_call`` and
    ``trace_source`` debug logs before it asks whether they are on: the first time it
    meets a source file, it tokenizes all of it (11 files, ``modeling_utils.py``'s
    5,000 lines among them, for a 4-layer GPT-2: a tenth of its first capture). While
    the capture runs, that name is looked up only when one of those logs is on; it is
    a log line's text and nothing else (torch 2.13: ``symbolic_convert.get_funcname``,
    read by ``get_line_of_code_header`` only, whose text only those logs print)."""
    from torch._dynamo import output_graph, symbolic_convert

    named = getattr(symbolic_convert, "get_funcname", None)
    logs = [
        log
        for module, name in (
            (symbolic_convert, "trace_call_log"),
            (symbolic_convert, "trace_source_log"),
            (output_graph, "trace_call_log"),
        )
        if isinstance(log := getattr(module, name, None), logging.Logger)
    ]
    if named is None or len(logs) < 3:
        yield  # another torch: it looks the names up as it always did
        return

    def funcname(filename: str, lineno: int) -> str | None:
        if any(log.isEnabledFor(logging.DEBUG) for log in logs):
            return named(filename, lineno)
        return None

    setattr(symbolic_convert, "get_funcname", funcname)  # noqa: B010 (a private name)
    try:
        yield
    finally:
        setattr(symbolic_convert, "get_funcname", named)  # noqa: B010
