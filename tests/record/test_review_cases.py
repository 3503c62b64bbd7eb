"""Cases found by trying to break the recorder: each once failed or misled."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record._writes import written_locations
from fxviz.examples import NegSigmSwapXformer, TwoLayerNet, neg_sigmoid


def test_inference_mode_and_inference_tensors():
    model = nn.Linear(4, 2)
    with torch.inference_mode():
        x = torch.randn(3, 4)
        rec = fxviz.record(model, x)
        assert torch.equal(rec.output, model(x))
        dbg = fxviz.Debugger(model, x)
        dbg.continue_()
        assert torch.equal(dbg.output, model(x))


def test_exported_batchnorm_in_train_mode_keeps_running_stats_as_they_were():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    x = torch.randn(2, 3, 6, 6)
    program = torch.export.export(model, (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = fxviz.record(program, x)
    mean = next(r for r in rec.values() if r.name.endswith("running_mean"))
    assert torch.equal(mean.value, torch.zeros(4))  # as it was read, before batch_norm ran
    buffer = rec.graph_module.get_buffer("1.running_mean")
    assert not torch.equal(buffer, torch.zeros(4))  # batch_norm did write into it...
    bn = next(n for n in rec.graph_module.graph.nodes if n.name == "batch_norm")
    assert written_locations(bn, {})[:2] == (("arg", 3), ("arg", 4))  # ...as foreseen


def test_functional_batch_norm_writes_are_foreseen():
    def f(x, mean, var):
        return torch.nn.functional.batch_norm(x, mean, var, training=True)

    mean, var = torch.zeros(3), torch.ones(3)
    rec = fxviz.record(f, torch.randn(8, 3) + 5, mean, var)
    assert torch.equal(rec["mean"].value, torch.zeros(3))
    assert mean.abs().sum() > 0  # the graph really updated the caller's buffer


def test_outputs_on_two_storages_are_each_copied_before_their_write():
    def f(x):
        values, indices = torch.sort(x)
        values.add_(1)
        indices.mul_(2)
        return values, indices

    x = torch.tensor([3.0, 1.0, 2.0])
    rec = fxviz.record(f, x)
    values, indices = rec["sort"].value
    assert torch.equal(values, torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(indices, torch.tensor([1, 2, 0]))


def test_foreach_and_init_writes_are_foreseen():
    def f(a, b):
        y = a * 1
        torch._foreach_mul_([y, b], 3.0)
        z = a + 0
        nn.init.zeros_(tensor=z)
        return y, z

    a, b = torch.ones(2), torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = fxviz.record(f, a, b)
    assert torch.equal(rec["mul"].value, torch.ones(2))
    assert torch.equal(rec["b"].value, torch.ones(2))
    assert torch.equal(rec["add"].value, torch.ones(2))


def test_statistics_do_not_overflow_on_large_finite_values():
    rec = fxviz.record(lambda x: x * 1, torch.tensor([3e38, 3e38, -1e38]))
    (s,) = rec["mul"].outputs
    assert s.mean == pytest.approx(5e38 / 3, rel=1e-6)
    assert s.std == pytest.approx(torch.tensor([3e38, 3e38, -1e38]).double().std().item(), rel=1e-6)
    assert s.nan == 0


def test_restart_undoes_writes_through_views_and_buffer_updates():
    def f(x):
        x[0].add_(100)
        return x * 2

    x = torch.zeros(3)
    dbg = fxviz.Debugger(f, x)
    dbg.continue_()
    first = dbg.output.clone()
    dbg.restart()
    assert torch.equal(x, torch.zeros(3))
    dbg.continue_()
    assert torch.equal(dbg.output, first)

    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()
    dbg = fxviz.Debugger(model, torch.randn(8, 4))
    dbg.continue_()
    dbg.restart()
    dbg.continue_()
    assert int(model[1].num_batches_tracked) == 1  # one run's worth, as after model(x)


def test_restart_with_a_byte_budget_does_not_crash():
    def h(x):
        x.add_(1)
        return x * 2

    dbg = fxviz.Debugger(h, torch.zeros(3), keep=10_000)
    dbg.continue_()
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, torch.full((3,), 2.0))


def test_the_debugger_leaves_the_callers_random_stream_alone():
    model = nn.Dropout(0.5).train()
    x = torch.ones(1000)
    torch.manual_seed(7)
    expected = model(x)
    after_forward = torch.rand(1)
    torch.manual_seed(7)
    dbg = fxviz.Debugger(model, x)
    dbg.continue_()
    assert torch.equal(dbg.output, expected)  # the same draws as gm(x) under the same seed
    torch.manual_seed(7)
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, expected)
    assert not torch.equal(torch.rand(1), after_forward)  # global stream untouched by restart


def test_restart_sees_graph_edits():
    gm = fxviz.trace(lambda x: torch.neg(x) * 2)
    dbg = fxviz.Debugger(gm, torch.ones(2))
    dbg.continue_()
    neg = next(n for n in gm.graph.nodes if n.name == "neg")
    neg.replace_all_uses_with(neg.args[0])
    gm.graph.erase_node(neg)
    gm.recompile()
    dbg.restart()
    dbg.continue_()
    assert torch.equal(dbg.output, torch.full((2,), 2.0))


def test_exported_programs_check_their_inputs():
    x = torch.randn(3, 4)
    program = torch.export.export(nn.Linear(4, 2), (x,))
    with pytest.raises(fxviz.InputError, match=r"takes 1 input\(s\) but 2 were given"):
        fxviz.record(program, x, x)
    with pytest.raises(fxviz.InputError, match="but 0 were given"):
        fxviz.record(program)


def test_interpreters_that_cannot_apply_are_refused():
    gm = fxviz.trace(TwoLayerNet(8, 4, 2))
    other = fxviz.trace(TwoLayerNet(8, 4, 2))
    with pytest.raises(TypeError, match="made for another graph"):
        fxviz.record(gm, torch.randn(2, 8), interpreter=torch.fx.Interpreter(other))
    with pytest.raises(TypeError, match="runs symbolically"):
        fxviz.Debugger(neg_sigmoid, torch.ones(2), interpreter=NegSigmSwapXformer)


def test_unknown_names_and_indexes_are_fxviz_key_errors():
    rec = fxviz.record(TwoLayerNet(8, 4, 2), torch.randn(2, 8))
    with pytest.raises(fxviz.UnknownNodeError, match="did you mean 'linear2'"):
        rec["linear3"]
    assert rec.get(100) is None
    assert 0 not in rec
    assert "linear1" in rec
    dbg = fxviz.Debugger(TwoLayerNet(8, 4, 2), torch.randn(2, 8))
    with pytest.raises(KeyError):
        dbg.break_at("nope")
    with pytest.raises(ValueError, match="step\\(\\) takes n >= 1"):
        dbg.step(0)


def test_snapshots_keep_requires_grad_and_absmax_of_zeros_is_positive():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    rec = fxviz.record(model, torch.randn(2, 3))
    assert rec["_0"].value.requires_grad
    assert str(fxviz.record(lambda x: x * 0, torch.ones(2))["mul"].outputs[0].absmax) == "0.0"


def test_a_graph_without_an_output_node_is_a_clear_error():
    graph = torch.fx.Graph()
    graph.call_function(torch.relu, (graph.placeholder("x"),))
    gm = torch.fx.GraphModule(nn.Module(), graph)
    for call in (
        lambda: fxviz.record(gm, torch.ones(2)),
        lambda: fxviz.Debugger(gm, torch.ones(2)),
    ):
        with pytest.raises(fxviz.TraceError, match="has no output node"):
            call()


def test_fake_mode_takes_a_spec_larger_than_the_machine():
    import os

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    side = int((2 * ram / 4) ** 0.5) + 1  # a float32 square twice the machine's memory
    model = nn.Linear(side, 3)
    model = model.to("meta")  # its weight alone would not fit either
    report = fxviz.shapes(model, fxviz.spec(side, side), mode="fake")
    assert report["linear"].shape == (side, 3)
    with pytest.raises(fxviz.SpecError, match="but this machine has"):
        fxviz.spec(side, side).materialize()  # a real tensor is still refused up front
