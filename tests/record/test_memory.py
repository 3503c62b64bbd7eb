"""No entry point keeps a model alive: once the caller drops what it got back (a
recording, a debugger, a report, a widget, an exception), the model and its parameters
are freed."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import fxviz
from fxviz._record import RecordingInterpreter


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 4)
        self.drop = torch.nn.Dropout(0.5)
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.drop(self.lin(x))) * self.scale


class Broken(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) @ x  # (2, 4) @ (2, 6): a shape error


def _assert_freed(use: Callable[[torch.nn.Module, torch.Tensor], Any], model_cls: type = Net):
    model = model_cls()
    x = torch.randn(2, 6)
    refs = [weakref.ref(model), weakref.ref(model.lin.weight)]
    kept = use(model, x)
    assert kept is not None  # the caller really held something
    del model, kept
    # Two passes: a model in a reference cycle dies in the first, and only then lets go of
    # its kept capture (weakly keyed by the model), itself a cycle freed by the second.
    gc.collect()
    gc.collect()
    alive = [type(r()).__name__ for r in refs if r() is not None]
    assert not alive, f"still alive after del + gc.collect(): {alive}"


def _record_twice(model: torch.nn.Module, x: torch.Tensor) -> Any:
    fxviz.record(model, x)
    return fxviz.record(model, x, keep="stats")


def _debugger(model: torch.nn.Module, x: torch.Tensor) -> Any:
    dbg = fxviz.Debugger(model, x)
    dbg.step(2)
    dbg.back()
    dbg.continue_()
    dbg.restart()
    dbg.break_when(fxviz.has_nonfinite)
    dbg.continue_()
    return dbg


def _interpreter(model: torch.nn.Module, x: torch.Tensor) -> Any:
    interp = RecordingInterpreter(fxviz.trace(model), garbage_collect_values=False)
    interp.run(x)
    return interp.recording


def _report(tmp_path: Path) -> Callable[[torch.nn.Module, torch.Tensor], Any]:
    def use(model: torch.nn.Module, x: torch.Tensor) -> Any:
        fxviz.report(fxviz.record(model, x), tmp_path / "run.html")
        return (tmp_path / "run.html").read_text()

    return use


def _diff(model: torch.nn.Module, x: torch.Tensor) -> Any:
    gm = fxviz.trace(model)
    after = fxviz.trace(model)
    return fxviz.diff(gm, after, x)


def _show(model: torch.nn.Module, x: torch.Tensor) -> Any:
    view = fxviz.show(fxviz.record(model, x))
    view.close()
    return view


def _debug(model: torch.nn.Module, x: torch.Tensor) -> Any:
    app = fxviz.debug(model, x)
    app.close()
    return app


@pytest.mark.parametrize(
    "use",
    [
        _record_twice,
        _debugger,
        _interpreter,
        lambda model, x: fxviz.shapes(model, x),
        lambda model, x: fxviz.shapes(model, x, mode="fake"),
        lambda model, x: fxviz.shapes(model, fxviz.spec(2, 6), mode="meta"),
        _diff,
        _show,
        _debug,
        lambda model, x: fxviz.to_dot(fxviz.record(model, x)).source,
    ],
    ids=[
        "record",
        "Debugger",
        "RecordingInterpreter",
        "shapes-real",
        "shapes-fake",
        "shapes-meta",
        "diff",
        "show",
        "debug",
        "to_dot",
    ],
)
def test_dropping_the_result_frees_the_model(use: Any):
    _assert_freed(use)


class ValueSteered(Net):
    """Python steered by a tensor's value: no one graph holds it, one run does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if y.sum() > -1e9:
            y = y * 2
        return torch.relu(y) * self.scale


@pytest.mark.parametrize("method", ["auto", "dynamo", "real"])
def test_a_one_run_capture_frees_the_model_once_dropped(method: str):
    # the captures' cache is weakly keyed by the model: a capture that held it (to bind
    # inputs, or as an attribute its run "wrote") kept it alive for the process's life
    def use(model: torch.nn.Module, x: torch.Tensor) -> Any:
        rec = fxviz.record(model, x, method=method)
        assert rec.graph_module.meta["fxviz_method"] == ("dynamo" if method == "auto" else method)
        return rec

    _assert_freed(use, ValueSteered)


def test_report_frees_the_model(tmp_path: Path):
    _assert_freed(_report(tmp_path))


def _failed_record(model: torch.nn.Module, x: torch.Tensor) -> Any:
    try:
        fxviz.record(model, x)
    except fxviz.NodeError as error:
        return str(error)
    raise AssertionError("the model should fail")


def _kept_error(run: Callable[[], Any]) -> Any:
    try:
        run()
    except fxviz.NodeError as error:
        kept = error  # the caller keeps the exception (and its traceback) for a while
    assert kept.recording is not None
    assert kept.__traceback__ is not None
    return kept


@pytest.mark.parametrize(
    "use",
    [
        _failed_record,
        lambda model, x: _kept_error(lambda: fxviz.record(model, x)),
        lambda model, x: _kept_error(lambda: fxviz.shapes(model, x)),
        lambda model, x: _kept_error(lambda: fxviz.shapes(model, x, mode="fake")),
        lambda model, x: _kept_error(lambda: RecordingInterpreter(fxviz.trace(model)).run(x)),
        lambda model, x: fxviz.Debugger(model, x).continue_(),
    ],
    ids=[
        "failed-record",
        "kept-NodeError",
        "kept-ShapeError",
        "kept-fake-ShapeError",
        "kept-interpreter-error",
        "Debugger-post-mortem",
    ],
)
def test_failures_and_kept_exceptions_free_the_model_once_dropped(use: Any, monkeypatch: Any):
    # torch logs fake-mode failures with their traceback, and pytest keeps log records
    # (and so the frames) until the test ends: not a leak outside pytest
    monkeypatch.setattr(logging.getLogger("torch._subclasses.fake_tensor"), "disabled", True)
    _assert_freed(use, Broken)


def test_a_kept_recording_keeps_the_parameters_alive_as_expected():
    model = Net()
    ref = weakref.ref(model.lin.weight)
    rec = fxviz.record(model, torch.randn(2, 6))
    del model
    gc.collect()
    assert ref() is rec.graph_module.lin.weight  # the graph module shares the parameters
    del rec
    gc.collect()
    assert ref() is None
