"""fxviz.trace: modules, functions, GraphModules and exported programs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz


class Branchy(nn.Module):
    """Data-dependent Python control flow: symbolic tracing cannot follow it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:  # shape-dependent: export specialises it
            return self.lin(x).relu()
        return self.lin(x)


class ValueBranch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # value-dependent: neither tracer can capture it
            return x * 2
        return x


def test_module_is_traced_symbolically(two_layer_net, x20):
    gm = fxviz.trace(two_layer_net)
    assert isinstance(gm, torch.fx.GraphModule)
    assert [n.name for n in gm.graph.nodes] == ["x", "linear1", "clamp", "linear2", "output"]
    assert torch.equal(gm(x20), two_layer_net(x20))


def test_graph_module_is_returned_as_is(two_layer_net):
    gm = fxviz.trace(two_layer_net)
    assert fxviz.trace(gm) is gm


def test_plain_function():
    gm = fxviz.trace(lambda a, b: torch.relu(a) * b)
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(gm(a, b), torch.relu(a) * b)


def test_exported_program_gives_its_runnable_module(two_layer_net, x20):
    program = torch.export.export(two_layer_net, (x20,))
    gm = fxviz.trace(program)
    assert torch.allclose(gm(x20), two_layer_net(x20))
    assert any("aten.linear" in str(n.target) for n in gm.graph.nodes)


def test_export_method_and_auto_fallback():
    model, x = Branchy(), torch.randn(4, 3)
    with pytest.raises(fxviz.TraceError):
        fxviz.trace(model, method="symbolic")
    gm = fxviz.trace(model, x)  # auto: symbolic fails, export succeeds
    assert torch.allclose(gm(x), model(x))
    assert torch.allclose(fxviz.trace(model, x, method="export")(x), model(x))


def test_trace_error_quotes_the_offending_line_and_says_what_to_try():
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(Branchy())
    message = str(info.value)
    assert "if x.shape[0] > 1:" in message
    assert "test_capture.py" in message
    assert "method='export'" in message
    assert "concrete_args" in message
    assert isinstance(info.value, RuntimeError)


def test_auto_reports_both_failures_for_value_dependent_control_flow():
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(ValueBranch(), torch.randn(2))
    message = str(info.value)
    assert "if x.sum() > 0:" in message
    assert "torch.export fallback failed too" in message


def test_export_needs_inputs_and_methods_are_checked():
    with pytest.raises(fxviz.TraceError, match="needs example inputs"):
        fxviz.trace(Branchy(), method="export")
    with pytest.raises(ValueError, match="unknown method: 'jit'"):
        fxviz.trace(Branchy(), method="jit")
    with pytest.raises(fxviz.TraceError, match="cannot trace an object of type int"):
        fxviz.trace(3)


def test_concrete_args_specialise_a_flag():
    def f(x, double):
        return x * 2 if double else x

    gm = fxviz.trace(f, concrete_args={"double": True})
    assert torch.equal(gm(torch.ones(2), True), torch.full((2,), 2.0))
    assert "mul" in [n.name for n in gm.graph.nodes]  # the branch taken was traced
