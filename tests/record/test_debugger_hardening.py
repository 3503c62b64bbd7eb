"""The Debugger repeats runs exactly, notices graph edits, and refuses what cannot work."""

from __future__ import annotations

import operator

import pytest
import torch
from torch import nn

import fxviz


class Accumulator(nn.Module):
    """Writes into its own parameter in place on every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.total = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x)
        return self.total * 1


def test_restart_puts_parameters_written_in_place_back():
    model = Accumulator()
    x = torch.ones(3)
    dbg = fxviz.Debugger(model, x)
    dbg.continue_()
    first = dbg.output.clone()
    assert first.tolist() == [2.0, 2.0, 2.0]
    dbg.restart()
    assert dbg.graph_module.total.tolist() == [1.0, 1.0, 1.0]
    dbg.continue_()
    assert torch.equal(dbg.output, first)  # an exact repeat, not [3, 3, 3]
    dbg.back(2)
    dbg.restart()  # x, and the fetch of `total`, stepped over: the cursor is on the add_
    assert dbg.current is not None
    assert dbg.current.target == "add_"
    assert dbg.graph_module.total.tolist() == [1.0, 1.0, 1.0]


def _sigmoid_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.sigmoid(x) * 2)


def _node(dbg: fxviz.Debugger, name: str) -> torch.fx.Node:
    return next(n for n in dbg.graph.nodes if n.name == name)


def test_an_erased_node_is_noticed_and_restart_resyncs():
    x = torch.randn(4)
    dbg = fxviz.Debugger(_sigmoid_relu, x)  # ran x: the cursor is on sigmoid
    graph = dbg.graph
    sigmoid = _node(dbg, "sigmoid")
    mul = _node(dbg, "mul")
    mul.replace_input_with(sigmoid, sigmoid.args[0])
    graph.erase_node(sigmoid)
    with pytest.raises(
        fxviz.DebuggerError, match=r"graph changed.*'sigmoid' was erased.*restart\(\)"
    ):
        dbg.step()
    assert dbg.position == 1
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, torch.relu(x * 2))
    assert "sigmoid" not in dbg.recording


def test_edited_and_inserted_nodes_are_noticed():
    x = torch.randn(4)
    dbg = fxviz.Debugger(_sigmoid_relu, x)
    dbg.step()  # sigmoid (x is given)
    mul = _node(dbg, "mul")
    mul.args = (mul.args[0], 3)
    with pytest.raises(fxviz.DebuggerError, match=r"'mul' was edited"):
        dbg.continue_()
    dbg.restart()
    dbg.step()
    with dbg.graph.inserting_before(_node(dbg, "mul")):
        neg = dbg.graph.call_function(operator.neg, (_node(dbg, "sigmoid"),))
    with pytest.raises(fxviz.DebuggerError, match=rf"{neg.name!r} was inserted before 'mul'"):
        dbg.run_to("relu")
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, torch.relu(torch.sigmoid(x) * 3))


def test_status_names_where_a_raising_predicate_stopped():
    dbg = fxviz.Debugger(_sigmoid_relu, torch.randn(4))

    def broken(record: fxviz.NodeRecord) -> bool:
        raise ValueError("oops")

    dbg.break_when(broken)
    with pytest.raises(fxviz.DebuggerError, match="broken"):
        dbg.continue_()
    assert dbg.status == (
        "stopped at 'mul' (breakpoint 'broken' raised ValueError after 'sigmoid') — 2/5 nodes"
    )
    assert "start" not in dbg.stop_reason


def test_break_on_rejects_targets_and_ops_that_match_no_node():
    dbg = fxviz.Debugger(_sigmoid_relu, torch.randn(4))
    with pytest.raises(fxviz.UnknownNodeError, match=r"never stop; did you mean 'torch.relu'"):
        dbg.break_on(target="relux")
    with pytest.raises(fxviz.UnknownNodeError, match=r"no_such_fn.*never stop"):
        dbg.break_on(target="no_such_fn")
    with pytest.raises(fxviz.UnknownNodeError, match=r"op=call_module"):
        dbg.break_on(op="call_module")
    with pytest.raises(fxviz.UnknownNodeError, match="tanh"):
        dbg.break_on(target=torch.tanh)
    with pytest.raises(ValueError, match="did you mean 'call_function'"):
        dbg.break_on(op="call_fuction")
    assert dbg.breakpoints == []
    dbg.break_on(target="relu")
    dbg.break_on(op="call_function", target=torch.sigmoid)
    assert dbg.current.name == "sigmoid"  # the start, on a breakpoint: continue goes on
    assert dbg.continue_().name == "mul"
    assert dbg.current.name == "relu"


@pytest.mark.parametrize("entry", [fxviz.record, fxviz.Debugger])
def test_specs_are_refused_with_a_pointer_to_shapes(entry):
    with pytest.raises(fxviz.InputError, match=r"a spec.*fxviz\.shapes.*materialize"):
        entry(nn.Linear(3, 2), fxviz.spec(4, 3))
    with pytest.raises(TypeError):  # InputError is a TypeError
        entry(nn.Linear(3, 2), fxviz.spec(4, 3))


@torch.fx.wrap
def _noisy(x: torch.Tensor) -> torch.Tensor:
    """A function of the user's own that draws random numbers inside."""
    return x + torch.randn(x.shape)


class Random(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _noisy(self.drop(self.lin(x)))
        return torch.sigmoid(y).bernoulli().mul(y) + torch.nn.functional.dropout(y, 0.3)


def test_every_kind_of_random_node_draws_from_the_debuggers_own_stream():
    model = Random().train()
    x = torch.randn(4, 6)
    torch.manual_seed(11)
    expected = fxviz.trace(model)(x)
    torch.manual_seed(11)
    dbg = fxviz.Debugger(model, x)
    state = torch.random.get_rng_state()
    dbg.continue_()
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn from the global
    assert torch.equal(dbg.output, expected)  # the same draws gm(x) makes under that seed
    torch.rand(3)  # the caller draws; the debugger's stream does not care
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, expected)
