"""fxviz.watch on our own loops: it stops at the right step, before the update."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz._training import Incident
from tests.training.models import batches, setup


def _state(model, opt):
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    state = {
        (i, k): v.clone()
        for i, s in opt.state_dict()["state"].items()
        for k, v in s.items()
        if isinstance(v, torch.Tensor)
    }
    return params, state


def _bitwise_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype
        and torch.equal(a[k].view(-1).view(torch.uint8), b[k].view(-1).view(torch.uint8))
        for k in a
    )


@pytest.mark.parametrize(("kind", "what"), [("log", "loss"), ("norm", "gradient")])
def test_raises_at_the_bad_step_and_the_update_is_not_applied(kind, what):
    model, opt, train_step, _ = setup(kind)
    step = fxviz.watch(train_step, model, opt)
    data = batches(8, 5, kind)
    for b in data[:5]:
        loss = step(b)
        assert torch.isfinite(loss)
    params, state = _state(model, opt)
    with pytest.raises(fxviz.NonFiniteStep) as caught:
        step(data[5])
    incident = caught.value.incident
    assert isinstance(caught.value, fxviz.FxvizError)
    assert isinstance(incident, Incident)
    assert step.incident is incident
    assert (incident.step, incident.what) == (5, what)
    assert "fc1.weight" in incident.names  # a NaN gradient reached the first layer
    assert f"step 5: non-finite {what}" in str(caught.value)
    after_params, after_state = _state(model, opt)
    assert _bitwise_equal(params, after_params)  # the update was not applied...
    assert _bitwise_equal(state, after_state)  # ...nor did AdamW's moments move
    assert all(p.grad is not None for p in model.parameters())  # the evidence is kept


def test_a_run_without_nan_is_unchanged_by_the_watch():
    plain_model, _plain_opt, plain_step, _ = setup("log")
    model, opt, train_step, _ = setup("log")
    step = fxviz.watch(train_step, model, opt)
    for b in batches(6, None):
        torch.manual_seed(1)
        expected = plain_step(b)
        torch.manual_seed(1)
        got = step(b)
        assert torch.equal(expected, got)
    assert _bitwise_equal(dict(plain_model.named_parameters()), dict(model.named_parameters()))
    assert step.incident is None
    assert step.calls == 6


def test_skip_warns_and_goes_on_without_the_update():
    model, opt, train_step, _ = setup("log")
    step = fxviz.watch(train_step, model, opt, on_nonfinite="skip")
    data = batches(6, 2)
    for b in data[:2]:
        step(b)
    params, _ = _state(model, opt)
    with pytest.warns(fxviz.FxvizWarning, match="step 2: non-finite loss"):
        step(data[2])
    assert _bitwise_equal(params, _state(model, opt)[0])
    assert all(p.grad is None for p in model.parameters())  # cleared: nothing accumulates
    for b in data[3:]:
        assert torch.isfinite(step(b))  # training goes on
    assert (step.skipped, step.incident.step) == (1, 2)


def test_a_callback_gets_the_incident():
    model, opt, train_step, _ = setup("norm")
    seen: list[Incident] = []
    step = fxviz.watch(train_step, model, opt, on_nonfinite=seen.append)
    for b in batches(5, 1, "norm"):
        step(b)
    assert [(i.step, i.what) for i in seen] == [(1, "gradient")]


def test_a_parameter_that_overflows_is_restored():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e36)  # finite gradients, infinite update

    def train_step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    step = fxviz.watch(train_step, model, opt)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(fxviz.NonFiniteStep) as caught:
        step(torch.full((4, 3), 1e3))
    assert caught.value.incident.what == "parameter"
    assert caught.value.incident.names == ("weight",)  # the bias's update stays finite
    assert _bitwise_equal(before, {n: p.detach() for n, p in model.named_parameters()})


def test_a_loss_spike_is_an_incident_before_its_update():
    model, opt, train_step, _ = setup("log")
    step = fxviz.watch(train_step, model, opt, spike=50.0, window=20)
    data = batches(16, None)
    for b in data[:12]:
        step(b)
    x, y = data[12]
    params, _ = _state(model, opt)
    with pytest.raises(fxviz.NonFiniteStep) as caught:
        step((x, y + 1e4))  # finite, but ~1e8 times the usual loss
    assert (caught.value.incident.step, caught.value.incident.what) == (12, "loss spike")
    assert _bitwise_equal(params, _state(model, opt)[0])


def test_without_an_optimizer_the_loss_is_checked():
    model, _, _, _ = setup("log")

    def evaluate(batch):
        x, y = batch
        return ((model(x) - y) ** 2).mean()

    step = fxviz.watch(evaluate, model)
    data = batches(4, 3)
    for b in data[:3]:
        step(b)
    with pytest.raises(fxviz.NonFiniteStep, match="step 3: non-finite loss"):
        step(data[3])


def test_bad_options_are_refused():
    model, opt, train_step, _ = setup("log")
    with pytest.raises(fxviz.InputError, match="on_nonfinite='ignore'"):
        fxviz.watch(train_step, model, opt, on_nonfinite="ignore")
    with pytest.raises(fxviz.InputError, match=r"torch\.optim\.Optimizer"):
        fxviz.watch(train_step, model, "adam")


def test_the_error_pickles_without_the_incident():
    import pickle

    e = fxviz.NonFiniteStep("step 1: non-finite loss", incident=object())
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == "step 1: non-finite loss"
    assert again.incident is None


def test_the_facade_names_them():
    assert fxviz.watch.__module__ == "fxviz._training._watch"
    assert issubclass(fxviz.NonFiniteStep, fxviz.FxvizError)
    assert {"watch", "NonFiniteStep"} <= set(fxviz.__all__)
