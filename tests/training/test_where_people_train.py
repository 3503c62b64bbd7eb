"""The watch where people train: torch.compile, AMP's GradScaler, gradient accumulation."""

from __future__ import annotations

import torch

import fxviz
from tests.training.models import LogNet, NormNet, batches, run_until_incident


def test_a_compiled_model_is_watched_and_its_eager_module_replayed():
    torch.manual_seed(0)
    model = LogNet()
    compiled = torch.compile(model, backend="aot_eager")  # dynamo + AOTAutograd, no C compiler
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def train_step(batch):
        x, y = batch
        opt.zero_grad()
        loss = ((compiled(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = fxviz.watch(train_step, compiled, opt)
    data = batches(6, 3)
    for b in data[:3]:
        step(b)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    incident = run_until_incident(step, data[3:])
    assert (incident.step, incident.what) == (3, "loss")
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
    assert "fc1.weight" in incident.snapshot.params  # named as in the eager module
    rec = incident.replay()
    assert rec.first_nonfinite().name == "log"
    assert "forward" in compiled.__dict__  # its compiled forward is back in place
    assert torch.isfinite(step(data[4]))  # and it still trains


def test_gradscaler_skips_are_not_incidents_but_a_nan_loss_is():
    torch.manual_seed(0)
    model = LogNet()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # overflows at first

    def train_step(batch):
        x, y = batch
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        loss = ((out.float() - y) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    step = fxviz.watch(train_step, model, opt)
    data = batches(9, 6)
    for b in data[:6]:
        step(b)  # the scaler's own inf-skips raise nothing
    assert scaler.get_scale() < 2.0**127  # it did skip (and back off)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    incident = run_until_incident(step, data[6:])
    assert (incident.step, incident.what) == (6, "loss")
    assert all(torch.equal(params[n], p) for n, p in model.named_parameters())
    assert incident.replay().first_nonfinite().name == "log"


def test_gradient_accumulation_replays_the_micro_batch_that_went_bad():
    torch.manual_seed(0)
    model = NormNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    calls = [0]

    def micro_step(batch):  # two micro-batches an update
        x, y = batch
        loss = ((model(x) - y) ** 2).mean() / 2
        loss.backward()
        calls[0] += 1
        if calls[0] % 2 == 0:
            opt.step()
            opt.zero_grad()
        return loss

    step = fxviz.watch(micro_step, model, opt)
    data = batches(8, 4, "norm")  # the zero-norm batch is the first of a pair
    for b in data[:4]:
        step(b)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    incident = run_until_incident(step, data[4:])
    assert (incident.step, incident.what) == (5, "gradient")  # seen when the update comes
    assert [c.index for c in incident.calls] == [4, 5]
    assert all(torch.equal(params[n], p) for n, p in model.named_parameters())
    rec = incident.replay()
    assert rec.first_nonfinite(grad=True).name == "sum_1"
    assert torch.equal(rec["x"].value, data[4][0])  # the first micro-batch, not the last
