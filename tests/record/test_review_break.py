"""Review findings (wt-break, 2026-11-27), fixed since: each test failed for the reason
its docstring gives. Every test here runs on both engines (``recording_engine``)."""

from __future__ import annotations

import gc
import operator
import traceback
import warnings
import weakref
from collections.abc import Callable

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record._summary import iter_tensors
from fxviz._record._writes import storage_key


def _sort_then_write_both_halves() -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    s = graph.call_function(torch.sort, (x,))  # values (400 B) and indices (800 B)
    values = graph.call_function(operator.getitem, (s, 0))
    indices = graph.call_function(operator.getitem, (s, 1))
    graph.call_method("add_", (values, 1))  # sort's values are copied: the copy fits
    graph.call_method("add_", (indices, 1))  # a copy of its indices does not: sort dropped
    graph.output(graph.call_function(torch.mul, (x, 2)))  # 400 B
    return torch.fx.GraphModule(nn.Module(), graph)


def _held_bytes(rec: fxviz.Recording) -> int:
    """Bytes of memory the recording's kept values hold (its inputs excepted)."""
    storages = {}
    for name in rec:
        if rec[name].op == "placeholder" or rec[name].value is None:
            continue
        for _, t in iter_tensors(rec[name].value):
            storages[storage_key(t)] = t.untyped_storage().nbytes()
    return sum(storages.values())


def test_a_byte_budget_gives_back_a_copy_of_a_value_it_drops_later():
    """A value on two storages (``torch.sort``'s values and indices), copied in part
    before an in-place write to one of them, then dropped because the copy of its other
    part does not fit: ``Recorder._release`` lets go of the storages of the value as it
    is then, and the copy made first (paid for in ``_snapshot`` but never counted in
    ``_kept_storages``) is not there, so its 400 bytes stay counted for good. The
    recording holds 1,600 bytes under ``keep=2000``, and ``mul`` (400 bytes) is still
    dropped."""
    gm = _sort_then_write_both_halves()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fxviz.FxvizWarning)  # "kept the values of ..."
        rec = fxviz.record(gm, torch.randn(100), keep=2000)
    assert rec["sort"].value is None  # dropped: its indices' copy did not fit
    assert rec["mul"].value is not None  # fits in what the recording holds
    # getitem's copy, add_ (values) and add__1 (indices): 1,600 bytes; and mul's 400
    assert _held_bytes(rec) == 1600 + rec["mul"].outputs[0].nbytes <= 2000


class _Fails(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x * 2
        b = a + 1
        return b @ torch.ones(3, 3)  # a shape error


def _freed_at_once(drop: Callable[[], None], refs: list[weakref.ref]) -> list[bool]:
    """Which of ``refs`` are dead right after ``drop()``, the garbage collector off."""
    gc.collect()
    gc.disable()
    try:
        drop()
        return [r() is None for r in refs]
    finally:
        gc.enable()


def test_a_debugger_that_stopped_at_a_failed_node_frees_its_values_when_restarted_or_dropped():
    """A restarted (or dropped) debugger frees its run's values at once (commit 0408980),
    but not once a node failed, which is where a person restarts most: the failed node's
    entry keeps the exception, whose traceback holds the frames of the run (``run_node``
    of the old interpreter, which holds its recorder and its env), so the old run's
    values live in a cycle until the garbage collector's next pass."""
    held = [fxviz.Debugger(_Fails(), torch.randn(2, 2))]
    held[0].continue_()  # stops at matmul, which failed
    assert held[0].recording["matmul"].error is not None
    refs = [weakref.ref(held[0].recording[name].value) for name in ("mul", "add")]
    assert _freed_at_once(held[0].restart, refs) == [True, True]
    held[0].continue_()
    refs = [weakref.ref(held[0].recording[name].value) for name in ("mul", "add")]
    assert _freed_at_once(held.clear, refs) == [True, True]


def _partial_values(gm: torch.fx.GraphModule) -> list[weakref.ref]:
    """What a person does: catch the NodeError, look at its recording, move on (no local
    of this frame, which the error's traceback holds, holds the recording)."""
    refs: list[weakref.ref] = []
    try:
        fxviz.record(gm, torch.randn(2, 2))
    except fxviz.NodeError as error:
        refs.extend(weakref.ref(error.recording[name].value) for name in ("mul", "add"))
    assert refs, "the graph ran"
    return refs


def test_a_partial_recording_dropped_as_a_person_drops_it_frees_its_values_at_once():
    """Commit ba3fd1d frees partial recordings at once only once every
    traceback is cleared by hand (``_drop_tracebacks`` in test_review_findings.py): the
    NodeError's traceback holds the frame that raised it (``_Run._run`` of the generated
    code, ``RecordingMixin.run`` of the interpreter), whose locals hold the error itself
    (``wrapped``) and the recorder, and the failed node's own exception (its
    ``__cause__``, kept in its entry too) holds the same frames, so the error, the
    recorder and every value recorded live in cycles until the collector's next pass
    after an ``except NodeError as error:`` block that read ``error.recording``."""
    gm = torch.fx.symbolic_trace(_Fails())
    gc.collect()
    gc.disable()
    try:
        refs = _partial_values(gm)
        freed = [r() is None for r in refs]
    finally:
        gc.enable()
    assert freed == [True, True]


class _Recording(fxviz.RecordingMixin, torch.fx.Interpreter):
    """A user's recording interpreter, as the README shows it."""


def test_an_interpreters_recording_still_names_the_error_once_the_raised_one_is_gone():
    """``RecordingMixin`` holds the NodeError of its latest run weakly (its traceback holds
    the run's frame, and so the interpreter): once the one raised is dropped, the
    recording's ``error`` is a NodeError like it, of the same node and cause."""
    gm = torch.fx.symbolic_trace(_Fails())
    interp = _Recording(gm)
    with pytest.raises(fxviz.NodeError) as info:
        interp.run(torch.randn(2, 2))
    raised_text, raised_node = str(info.value), info.value.node
    held = interp.recording.error
    assert held is info.value
    del info, held
    gc.collect()
    again = interp.recording.error
    assert isinstance(again, fxviz.NodeError)
    assert isinstance(again, RuntimeError)
    assert (str(again), again.node) == (raised_text, raised_node)
    assert again.__cause__ is interp.recording[raised_node].error


def _python_fails(t: torch.Tensor) -> torch.Tensor:
    return t @ torch.ones(3, 3)  # a shape error, raised below a Python frame of its own


torch.fx.wrap("_python_fails")


class _FailsInPython(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _python_fails(x * 2 + 1)


def test_a_partial_recording_is_freed_at_once_when_the_node_failed_in_python_code():
    """The node's error keeps the frames of the Python code it called (what a post-mortem
    looks at), and each frame holds its caller's: the run's frames, which must not lead
    back to the recorder or the values. The traceback still shows the node's call."""
    gm = torch.fx.symbolic_trace(_FailsInPython())
    gc.collect()
    gc.disable()
    try:
        refs: list[weakref.ref] = []
        try:
            fxviz.record(gm, torch.randn(2, 2))
        except fxviz.NodeError as error:
            refs.extend(weakref.ref(error.recording[name].value) for name in ("mul", "add"))
            text = "".join(traceback.format_exception(error.__cause__))
        freed = [r() is None for r in refs]
    finally:
        gc.enable()
    assert freed == [True, True]
    assert "_python_fails" in text
    assert "return t @ torch.ones(3, 3)" in text


def test_a_debugger_restarted_after_a_failure_in_python_code_frees_its_values():
    """The failed node's error keeps the frames of the Python code it called, and they
    hold the debugger's own (returned) frames: a restart lets go of their locals."""
    gm = torch.fx.symbolic_trace(_FailsInPython())

    def failed_run_values(dbg: fxviz.Debugger) -> list[weakref.ref]:
        dbg.step(10)
        assert dbg.error is not None
        return [weakref.ref(dbg.recording[name].value) for name in ("mul", "add")]

    dbg = fxviz.Debugger(gm, torch.randn(2, 2))
    failed_run_values(dbg)  # a first run in this process may import what torch loads lazily
    dbg.restart()
    gc.collect()
    gc.disable()
    try:
        refs = failed_run_values(dbg)
        dbg.restart()
        freed = [r() is None for r in refs]
    finally:
        gc.enable()
    assert freed == [True, True]


@pytest.mark.parametrize(
    ("command", "args"), [("step", (10,)), ("continue_", ()), ("run_to", ("output",))]
)
def test_a_debugger_dropped_after_a_failure_in_python_code_frees_its_values(command, args):
    """The failed node's error keeps the frames of the Python code it called, whose callers
    are the frames the command ran in (still running when the node failed, so they could
    not be cleared then): once the command returned, they hold no debugger, and a dropped
    debugger frees what it recorded at once. (A caller's frame that holds the debugger,
    this test's own included, is on that traceback too: the command is called here, in
    the frame that drops it.)"""
    gm = torch.fx.symbolic_trace(_FailsInPython())
    first = fxviz.Debugger(gm, torch.randn(2, 2))
    getattr(first, command)(*args)  # a first run may import what torch loads lazily
    del first
    gc.collect()
    gc.disable()
    try:
        dbg = fxviz.Debugger(gm, torch.randn(4096, 2))
        getattr(dbg, command)(*args)
        assert dbg.error is not None
        assert dbg.current.name == "_python_fails"
        refs = [weakref.ref(dbg.recording[name].value) for name in ("mul", "add")]
        del dbg
        freed = [r() is None for r in refs]
    finally:
        gc.enable()
    assert freed == [True, True]
