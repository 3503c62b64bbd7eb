"""Saved files keep tensor identity: one tensor object kept at two places loads as one
object at both (a Hugging Face output holding its last hidden state twice), while two
views of one storage load as two tensors over one block."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import fxviz
from fxviz._capture import tensors_in
from tests.test_save import _join, _split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Loaded in a fresh process, as the conformance matrix does: nothing of the saving
# process (no tensor, no cache) can make the identities hold.
_LOAD = """
import sys, json, torch, fxviz, transformers
from fxviz._capture import tensors_in
clip = fxviz.load(sys.argv[1]).output
views = fxviz.load(sys.argv[2])
y, again, t = views.output
ptr = lambda v: v.untyped_storage().data_ptr()
print(json.dumps({
    "type": type(clip).__name__,
    "twice_is_one": clip.last_hidden_state is clip.hidden_states[-1],
    "distinct": len(tensors_in(clip)),
    "values": [v.tolist() for v in tensors_in(clip)],
    "repeat_is_one": y is again,
    "view_is_other": t is not y,
    "view_shares_storage": ptr(t) == ptr(y),
    "across_records": views["mul"].value is y,
}))
"""


def _clip() -> tuple[torch.nn.Module, dict[str, object]]:
    """A small CLIP vision tower: with hidden states, its output's last_hidden_state IS
    hidden_states[-1] (as Llava's image features)."""
    import transformers as tf

    cfg = tf.CLIPVisionConfig(
        image_size=16, patch_size=4, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return tf.CLIPVisionModel(cfg).eval(), {
        "pixel_values": torch.randn(1, 3, 16, 16),
        "output_hidden_states": True,
    }


def _views(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y = x * 2
    return y, y, y.t()


def test_a_tensor_kept_twice_loads_as_one_object_in_a_fresh_process(tmp_path):
    model, kwargs = _clip()
    with torch.no_grad():
        clip = fxviz.record(model, progress=False, **kwargs)
    views = fxviz.record(_views, torch.randn(3, 4))
    out = clip.output
    assert out.last_hidden_state is out.hidden_states[-1]  # the case is in the data
    assert views.output[0] is views.output[1] is views["mul"].value
    clip_path, views_path = clip.save(tmp_path / "clip.fxrec"), views.save(tmp_path / "v.fxrec")
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(clip_path), str(views_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["type"] == "BaseModelOutputWithPooling"
    assert got["twice_is_one"]
    assert got["distinct"] == len(tensors_in(out))
    assert got["values"] == [t.tolist() for t in tensors_in(out)]
    assert got["repeat_is_one"]
    assert got["view_is_other"]
    assert got["view_shares_storage"]
    assert got["across_records"]  # one numbering a file: the same object in two records


def _leaves(tree):
    if isinstance(tree, dict):
        if tree.get("t") == "tensor":
            yield tree
        for v in tree.values():
            yield from _leaves(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _leaves(v)


def test_files_without_tensor_numbers_still_load(tmp_path):
    rec = fxviz.record(_views, torch.randn(3, 4))
    header, body = _split(rec.save(tmp_path / "new.fxrec"))
    records = json.loads(header["__metadata__"]["fxviz"])
    leaves = list(_leaves(records))
    assert leaves
    assert all("ref" in leaf for leaf in leaves)
    for leaf in leaves:  # as fxviz wrote files before it numbered tensors
        del leaf["ref"]
    header["__metadata__"]["fxviz"] = json.dumps(records)
    _join(old := tmp_path / "old.fxrec", header, body)
    y, again, t = fxviz.load(old).output
    assert torch.equal(y, rec.output[0])
    assert torch.equal(t, rec.output[2])
    assert y is not again  # such a file does not say they were one object
    assert torch.equal(y, again)


def test_one_tensor_number_described_two_ways_is_refused(tmp_path):
    rec = fxviz.record(_views, torch.randn(3, 4))
    header, body = _split(rec.save(tmp_path / "good.fxrec"))
    records = json.loads(header["__metadata__"]["fxviz"])
    first, second = records["records"][-1]["value"]["items"][:2]
    assert first["ref"] == second["ref"]
    second["offset"] = 1
    header["__metadata__"]["fxviz"] = json.dumps(records)
    _join(bad := tmp_path / "bad.fxrec", header, body)
    with pytest.raises(fxviz.RecordingFileError, match="described two different ways"):
        fxviz.load(bad).output
