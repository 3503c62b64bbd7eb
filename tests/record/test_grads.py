"""record(..., backward=...): gradients per node, exactly as autograd computes them."""

from __future__ import annotations

import copy
import dataclasses
import math
import re

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

import fxviz
from fxviz import overlays
from fxviz._record._grads import summarize_gradient
from fxviz._record._summary import TensorSummary, iter_tensors, summarize
from tests.grad_models import cnn_case, gpt_case


def autograd_reference(gm, inputs, loss_fn):
    """Every node's output and every parameter's gradient by torch.autograd.grad, on an
    independent forward run through torch.fx.Interpreter."""
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    out = interp.run(*inputs)
    nodes = [  # (node name, path in its output), tensor
        ((n.name, path), t)
        for n, v in interp.env.items()
        for path, t in iter_tensors(v)
        if t.requires_grad
    ]
    params = [(name, p) for name, p in gm.named_parameters() if p.requires_grad]
    tensors = [t for _, t in nodes] + [p for _, p in params]
    grads = torch.autograd.grad(loss_fn(out), tensors, allow_unused=True)
    names = [name for name, _ in nodes] + [name for name, _ in params]
    return (
        out,
        dict(zip(names[: len(nodes)], grads[: len(nodes)], strict=True)),
        dict(zip(names[len(nodes) :], grads[len(nodes) :], strict=True)),
    )


def assert_gradient_summary(summary, grad, path=""):
    """As summarize's, but zeros are not counted for gradients, and mean and std are
    taken in float32 where summarize goes to float64."""
    expected = summarize(grad)[0]
    exact = ("shape", "dtype", "stride", "numel", "min", "max", "absmax", "nan", "posinf")
    for field in exact:
        assert getattr(summary, field) == getattr(expected, field), field
    assert summary.path == path
    assert summary.zeros is None
    assert summary.mean == pytest.approx(expected.mean, rel=1e-5, abs=1e-9 * expected.absmax)
    assert summary.std == pytest.approx(expected.std, rel=1e-4, abs=1e-9 * expected.absmax)


@pytest.mark.parametrize("case", [gpt_case, cnn_case], ids=["gpt", "cnn-batchnorm"])
def test_recorded_gradients_equal_autograd_exactly(case):
    model, x, target = case()

    def loss_fn(out):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))

    gm = torch.fx.symbolic_trace(model)
    reference_gm = copy.deepcopy(gm)  # BatchNorm's running stats move on each run
    rec = fxviz.record(gm, x, backward=loss_fn)
    out, node_grads, param_grads = autograd_reference(reference_gm, (x,), loss_fn)

    assert torch.equal(rec.output, out)
    with_grads = [key for key, g in node_grads.items() if g is not None]
    assert len(with_grads) > 10
    recorded = {(name, g.path): g for name in rec for g in rec[name].grads}
    assert set(recorded) == set(with_grads)
    for key in with_grads:
        expected = node_grads[key]
        assert torch.equal(recorded[key].value, expected), key
        assert_gradient_summary(recorded[key].summary, expected, key[1])
        if key[1] == "":
            assert torch.equal(rec[key[0]].grad_value, expected)
    for name, expected in param_grads.items():
        assert torch.equal(rec.gradients.parameters[name].value, expected), name
        assert_gradient_summary(rec.parameter_grad(name), expected)
    assert all(p.grad is None for p in model.parameters())  # .grad left alone
    assert all(not p._backward_hooks for p in model.parameters())  # hooks taken off


def test_gradients_arrive_in_backward_order_with_timing():
    model, x, target = cnn_case()
    rec = fxviz.record(model, x, backward=lambda out: F.cross_entropy(out, target))
    order = [g.name for g in rec.gradients.order if g.kind == "node"]
    forward_index = {name: rec[name].index for name in order}
    # the loss's own input comes first, the stem last: reverse of the forward order
    assert order[:2] == ["fc", "output"]  # the same tensor: both hooks, in forward order
    assert forward_index[order[-1]] < forward_index["fc"] < forward_index[order[1]] + 1
    assert [g.order for g in rec.gradients.order] == list(range(len(rec.gradients)))
    assert all(g.time_s >= 0 for g in rec.gradients.order)
    assert rec.gradients.time_s >= sum(g.time_s for g in rec.gradients.order) * 0.5
    assert rec["x"].grad is None  # the input does not require grad


def test_the_first_nan_gradient_is_named_with_its_forward_node():
    class Distance(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, a, b):
            d = self.proj(a) - self.proj(b)
            return torch.sqrt((d * d).sum(-1)).mean()  # sqrt'(0) = inf: 0 * inf = NaN

    x = torch.randn(3, 4)
    rec = fxviz.record(Distance(), x, x.clone(), backward=True)
    assert rec.first_nonfinite() is None  # the forward pass is finite
    bad = rec.first_nonfinite(grad=True)
    # sqrt's backward at 0 gives its input, the sum, an infinite gradient ...
    assert bad.name == "sum_1"
    assert bad.target == "sum"
    assert bad.grad.posinf == 3
    first = rec.gradients.first_nonfinite()
    assert first.name == "sum_1"
    assert first.order == min(g.order for g in rec.gradients.order if g.summary.nonfinite_count)
    assert first.order > rec.gradients.of("sqrt")[0].order  # sqrt's own was finite
    # ... then mul's backward turns inf * 0 into NaN: d's gradient is all NaN
    assert rec["mul"].grad.posinf == 12
    assert rec["sub"].grad.nan == 12
    assert "first NaN/Inf gradient at 'sum_1'" in rec.summary()
    # what autograd itself computes for the same loss
    a = x.clone().requires_grad_(True)
    model = Distance()
    model.load_state_dict(rec.graph_module.state_dict())
    (g,) = torch.autograd.grad(model(a, x.clone()), [a])
    assert g.isnan().all()


def test_table_gains_gradient_columns_and_ratio():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(5, 4)
    rec = fxviz.record(model, x, backward=True)
    table = rec.table()
    for column in ("grad_order", "grad_norm", "grad_absmax", "grad_nan", "grad_ratio"):
        assert column in table.columns
    expected = torch.linalg.vector_norm(rec["_1"].grad_value).item()
    assert table.loc["_1", "grad_norm"] == pytest.approx(expected, rel=1e-5)
    ratio = expected / torch.linalg.vector_norm(rec["_1"].value).item()
    assert table.loc["_1", "grad_ratio"] == pytest.approx(ratio, rel=1e-5)
    assert math.isnan(table.loc["input_1", "grad_norm"])
    assert "grad_norm" not in fxviz.record(model, x).table().columns


def test_backward_with_gradient_tensors_and_budget():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(2, 4)
    seed = torch.full((2, 3), 2.0)
    rec = fxviz.record(model, x, backward=seed)
    y = model(x)
    (expected,) = torch.autograd.grad(y, [model[0].weight], seed)
    assert torch.equal(rec.gradients.parameters["0.weight"].value, expected)
    # the gradients given are the output's: kept as they were, whatever the caller does
    seed.mul_(10)
    assert torch.equal(rec["output"].grad_value, torch.full((2, 3), 2.0))
    assert rec["output"].grad.max == 2.0
    stats_only = fxviz.record(model, x, backward=True, keep="stats")
    assert stats_only["_0"].grad is not None
    assert stats_only["_0"].grad_value is None
    with pytest.warns(fxviz.FxvizWarning, match="budget"):
        tiny = fxviz.record(model, x, backward=True, keep=0)
    assert all(g.value is None for g in tiny.gradients.order)


def test_bad_backward_arguments_say_what_to_do():
    model = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with pytest.raises(fxviz.InputError, match="scalar loss"):
        fxviz.record(model, x, backward=lambda out: out)
    with pytest.raises(fxviz.InputError, match=r"shape \[2, 2\]"):
        fxviz.record(model, x, backward=torch.ones(2, 2))
    with pytest.raises(fxviz.InputError, match="nothing in the output requires grad"):
        fxviz.record(model.requires_grad_(False), x, backward=True)
    assert all(not p._backward_hooks for p in model.parameters())


def test_a_failing_forward_takes_the_hooks_off():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(5, 2))
    with pytest.raises(fxviz.NodeError):
        fxviz.record(model, torch.randn(2, 4), backward=True)
    weights = list(model.parameters())
    x = torch.randn(2, 4, requires_grad=True)
    model[1] = nn.Linear(3, 2)
    model(x).sum().backward()  # no stale hook fires (it would raise on a dead recorder)
    assert weights[0].grad is not None


def test_gradient_overlays_mark_vanishing_exploding_and_nan_gradients():
    class Deep(nn.Module):
        def __init__(self):
            super().__init__()
            self.big = nn.Linear(4, 4)
            self.other = nn.Linear(4, 4)

        def forward(self, x):
            # the gradient reaching big is 1e-5 (vanishing), the one reaching mul is 10
            # on a tiny output (exploding); sqrt'(0) = inf makes the last one NaN
            return (self.big(x) * 1e-6).sum() * 10 + torch.sqrt(self.other(x) * 0).sum()

    rec = fxviz.record(Deep(), torch.randn(3, 4), backward=True)
    dot = fxviz.to_dot(
        rec,
        overlay=[
            overlays.grad_norm_heat(rec),
            overlays.grad_ratio(),
            overlays.highlight_nonfinite_grads(),
        ],
    ).source
    table = rec.table()
    vanishing = [n for n in rec if (table.loc[n, "grad_ratio"] or 1) < 1e-4]
    exploding = [n for n in rec if (table.loc[n, "grad_ratio"] or 0) > 1e2]
    assert vanishing
    assert exploding
    assert "vanishing" in dot
    assert "exploding" in dot
    assert "∇ ⚠ " in dot
    assert rec.first_nonfinite(grad=True) is not None
    assert "gradient norm: " in dot


def test_backward_with_a_progress_bar_and_a_transformer():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    rec = fxviz.record(model, torch.randn(2, 4), backward=True, progress=True)
    assert rec["_0"].grad.shape == (2, 3)
    with pytest.raises(fxviz.InputError, match="Transformer runs symbolically"):
        fxviz.record(model, interpreter=torch.fx.Transformer, backward=True)


def test_gradient_statistics_of_a_constant_plus_a_little():
    # the sum of squares cancels: the spread is measured around the mean
    from fxviz._record._grads import summarize_gradient

    g = 1000.0 + torch.randn(10_000) * 1e-3
    s = summarize_gradient(g)
    std, mean = torch.std_mean(g.double())
    assert s.std == pytest.approx(std.item(), rel=1e-3)
    assert s.mean == pytest.approx(mean.item(), rel=1e-7)
    bad = summarize_gradient(torch.tensor([1.0, float("nan"), float("inf"), 0.0]))
    assert (bad.nan, bad.posinf, bad.zeros) == (1, 1, None)
    assert (bad.min, bad.max) == (0.0, 1.0)


def test_gradient_statistics_of_exploding_gradients():
    from fxviz._record._grads import summarize_gradient

    g = torch.randn(10_000) * 1e25 + 3e25  # the float32 sum of squares overflows
    s = summarize_gradient(g)
    std, mean = torch.std_mean(g.double())
    assert s.std == pytest.approx(std.item(), rel=1e-4)
    assert s.mean == pytest.approx(mean.item(), rel=1e-4)
    assert s.nonfinite_count == 0


def test_lazy_gradient_statistics_equal_eager_ones():
    # kept gradients are summarised on first read, dropped ones (keep="stats") at once
    model, x, target = gpt_case()

    def loss_fn(out):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))

    gm = torch.fx.symbolic_trace(model)
    lazy = fxviz.record(gm, x, backward=loss_fn)
    eager = fxviz.record(gm, x, backward=loss_fn, keep="stats")
    pending = [g for g in lazy.gradients.order if not isinstance(g._summary, TensorSummary)]
    assert len(pending) == len(lazy.gradients)  # nothing summarised before it was read
    assert all(isinstance(g._summary, TensorSummary) for g in eager.gradients.order)
    assert len(lazy.gradients) == len(eager.gradients) > 20
    for a, b in zip(lazy.gradients.order, eager.gradients.order, strict=True):
        assert (a.name, a.path, a.order) == (b.name, b.path, b.order)
        assert a.value is not None
        assert b.value is None
        assert a.summary == b.summary, a.name
        assert a.summary == dataclasses.replace(summarize_gradient(a.value), path=a.path)
    assert lazy.first_nonfinite(grad=True) is None


@torch.fx.wrap
def _shift(x):
    return x + SHIFT  # a leaf outside the graph: record runs torch.autograd.backward


SHIFT = torch.randn(2, 3, requires_grad=True)


def test_gradients_outlive_a_later_backward_into_a_leaf_outside_the_graph():
    def f(x):
        return _shift(x) * 2.0

    SHIFT.grad = None
    rec = fxviz.record(f, torch.randn(2, 3), backward=True)
    assert torch.equal(rec["_shift"].grad_value, torch.full((2, 3), 2.0))
    # the gradient recorded for _shift reaches SHIFT's AccumulateGrad as it is: were
    # SHIFT.grad that very tensor (not a copy), this backward, adding into SHIFT.grad in
    # place, would change the recorded gradient and its statistics read afterwards
    (_shift(torch.randn(2, 3)) * 5.0).sum().backward()
    assert torch.equal(SHIFT.grad, torch.full((2, 3), 7.0))
    assert torch.equal(rec["_shift"].grad_value, torch.full((2, 3), 2.0))
    assert (rec["_shift"].grad.min, rec["_shift"].grad.max) == (2.0, 2.0)
    SHIFT.grad = None


class _Halves(nn.Module):
    """A VAE encoder's head: ``torch.chunk`` into mean and log-variance, the loss on the
    mean only (as AutoencoderKL decodes the mode of its posterior)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        mean, logvar = torch.chunk(self.lin(x), 2, dim=1)
        return mean * 2, torch.exp(0.5 * logvar)


def test_an_output_of_a_multi_output_op_the_loss_does_not_use_gets_no_gradient():
    model = _Halves()
    x = torch.randn(2, 4)
    rec = fxviz.record(model, x, backward=lambda out: out[0].sum())
    want = torch.autograd.grad(model(x)[0].sum(), [model.lin.weight, model.lin.bias])
    got = rec.gradients.parameters
    assert torch.equal(got["lin.weight"].value, want[0])
    assert torch.equal(got["lin.bias"].value, want[1])
    assert rec["getitem"].grads  # the mean: its gradient arrived
    assert not rec["getitem_1"].grads  # the log-variance: none did, and none is made up
    assert not rec["exp"].grads


def test_autoencoder_kl_records_its_gradients():
    from tests.conformance.cells import Subject, _backward

    _backward(Subject("vae", "real"))  # gradients equal torch.autograd.grad's, bitwise


def test_a_backward_pass_autograd_refuses_names_the_nodes_that_wrote_in_place():
    # RWKV (transformers) writes its recurrent state in place, row by row, after autograd
    # saved it: its backward pass fails in eager PyTorch too. It escaped as a bare
    # RuntimeError; it is a NodeError naming the writers, with the forward recording.
    from tests.hf_models import rwkv

    model, ids = rwkv()
    capture = fxviz.trace(model, input_ids=ids, method="real")
    with pytest.raises(RuntimeError) as refused:
        fxviz.record(capture, input_ids=ids, backward=lambda out: out.logits.sum())
    error = refused.value
    assert isinstance(error, fxviz.NodeError)
    assert re.search(
        r"the backward pass failed: one of the variables needed for gradient computation has "
        r"been modified by an inplace operation.*\n.*FloatTensor \[1, 16\] .*nodes that "
        r"wrote in place into one of that shape: copy_ \(aten\.copy_\.default in "
        r"rwkv\.blocks\.0\.attention\).*use_cache=False",
        str(error),
    )
    assert error.node == "copy_"
    assert error.recording.complete  # the forward pass is kept
    assert error.recording["copy_"].mutates
    # what it says to do works: without the cache, the gradients are eager's
    capture = fxviz.trace(model, input_ids=ids, use_cache=False, method="real")
    rec = fxviz.record(capture, input_ids=ids, use_cache=False, backward=lambda o: o.logits.sum())
    want = torch.autograd.grad(
        model(input_ids=ids, use_cache=False).logits.sum(), [model.head.weight]
    )[0]
    assert torch.equal(rec.gradients.parameters["head.weight"].value, want)


class _Result:
    """A model's output that is no container: its tensors are attributes."""

    def __init__(self, loss: torch.Tensor, logits: torch.Tensor) -> None:
        self.loss, self.logits = loss, logits


class _ObjectOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> _Result:
        y = self.lin(x)
        return _Result(y.pow(2).mean(), y)


@pytest.mark.parametrize("method", ["auto", "export", "dynamo"])
def test_backward_true_reaches_the_tensors_an_output_object_holds(method):
    """backward=True on an output that holds its tensors in attributes: every one of them
    (before: "nothing in the output requires grad", of a model with parameters)."""
    torch.manual_seed(0)
    model, x = _ObjectOut(), torch.randn(2, 3)
    rec = fxviz.record(model, x, method=method, backward=True)
    out = model(x)
    expected = torch.autograd.grad(out.loss + out.logits.sum(), list(model.parameters()))
    got = [rec.gradients.parameters[name].value for name in ("lin.weight", "lin.bias")]
    assert all(torch.allclose(g, e) for g, e in zip(got, expected, strict=True))
    assert all(p.grad is None for p in model.parameters())
