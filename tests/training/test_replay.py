"""incident.replay(): the exact step again, recorded node by node, here and in a new process."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import fxviz
from tests.training.models import batches, run_until_incident, setup

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _incident(kind: str, bad: int = 4):
    model, opt, train_step, outputs = setup(kind)
    step = fxviz.watch(train_step, model, opt)
    return run_until_incident(step, batches(bad + 3, bad, kind)), model, opt, outputs


def _bits(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def test_replay_is_the_original_step_bit_for_bit_and_names_the_forward_node():
    incident, model, _, outputs = _incident("log")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rec = incident.replay()
    assert _bits(rec.output) == _bits(outputs[-1])  # same dropout masks, same NaNs
    assert rec["drop"].value.eq(0).any()  # dropout was on, and replayed
    bad = rec.first_nonfinite()
    assert bad.name == "log"
    assert rec["add"].value.lt(0).any()  # ... of a negative number
    assert rec.first_nonfinite(grad=True) is not None
    assert set(rec.updates) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())  # untouched


def test_replay_names_the_backward_node_when_the_forward_is_finite():
    incident, _, _, outputs = _incident("norm")
    assert incident.what == "gradient"
    rec = incident.replay()
    assert _bits(rec.output) == _bits(outputs[-1])
    assert rec.first_nonfinite() is None  # the forward pass is finite everywhere
    bad = rec.first_nonfinite(grad=True)
    assert bad.name == "sum_1"  # the sum of squares under the square root: 0
    assert rec["sqrt"].inputs == ("sum_1",)
    assert rec["sum_1"].value.item() == 0.0
    assert torch.isinf(rec["sum_1"].grad_value).all()
    assert not torch.isfinite(rec.updates["fc1.weight"]).all()  # what AdamW would have done


@pytest.mark.slow  # a fresh interpreter (two): imports torch
def test_a_saved_incident_replays_in_a_fresh_process(tmp_path):
    incident, _, _, outputs = _incident("norm")
    rec = incident.replay()
    path = incident.save(tmp_path / "step.fxinc")
    loaded = fxviz.load(path)
    assert (loaded.step, loaded.what, loaded.names) == (
        incident.step,
        incident.what,
        incident.names,
    )
    script = f"""
import json, hashlib, torch, fxviz
from tests.training.models import NormNet
torch.manual_seed(123)  # other weights: the file's are restored into the model
model = NormNet()
incident = fxviz.load({str(path)!r})
rec = incident.replay(model)
bits = hashlib.sha256(rec.output.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
print(json.dumps({{
    "step": incident.step, "bits": bits,
    "forward": None if rec.first_nonfinite() is None else rec.first_nonfinite().name,
    "backward": rec.first_nonfinite(grad=True).name,
    "grad": hashlib.sha256(rec["mul"].grad_value.view(torch.uint8).numpy().tobytes()).hexdigest(),
    "update_finite": bool(torch.isfinite(rec.updates["fc2.bias"]).all()),
}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["step"] == 4
    assert got["bits"] == _bits(outputs[-1])
    assert (got["forward"], got["backward"]) == (None, "sum_1")
    assert got["grad"] == _bits(rec["mul"].grad_value)
    assert got["update_finite"] is torch.isfinite(rec.updates["fc2.bias"]).all().item()


def test_an_incident_file_holds_no_pickle_and_a_bad_one_is_refused(tmp_path):
    incident, *_ = _incident("log")
    path = incident.save(tmp_path / "a.fxinc")
    raw = path.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    assert header["__metadata__"]["format"] == "fxviz.incident"
    cut = tmp_path / "cut.fxinc"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(fxviz.RecordingFileError):
        fxviz.load(cut)


def test_debug_opens_the_debugger_at_the_bad_node():
    incident, *_ = _incident("log")
    app = fxviz.debug(incident)
    dbg = app.debugger
    assert "log" in dbg.recording
    assert dbg.recording["log"].nonfinite_count > 0
    assert dbg.current is not None
    assert dbg.current.name == "output"  # stopped just after `log`, the last real node


def test_report_writes_the_step_and_what_went_wrong(tmp_path):
    incident, *_ = _incident("norm")
    path = tmp_path / "incident.html"
    fxviz.report(incident, path)
    page = path.read_text()
    assert "training step 4: non-finite gradient" in page
    assert "fc1.weight" in page


def test_a_loaded_incident_opens_in_the_debugger_on_a_new_model(tmp_path):
    from tests.training.models import LogNet

    incident, *_ = _incident("log")
    loaded = fxviz.load(incident.save(tmp_path / "log.fxinc"))
    torch.manual_seed(7)
    fresh = LogNet()
    dbg = fxviz.debug(loaded, fresh).debugger
    assert dbg.recording["log"].nonfinite_count > 0
    for name, p in fresh.named_parameters():  # the file's weights, not its own
        assert torch.equal(p, incident.snapshot.params[name])


def test_replaying_on_a_model_that_is_not_the_watched_one_needs_the_model_calls():
    from tests.training.models import LogNet

    incident, *_ = _incident("log")
    with pytest.raises(fxviz.InputError, match="replay it on the watched model first"):
        incident.replay(LogNet())
    incident.replay()  # learns the model's calls
    assert incident.replay(LogNet()).first_nonfinite().name == "log"
