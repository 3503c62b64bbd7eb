"""fxviz.record: exact outputs, per-node records, statistics, tables and budgets."""

from __future__ import annotations

import json
import math
import operator
import warnings

import pytest
import torch
from torch import nn

import fxviz
from tests.conftest import make_hostile_graph


def test_output_identical_and_every_node_recorded(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    expected = two_layer_net(x20)
    assert torch.equal(rec.output, expected)
    assert rec.output.dtype == expected.dtype
    assert rec.complete
    assert rec.error is None
    assert list(rec) == ["x", "linear1", "clamp", "linear2", "output"]
    assert len(rec) == 5
    assert [r.index for r in rec.values()] == list(range(5))
    linear1 = rec["linear1"]
    assert (linear1.op, linear1.target, linear1.module) == ("call_module", "linear1", "linear1")
    assert linear1.inputs == ("x",)
    assert linear1.input_shapes == ((5, 20),)
    assert linear1.shape == (5, 8)
    assert linear1.dtype == torch.float32
    assert rec["clamp"].target == "clamp"
    assert rec["clamp"].op == "call_method"
    assert rec[2] is rec["clamp"]
    assert rec[next(iter(fxviz.trace(two_layer_net).graph.nodes))].name == "x"
    assert all(r.time_s >= 0 for r in rec.values())


def test_values_are_kept_and_env_holds_every_value(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    assert torch.equal(rec["clamp"].value, two_layer_net.linear1(x20).clamp(min=0))
    assert rec["x"].value is x20
    assert {n.name for n in rec.env} == set(rec)


def test_statistics_match_torch(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    value = rec["linear1"].value
    (s,) = rec["linear1"].outputs
    assert s.min == pytest.approx(value.min().item())
    assert s.max == pytest.approx(value.max().item())
    assert s.mean == pytest.approx(value.mean().item(), abs=1e-6)
    assert s.std == pytest.approx(value.std().item(), rel=1e-5)
    assert s.absmax == pytest.approx(value.abs().max().item())
    assert (s.nan, s.posinf, s.neginf) == (0, 0, 0)
    assert rec["clamp"].outputs[0].zeros == int((rec["clamp"].value == 0).sum())
    assert s.numel == 40
    assert s.nbytes == 160
    assert s.stride == (8, 1)
    assert s.requires_grad
    assert s.device == "cpu"
    assert s.path == ""


def test_nonfinite_values_are_counted_and_found():
    def f(x):
        y = torch.log(x)  # log(-1) = nan, log(0) = -inf
        z = y * 2
        return z.exp()

    x = torch.tensor([1.0, -1.0, 0.0, 2.0])
    rec = fxviz.record(f, x)
    (s,) = rec["log"].outputs
    assert (s.nan, s.posinf, s.neginf) == (1, 0, 1)
    assert s.min == pytest.approx(0.0)
    assert s.max == pytest.approx(math.log(2.0))
    assert rec.first_nonfinite().name == "log"
    assert fxviz.record(lambda x: x + 1, torch.ones(2)).first_nonfinite() is None
    assert fxviz.has_nonfinite(rec["mul"])
    assert not fxviz.has_nonfinite(rec["x"])


def test_stats_off_keeps_shapes_and_timing():
    x = torch.tensor([[1.0, float("nan")], [-2.0, 3.0], [0.5, 1.5]])
    rec = fxviz.record(lambda x: (x.relu(), x.nan_to_num()), x, stats=False)
    (s,) = rec["relu"].outputs
    assert s.shape == (3, 2)
    assert s.min is None
    assert s.nan is None
    # without statistics, the predicate reads the kept value itself
    assert fxviz.has_nonfinite(rec["relu"]) is True
    assert fxviz.has_nonfinite(rec["nan_to_num"]) is False


def test_integer_bool_and_low_precision_outputs():
    def f(ids, mask, h):
        return ids + 1, mask.logical_not(), h.to(torch.bfloat16) * 2

    ids = torch.tensor([[3, 5], [7, 9]])
    mask = torch.tensor([True, False, False])
    rec = fxviz.record(f, ids, mask, torch.randn(4))
    assert rec["add"].outputs[0].mean == pytest.approx(7.0)
    assert rec["logical_not"].outputs[0].zeros == 1
    assert rec["mul"].dtype == torch.bfloat16
    assert fxviz.dtype_changed(rec["to"])
    assert not fxviz.dtype_changed(rec["add"])


def test_multiple_outputs_kwargs_get_attr_and_methods():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor([2.0, 3.0]))

        def forward(self, x, *, bias=None):
            y = x * self.scale
            parts = y.chunk(2, dim=0)
            return {"sum": y.sum(dim=-1, keepdim=True), "parts": parts, "bias": bias}

    gm = fxviz.trace(Model())
    x = torch.randn(4, 2)
    rec = fxviz.record(gm, x)
    assert rec["scale"].op == "get_attr"
    assert rec["scale"].value is gm.scale
    assert rec["chunk"].op == "call_method"
    assert [s.path for s in rec["chunk"].outputs] == ["[0]", "[1]"]
    assert [s.path for s in rec["output"].outputs] == ["['sum']", "['parts'][0]", "['parts'][1]"]
    expected = gm(x)
    assert torch.equal(rec.output["sum"], expected["sum"])
    assert all(
        torch.equal(a, b) for a, b in zip(rec.output["parts"], expected["parts"], strict=False)
    )
    assert rec.output["bias"] is None


def test_getitem_on_tuple_outputs():
    def f(x):
        values, indices = torch.topk(x, 2)
        return values * 2, indices

    x = torch.tensor([1.0, 5.0, 3.0])
    rec = fxviz.record(f, x)
    assert rec["topk"].shape == (2,)
    assert len(rec["topk"].outputs) == 2
    assert rec["getitem_1"].dtype == torch.int64
    assert rec["getitem_1"].target == "operator.getitem"
    assert torch.equal(rec.output[1], torch.tensor([1, 2]))


def test_dropout_in_train_mode_matches_forward_under_the_same_seed():
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 4)).train()
    gm = fxviz.trace(model)
    x = torch.randn(8, 16)
    torch.manual_seed(123)
    expected = gm(x)
    torch.manual_seed(123)
    rec = fxviz.record(gm, x)
    assert torch.equal(rec.output, expected)
    assert rec["_1"].outputs[0].zeros > 0


def test_table_has_one_row_a_node_and_documented_columns(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    table = rec.table()
    assert list(table.index) == list(rec)
    for column in ("op", "target", "module", "shape", "dtype", "min", "std", "nan", "time_s"):
        assert column in table.columns
    assert table.loc["linear2", "shape"] == (5, 4)
    assert table.loc["linear2", "dtype"] == "float32"
    assert table.loc["clamp", "zeros"] == rec["clamp"].outputs[0].zeros


def test_source_module_and_input_names_follow_edits_between_runs(two_layer_net, x20):
    """What a record says of its node (kept per graph across runs) follows the node: a
    stack trace or module stack set, or an input renamed, after an earlier recording."""
    gm = fxviz.trace(two_layer_net)
    first = fxviz.record(gm, x20)["linear2"]
    assert (first.source, first.module, first.inputs) == ("", "linear2", ("clamp",))
    node = next(n for n in gm.graph.nodes if n.name == "linear2")
    node.meta["stack_trace"] = '  File "model.py", line 7, in forward\n    y = self.linear2(h)'
    traced = fxviz.record(gm, x20)["linear2"]
    assert traced.source == 'File "model.py", line 7, in forward: y = self.linear2(h)'
    node.meta["nn_module_stack"] = {"outer": ("outer", nn.Module)}
    assert fxviz.record(gm, x20)["linear2"].module == "outer"
    node.args[0].name = "hidden"
    assert fxviz.record(gm, x20)["linear2"].inputs == ("hidden",)


def test_to_dict_is_json_and_repr_html_escapes_names():
    def f(x):
        return torch.sigmoid(x) / 0

    rec = fxviz.record(f, torch.ones(2))
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["complete"]
    assert [n["name"] for n in data["nodes"]] == list(rec)
    assert data["nodes"][2]["outputs"][0]["posinf"] == 2
    assert data["nodes"][2]["outputs"][0]["max"] is None
    assert "<table" in rec._repr_html_()
    assert "first NaN/Inf at &#x27;truediv&#x27;" in rec._repr_html_()

    html = fxviz.record(
        make_hostile_graph("<script>alert(1)</script>"), torch.ones(1)
    )._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_wrong_number_of_inputs_is_a_clear_input_error(two_layer_net, x20):
    with pytest.raises(fxviz.InputError, match=r"takes 1 input\(s\) \(x\) but 2 were given"):
        fxviz.record(two_layer_net, x20, x20)
    with pytest.raises(TypeError):
        fxviz.record(two_layer_net)


def test_shape_mismatch_names_node_target_and_shapes(two_layer_net):
    bad = torch.randn(5, 19)
    with pytest.raises(fxviz.NodeError) as info:
        fxviz.record(two_layer_net, bad)
    err = info.value
    message = str(err)
    assert "node 'linear1'" in message
    assert "Linear(in_features=20" in message
    assert "x: float32[5, 19]" in message
    assert "5x19 and 20x8" in message
    assert err.node == "linear1"
    assert isinstance(err, RuntimeError)
    assert isinstance(err.__cause__, RuntimeError)
    partial = err.recording
    assert list(partial) == ["x", "linear1"]
    assert not partial.complete
    assert partial["linear1"].error is err.__cause__
    assert partial["x"].value is bad


def test_error_mid_graph_keeps_everything_before_it():
    def f(x):
        a = x.relu()
        b = a.view(3, 3)  # 4 elements cannot be viewed as 3x3
        return b + 1

    with pytest.raises(fxviz.NodeError, match="node 'view'") as info:
        fxviz.record(f, torch.randn(4))
    assert [r.name for r in info.value.recording.values()] == ["x", "relu", "view"]
    assert info.value.recording["relu"].kept


@torch.fx.wrap
def _interrupt_here(x):
    raise KeyboardInterrupt


def test_ctrl_c_returns_the_partial_recording_on_the_exception():
    def f(x):
        y = x * 2
        z = _interrupt_here(y)
        return z + 1

    with pytest.raises(fxviz.RecordingInterrupted) as info:
        fxviz.record(f, torch.ones(2))
    assert isinstance(info.value, KeyboardInterrupt)
    assert list(info.value.recording) == ["x", "mul"]


def test_keep_stats_drops_values_but_keeps_statistics(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20, keep="stats")
    assert not any(r.kept for r in rec.values())
    assert rec["linear1"].value is None
    assert rec["linear1"].outputs[0].max is not None
    assert torch.equal(rec.output, two_layer_net(x20))


def test_byte_budget_keeps_early_values_and_warns_once():
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)])
    x = torch.randn(32, 64)  # each activation: 32*64*4 = 8 KiB
    with pytest.warns(fxviz.FxvizWarning, match="kept the values of") as caught:
        rec = fxviz.record(model, x, keep=3 * 8192)
    assert len(caught) == 1
    assert "keep=" in str(caught[0].message)
    kept = [r.name for r in rec.values() if r.kept]
    assert kept == ["input_1", "_0", "_1", "_2"]  # placeholders do not count
    assert rec["_4"].value is None
    assert rec["_4"].outputs[0].std is not None
    assert torch.equal(rec.output, model(x))


def test_keep_is_validated():
    with pytest.raises(ValueError, match="keep must be"):
        fxviz.record(lambda x: x, torch.ones(1), keep="some")


def test_repr_is_cheap_and_informative(two_layer_net, x20):
    text = repr(fxviz.record(two_layer_net, x20))
    assert text.startswith("<fxviz.Recording of TwoLayerNet: 5 nodes, complete")


def test_graph_built_by_hand_with_setitem():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(operator.mul, (x, 2))
    graph.call_function(operator.setitem, (y, 0, -1.0))
    graph.output(y)
    gm = torch.fx.GraphModule(nn.Module(), graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = fxviz.record(gm, torch.ones(3))
    assert torch.equal(rec.output, torch.tensor([-1.0, 2.0, 2.0]))
    assert torch.equal(rec["mul"].value, torch.tensor([2.0, 2.0, 2.0]))
    assert rec["setitem"].mutates == ("mul",)


def test_a_node_whose_target_was_replaced_reads_the_new_target():
    """The target text of each node is remembered on the graph between runs; an edit that
    swaps the target is seen."""
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    assert fxviz.record(gm, torch.ones(2))["relu"].target == "torch.relu"
    (node,) = [n for n in gm.graph.nodes if n.name == "relu"]
    node.target = torch.sigmoid
    gm.recompile()
    rec = fxviz.record(gm, torch.ones(2))
    assert rec["relu"].target == "torch.sigmoid"
    assert rec["relu"].outputs[0].max == pytest.approx(torch.sigmoid(torch.tensor(1.0)).item())


class FailsInsideRegions(nn.Module):
    """Dynamo keeps each region as an enter node and an exit node; the run fails between."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("square", torch.eye(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.lin(x)
            with torch.inference_mode():  # fails once the buffer is no longer PD
                y = y + torch.linalg.cholesky(self.square.float()).sum()
        return y.float()


@pytest.mark.parametrize("engine", [None, torch.fx.Interpreter])
def test_a_run_failing_inside_a_dynamo_region_leaves_the_callers_modes(engine):
    model, x = FailsInsideRegions(), torch.randn(2, 4)
    gm = fxviz.trace(model, x, method="dynamo")
    with torch.no_grad():
        model.square.neg_()
    with pytest.raises(fxviz.NodeError, match="cholesky") as failed:
        fxviz.record(gm, x, interpreter=engine)
    # the error (and the region's entries in its frames) is kept, as a notebook keeps it
    assert failed.value.recording is not None
    assert not torch.is_inference_mode_enabled()
    assert not torch.is_autocast_enabled("cpu")
    assert nn.Linear(4, 4)(torch.randn(1, 4)).dtype == torch.float32
    assert (torch.ones(1, requires_grad=True) * 2).requires_grad
