"""Memory an op allocated without writing it (``torch.empty_like``) holds whatever was
there: two identical runs of a mixture of experts (whose routing builds ``inv_perm`` with
``empty_like`` then ``inv_perm[perm] = arange``) must not diverge on it, and no
comparison may call such values equal either (issue 23)."""

from __future__ import annotations

import warnings

import pytest
import torch

import fxviz
from tests.conformance.zoo import build


@pytest.fixture(scope="module")
def moe():
    """Qwen3-MoE from transformers (4 experts, 2 a token), captured by Dynamo."""
    model, args, kwargs = build("qwen3_moe")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fxviz.trace(model, *args, method="dynamo", **kwargs), args, kwargs


def _empty(pairs):
    return [p for p in pairs if p.target == "torch.empty_like"]


def test_an_moe_compared_with_itself_does_not_diverge_on_uninitialized_memory(moe):
    gm, args, kwargs = moe
    cmp = fxviz.compare_pass(gm, lambda g: None, *args, **kwargs)
    empty = _empty(cmp.pairs)
    assert len(empty) == 2  # one expert routing a layer
    assert cmp.first_divergence is None
    for p in empty:  # nothing said about them: neither diverged nor measured equal
        assert not p.measured
        assert p.metrics is None
        assert not p.diverged
        assert p.reason == "not measured: uninitialized memory (torch.empty_like)"
    others = [p for p in cmp.pairs if p not in empty]
    assert all(p.measured_on == "values" for p in others)
    assert not cmp.agree  # it did not measure every pair, so it does not say they agree
    assert "2 uninitialized memory (torch.empty_like)" in cmp.summary()


def test_an_moe_diffed_with_itself_does_not_diverge(moe):
    gm, args, kwargs = moe
    with torch.no_grad():
        d = fxviz.diff(gm, gm, *args, **kwargs)
    assert d.first_divergence is None
    assert len(_empty(d.comparison.pairs)) == 2


def test_records_say_which_outputs_are_uninitialized_and_files_keep_it(tmp_path):
    def f(x):
        buf = torch.empty_like(x)
        buf[:] = x * 2  # written after: the write is where the values come from
        return buf + x.new_empty(2).fill_(1).sum()

    rec = fxviz.record(f, torch.ones(2))
    fresh = {r.name for r in rec.values() if r.uninitialized}
    assert fresh == {"empty_like", "new_empty"}
    loaded = fxviz.load(rec.save(tmp_path / "run.fxrec"))
    assert {r.name for r in loaded.values() if r.uninitialized} == fresh
    cmp = fxviz.compare(rec, loaded)
    assert cmp.first_divergence is None
    assert {p.name for p in cmp.unmeasured} == fresh


def _views(x):
    buf = torch.empty_like(x)
    early = buf.t()  # a view of it, taken before anything is written: garbage too
    buf.copy_(x * 2)
    late = buf.t()  # taken after the write: real values
    return early + 0, late


def test_a_view_of_uninitialized_memory_taken_before_the_write_is_not_measured(tmp_path):
    x = torch.randn(3, 3)
    first = fxviz.record(_views, x)
    for other in (fxviz.record(_views, x), fxviz.load(first.save(tmp_path / "run.fxrec"))):
        cmp = fxviz.compare(first, other)
        assert cmp.first_divergence is None
        unmeasured = {p.name: p.reason for p in cmp.unmeasured}
        assert unmeasured == {
            "empty_like": "not measured: uninitialized memory (torch.empty_like)",
            "t": "not measured: uninitialized memory (torch.empty_like)",
        }
    cmp = fxviz.compare(first, fxviz.record(_views, x + 1))  # a real divergence is still found
    assert cmp.first_divergence.name == "x"
    assert {p.name for p in cmp.pairs if p.diverged} >= {"mul", "copy_", "t_1"}


def _halves(k, r):
    buf = k.new_empty(*k.shape[:-1], k.shape[-1] + r.shape[-1])  # DeepSeek-V3's expand_kv
    buf[..., : k.shape[-1]].copy_(k)  # a write into part of it...
    buf[..., k.shape[-1] :].copy_(r)  # ...leaves this view, taken after it, still garbage
    return buf * 1


def test_a_view_taken_after_a_write_into_another_part_is_not_measured():
    k, r = torch.randn(2, 3), torch.randn(2, 2)
    cmp = fxviz.compare(fxviz.record(_halves, k, r), fxviz.record(_halves, k, r))
    assert cmp.first_divergence is None
    assert {p.name for p in cmp.unmeasured} == {"new_empty", "slice_1", "slice_2"}
    assert {p.name for p in cmp.pairs if p.measured} >= {"copy_", "copy__1", "mul"}


def test_deepseek_v3_diffed_with_itself_does_not_diverge():
    """Its multi-head latent attention builds the keys in ``new_empty`` memory, one part
    at a time (one real run: the views of the second part were taken after the first
    part's write, and diverged on the garbage)."""
    model, args, kwargs = build("deepseek_v3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = fxviz.trace(model, *args, method="real", **kwargs)
    with torch.no_grad():
        d = fxviz.diff(gm, gm, *args, **kwargs)
    assert d.first_divergence is None
    unmeasured = {p.name for p in d.comparison.unmeasured}
    assert {"new_empty", "slice_7", "slice_8"} <= unmeasured
