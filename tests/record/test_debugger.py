"""fxviz.Debugger: stepping, time travel, breakpoints and post-mortem on real models."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.examples import TwoLayerNet


@pytest.fixture
def dbg(two_layer_net, x20):
    return fxviz.Debugger(two_layer_net, x20)


def test_step_through_to_the_end(dbg, two_layer_net, x20):
    # the input is given: the run starts at the model's first node, the input run
    assert dbg.current.name == "linear1"
    assert dbg.position == 1
    assert dbg.status == "stopped at 'linear1' (start) — 1/5 nodes"
    assert list(dbg.recording) == ["x"]
    assert not dbg.done
    record = dbg.step()
    assert record.name == "linear1"
    assert dbg.current.name == "clamp"
    assert dbg.step(2).name == "linear2"
    assert dbg.output is None
    assert dbg.step(10).name == "output"  # stops at the end
    assert dbg.done
    assert dbg.current is None
    assert dbg.stop_reason == "end"
    assert torch.equal(dbg.output, two_layer_net(x20))
    assert dbg.status == "finished — 5/5 nodes"
    with pytest.raises(fxviz.DebuggerError, match="already finished"):
        dbg.continue_()
    with pytest.raises(fxviz.DebuggerError, match="already finished"):
        dbg.step()


def test_back_is_time_travel_without_rerunning(dbg):
    dbg.step(2)
    clamp = dbg.value("clamp")
    assert dbg.back().name == "linear1"
    assert dbg.current.name == "clamp"
    with pytest.raises(fxviz.DebuggerError, match="has not run yet"):
        dbg.value("clamp")
    again = dbg.step()
    assert again.name == "clamp"
    assert dbg.value("clamp") is clamp
    assert dbg.back(100).name == "x"  # back to the start: the input is given
    assert dbg.current.name == "linear1"
    assert dbg.position == 1
    assert list(dbg.recording) == ["x"]


def test_time_travel_replays_dropout_exactly():
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)).train()
    dbg = fxviz.Debugger(model, torch.randn(4, 8))
    dbg.continue_()
    first = dbg.output.clone()
    dbg.back(2)
    dbg.continue_()
    assert torch.equal(dbg.output, first)
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, first)  # restart resets the generator too


def test_breakpoints_by_name_op_and_target(dbg):
    dbg.break_at("linear2")
    assert dbg.continue_().name == "clamp"
    assert dbg.current.name == "linear2"
    assert dbg.stop_reason == "breakpoint"
    assert dbg.status == "stopped at 'linear2' (breakpoint) — 3/5 nodes"
    assert dbg.continue_().name == "output"
    assert dbg.done

    dbg.restart()
    dbg.clear_breakpoints()
    dbg.break_on(op="call_method")
    dbg.continue_()
    assert dbg.current.name == "clamp"

    dbg.restart()
    dbg.clear_breakpoints()
    dbg.break_on(target=nn.Linear)
    assert dbg.current.name == "linear1"  # the start: at the first Linear already
    dbg.continue_()
    assert dbg.current.name == "linear2"
    assert dbg.stop_reason == "breakpoint"
    assert dbg.breakpoints == ["on target=<class 'torch.nn.modules.linear.Linear'>"]


def test_break_on_target_text_matches_aten_and_torch_names():
    def f(x):
        return torch.relu(x * 2)

    x = torch.randn(3)
    dbg = fxviz.Debugger(f, x)
    dbg.break_on(target="relu")
    dbg.continue_()
    assert dbg.current.name == "relu"
    exported = fxviz.Debugger(fxviz.trace(f, x, method="export"), x)
    exported.break_on(target="relu")
    exported.continue_()
    assert str(exported.current.target) == "aten.relu.default"
    with pytest.raises(ValueError, match="unknown op"):
        dbg.break_on(op="call")


def test_break_when_nonfinite_stops_after_the_first_nan():
    def f(x):
        a = x * 2
        b = torch.sqrt(a)  # sqrt of a negative number: NaN
        c = b + 1
        return c.sum()

    dbg = fxviz.Debugger(f, torch.tensor([1.0, -1.0]))
    dbg.break_when(fxviz.has_nonfinite)
    last = dbg.continue_()
    assert last.name == "sqrt"
    assert dbg.stop_reason == "has_nonfinite"
    assert dbg.current.name == "add"
    assert last.outputs[0].nan == 1


def test_break_when_dtype_changed():
    dbg = fxviz.Debugger(lambda x: (x * 2).half() + 1, torch.ones(2))
    dbg.break_when(fxviz.dtype_changed)
    assert dbg.continue_().name == "half"


def test_predicate_errors_are_explained():
    dbg = fxviz.Debugger(lambda x: x + 1, torch.ones(1))
    dbg.break_when(lambda record: record.outputs[5])
    with pytest.raises(fxviz.DebuggerError, match="predicate '<lambda>' raised IndexError"):
        dbg.continue_()
    assert dbg.position == 2  # the node ran and stays recorded (after the input)
    assert dbg.recording["add"].error is None


def test_run_to_goes_forward_and_back(dbg):
    dbg.break_at("clamp")  # run_to ignores breakpoints
    assert dbg.run_to("linear2").name == "clamp"
    assert dbg.current.name == "linear2"
    dbg.run_to("linear1")
    assert dbg.current.name == "linear1"
    assert dbg.position == 1
    with pytest.raises(KeyError, match="did you mean 'linear2', 'linear1'"):
        dbg.run_to("linear3")


def test_post_mortem_stops_at_the_failing_node():
    model = TwoLayerNet(20, 8, 4)
    bad = torch.randn(5, 19)
    dbg = fxviz.Debugger(model, bad)
    last = dbg.continue_()
    assert last.name == "linear1"
    assert dbg.current.name == "linear1"
    assert isinstance(dbg.error, RuntimeError)
    assert "5x19" in str(dbg.error)
    assert dbg.stop_reason == "error"
    assert not dbg.done
    assert dbg.status.startswith("stopped at 'linear1' (RuntimeError: mat1 and mat2")
    assert list(dbg.inputs()) == ["x"]
    assert dbg.inputs()["x"] is bad
    assert list(dbg.recording) == ["x", "linear1"]
    assert dbg.recording["linear1"].error is dbg.error
    with pytest.raises(fxviz.DebuggerError, match="stopped at 'linear1', which raised") as info:
        dbg.continue_()
    assert "x: float32[5, 19]" in str(info.value)
    # the failing node is the first step: back goes to the start, which is at it, and the
    # failure is known there without re-running it
    assert dbg.back().name == "x"
    assert dbg.current.name == "linear1"
    assert isinstance(dbg.error, RuntimeError)
    assert dbg.status.startswith("stopped at 'linear1' (RuntimeError")
    assert "1/5 nodes" in dbg.status


def test_back_from_a_failure_undoes_the_last_node_that_completed():
    def f(x, w):
        return torch.relu(x) @ w  # (2, 4) @ (3, 2): fails

    dbg = fxviz.Debugger(f, torch.ones(2, 4), torch.ones(3, 2))
    assert dbg.continue_().name == "matmul"
    assert dbg.back().name == "w"  # the last node run before the cursor: the inputs are given
    assert dbg.error is None
    assert dbg.current.name == "relu"
    assert dbg.step().name == "relu"
    # the failure ahead is already known: the debugger is at it again, without re-running it
    assert dbg.current.name == "matmul"
    assert isinstance(dbg.error, RuntimeError)


def test_restart_puts_inputs_written_in_place_back():
    def f(x):
        x.mul_(2)
        return x + 1

    x = torch.ones(2)
    dbg = fxviz.Debugger(f, x)
    dbg.continue_()
    assert torch.equal(x, torch.full((2,), 2.0))
    assert torch.equal(dbg.output, torch.full((2,), 3.0))
    dbg.restart()
    assert torch.equal(x, torch.ones(2))
    dbg.continue_()
    assert torch.equal(dbg.output, torch.full((2,), 3.0))


def test_values_not_kept_say_so(two_layer_net, x20):
    dbg = fxviz.Debugger(two_layer_net, x20, keep="stats")
    dbg.step(3)
    with pytest.raises(fxviz.DebuggerError, match="was not kept"):
        dbg.value("linear1")
    assert dbg.recording["linear1"].outputs[0].std is not None
    dbg.continue_()
    assert torch.equal(dbg.output, two_layer_net(x20))


def test_debugger_with_a_user_interpreter():
    from fxviz.examples import NegSigmSwapInterpreter, neg_sigmoid

    x = torch.randn(4)
    dbg = fxviz.Debugger(neg_sigmoid, x, interpreter=NegSigmSwapInterpreter)
    dbg.continue_()
    assert torch.equal(dbg.output, torch.neg(x).sigmoid())


def test_wrong_inputs_fail_before_stepping(two_layer_net):
    with pytest.raises(fxviz.InputError, match="but 0 were given"):
        fxviz.Debugger(two_layer_net)


def test_repr_and_html(dbg):
    dbg.step()
    assert repr(dbg) == "<fxviz.Debugger: stopped at 'clamp' (step) — 2/5 nodes>"
    assert "fxviz.Debugger" in dbg._repr_html_()
    assert "<table" in dbg._repr_html_()


def test_a_pause_inside_a_no_grad_region_leaves_the_callers_grad_mode():
    class Teacher(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                y = self.lin(x)
            return self.lin(y)

    dbg = fxviz.Debugger(Teacher(), torch.randn(3, 4))
    dbg.run_to("lin_1")  # past the region's first node: inside it, as the graph runs
    assert dbg.recording["lin"].outputs[0].requires_grad is False
    assert torch.is_grad_enabled()  # the notebook's next cell runs with gradients
    dbg.continue_()
    assert dbg.recording["lin_1"].outputs[0].requires_grad is True  # after the region
    with torch.no_grad():  # made under no_grad: the graph's run keeps that mode
        quiet = fxviz.Debugger(Teacher(), torch.randn(3, 4))
    quiet.continue_()
    assert quiet.recording["lin_1"].outputs[0].requires_grad is False
    assert torch.is_grad_enabled()


class DynamoRegions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.lin(x)
        with torch.inference_mode():
            z = y * 2
        return z.clone().float()


def _callers_modes() -> tuple[bool, bool, bool]:
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.is_autocast_enabled("cpu"),
    )


def test_a_pause_inside_a_dynamo_region_leaves_the_caller_outside_it():
    x = torch.randn(3, 4)
    dbg = fxviz.Debugger(DynamoRegions(), x, method="dynamo")
    seen = []
    while not dbg.done:
        dbg.step()
        seen.append(_callers_modes())
    assert set(seen) == {(True, False, False)}  # between every two steps
    rec = dbg.recording  # the values as the regions made them
    assert rec["y"].outputs[0].dtype == torch.bfloat16
    assert rec["z"].value.is_inference()
    dbg.restart()
    dbg.run_to("y")  # paused inside the autocast region: its node still casts
    assert _callers_modes() == (True, False, False)
    dbg.step(4)  # y, out of autocast, into inference_mode, z: paused inside that one
    assert dbg.recording["y"].outputs[0].dtype == torch.bfloat16
    assert dbg.recording["z"].value.is_inference()
    assert _callers_modes() == (True, False, False)


def test_a_debugger_runs_in_the_modes_it_was_made_in():
    x = torch.randn(3, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model = torch.nn.Linear(4, 4)
        expected = model(x)
        dbg = fxviz.Debugger(model, x)
    dbg.continue_()  # stepped outside the autocast block, as a later notebook cell does
    assert dbg.recording.output.dtype == expected.dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")
    with torch.inference_mode():
        dbg = fxviz.Debugger(model, x)
    dbg.continue_()
    assert dbg.recording.output.is_inference()
    assert not torch.is_inference_mode_enabled()
