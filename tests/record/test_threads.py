"""fxviz from several threads: the same results as one after the other, and nothing that
other threads do (plain forwards, random draws) is disturbed."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import fxviz


class Deep(nn.Module):
    def __init__(self, width: int = 16, depth: int = 8, p: float = 0.0) -> None:
        super().__init__()
        self.first = nn.Linear(width, width)
        self.layers = nn.Sequential(
            *[nn.Sequential(nn.Linear(width, width), nn.Dropout(p)) for _ in range(depth)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.layers(self.first(x))).sum(1)


def _run_threads(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run each job in its own thread, all released at once; re-raise the first error."""
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def work(i: int) -> None:
        try:
            start.wait()
            results[i] = jobs[i]()
        except BaseException as e:  # reported below, with the thread's traceback
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_record_shapes_and_trace_in_threads_match_sequential_runs_and_leave_forwards_alone():
    torch.manual_seed(0)
    models = [Deep() for _ in range(3)]
    bystander = Deep()
    x = torch.randn(3, 16)

    def use(model: nn.Module) -> Any:
        outputs = []
        for _ in range(6):
            rec = fxviz.record(model, x)
            shapes = fxviz.shapes(model, x, mode="fake")
            gm = fxviz.trace(model)
            outputs.append((rec.output, shapes["sum_1"].shape, gm.code))
        return outputs

    def forwards() -> list[torch.Tensor]:
        return [bystander(x) for _ in range(600)]

    sequential = [use(m) for m in models]
    expected_forward = bystander(x)
    *threaded, plain = _run_threads([lambda m=m: use(m) for m in models] + [forwards])
    for got, want in zip(threaded, sequential, strict=True):
        for (out, shape, code), (out0, shape0, code0) in zip(got, want, strict=True):
            assert torch.equal(out, out0)
            assert shape == shape0 == (3,)
            assert code == code0
    assert all(torch.equal(y, expected_forward) for y in plain)


def _step_through(dbg: fxviz.Debugger) -> torch.Tensor:
    while not dbg.done:
        dbg.step()
    return dbg.output


def test_dropout_debuggers_in_two_threads_match_sequential_and_leave_the_global_rng_alone():
    torch.manual_seed(0)
    models = [Deep(depth=12, p=0.5).train() for _ in range(2)]
    x = torch.randn(4, 16)

    torch.manual_seed(123)
    expected_forward = models[0](x)  # the draws gm(x) makes from the global stream
    torch.manual_seed(123)
    sequential = [_step_through(fxviz.Debugger(m, x)) for m in models]
    assert torch.equal(sequential[0], expected_forward)

    for _ in range(3):  # thread timing varies: give a race several chances to show
        torch.manual_seed(123)
        debuggers = [fxviz.Debugger(m, x) for m in models]
        before = torch.random.get_rng_state()
        reference_draws = torch.rand(400)
        torch.random.set_rng_state(before)

        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads often: interleave steps and draws
        try:
            *outputs, draws = _run_threads(
                [lambda d=d: _step_through(d) for d in debuggers] + [_caller_draws]
            )
        finally:
            sys.setswitchinterval(switch)
        for got, want in zip(outputs, sequential, strict=True):
            assert torch.equal(got, want)
        assert torch.equal(draws, reference_draws)  # the caller's stream was never touched

    for dbg, want in zip(debuggers, sequential, strict=True):  # restart repeats the run
        dbg.restart()
        assert torch.equal(_step_through(dbg), want)


def _caller_draws() -> torch.Tensor:
    return torch.cat([torch.rand(1) for _ in range(400)])


_INSIDE = threading.Event()
_RELEASE = threading.Event()


@torch.fx.wrap
def _pause(x: torch.Tensor) -> torch.Tensor:
    """A node that waits for the test: another thread acts while a debugger is mid-step."""
    _INSIDE.set()
    assert _RELEASE.wait(30)
    return x


class Pausing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.dropout(x, 0.5, training=True)
        return nn.functional.dropout(_pause(y), 0.5, training=True)


def test_the_caller_draws_from_its_own_stream_while_a_debugger_is_mid_step():
    _INSIDE.clear()
    _RELEASE.clear()
    torch.manual_seed(5)
    dbg = fxviz.Debugger(Pausing(), torch.ones(8))
    dbg.step()  # the first dropout (where the debugger starts) drew from its stream
    assert getattr(dbg.current, "name", None) == "_pause"
    state = torch.random.get_rng_state()
    reference = torch.rand(5)
    torch.random.set_rng_state(state)
    stepping = threading.Thread(target=dbg.step)  # runs _pause, which waits
    stepping.start()
    try:
        assert _INSIDE.wait(30)
        drawn = torch.rand(5)  # while the debugger is inside a step
    finally:
        _RELEASE.set()
        stepping.join()
    assert torch.equal(drawn, reference)
    assert not torch.equal(torch.rand(5), reference)  # and the caller's stream moved on


def test_attention_without_dropout_steps_without_a_global_random_state_warning():
    # the fused CPU attention kernel takes no generator; in eval mode (dropout 0) it draws
    # nothing, so the debugger neither warns (warnings are errors in this suite) nor
    # touches the global state
    model = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    dbg = fxviz.Debugger(fxviz.trace(model, x, method="export"), x)
    state = torch.random.get_rng_state()
    while not dbg.done:
        dbg.continue_()
    assert dbg.error is None
    torch.testing.assert_close(dbg.output, model(x), rtol=0, atol=0)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_one_recording_read_from_several_threads_at_once_reads_whole():
    """Records made at first read are made once, whole, whichever thread reads first: the
    others wait for them (a widget and the user's cell may read one recording at once)."""
    before = sys.getswitchinterval()
    torch.manual_seed(0)
    model, x = Deep(depth=40), torch.randn(4, 16)
    expected = _maxima(fxviz.record(model, x))
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for _ in range(5):
            read = _run_threads([functools.partial(_maxima, fxviz.record(model, x))] * 4)
            assert all(names == expected for names in read)
    finally:
        sys.setswitchinterval(before)


def _maxima(rec: fxviz.Recording) -> list[tuple[str, Any]]:
    return [(r.name, r.outputs[0].max) for r in rec.values()]
