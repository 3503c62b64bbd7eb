"""The short path for small float32 tensors gives the general path's statistics bit for
bit, on the outputs of generated graphs and on the cases that leave it."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import fxviz
from fxviz._record import _moments
from fxviz._record._batched import batchable, batched_statistics
from fxviz._record._moments import _CHUNK, _statistics
from tests.test_generated_graphs import graphs


def _both(t, monkeypatch):
    short = _statistics(t)
    with monkeypatch.context() as patch:
        patch.setattr(_moments, "_small_float32", lambda *args: None)
        general = _statistics(t)
    return short, general


def _same(a, b):
    return len(a) == len(b) and all(
        x == y or (x != x and y != y) for x, y in zip(a, b, strict=True)
    )


CASES = {
    "tiny": lambda: torch.randn(7),
    "one value": lambda: torch.tensor([3.0]),
    "relu, counted as bytes": lambda: torch.randn(64, 256).relu(),
    "relu, counted by count_nonzero": lambda: torch.randn(100).relu(),
    "positive": lambda: torch.rand(500) + 1,
    "constant (std 0: measured around the mean)": lambda: torch.ones(300),
    "mean far above std": lambda: torch.randn(5000) * 1e-3 + 1e4,
    "past aminmax's size": lambda: torch.randn(_CHUNK),
    "sums overflow (float64 sums)": lambda: torch.randn(5000) * 1e36,
    "squares underflow (float64 norm)": lambda: torch.randn(100) * 1e-30,
    "nan (left to the general path)": lambda: torch.tensor([1.0, math.nan, 0.0]),
    "transposed": lambda: torch.randn(30, 40).t(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_short_path_equals_the_general_one(name, monkeypatch):
    t = CASES[name]()
    short, general = _both(t, monkeypatch)
    assert _same(short, general), (short, general)


def test_the_short_path_is_taken_for_small_finite_float32():
    x = torch.randn(64, 256)
    assert _moments._small_float32(x.view(-1), x.numel(), True) is not None
    assert _moments._small_float32(torch.tensor([math.inf]), 1, True) is None


def test_statistics_of_generated_graphs_equal_the_general_path(monkeypatch):
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        rec = fxviz.record(gm, *[i.clone() for i in inputs])
        for r in rec.values():
            value = r.value
            if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
                continue
            if value.numel() == 0 or value.layout != torch.strided or value.is_inference():
                continue
            short, general = _both(value, monkeypatch)
            assert _same(short, general), r.name
            if r.outputs[0].min is not None and value._version == 0:
                assert r.outputs[0].min == short[0]
                assert r.outputs[0].zeros == short[8]
        # many at once (as a table reads them): the graph's values, each with its negation
        # and a copy past float32's sums, measured together, give the general path's too
        values = [r.value.detach() for r in rec.values() if isinstance(r.value, torch.Tensor)]
        values = [v for v in values if batchable(v)]
        tensors = values + [-v for v in values] + [v * 1e36 for v in values]
        for t, together in zip(tensors, batched_statistics(tensors), strict=True):
            if together is not None:
                _, general = _both(t, monkeypatch)
                assert _same(together, general)

    check()


def test_statistics_of_generated_graphs_equal_torch_reductions_in_float64():
    """Whatever path measured them (short, chunked, lazily on first read), a record's
    statistics are torch's own reductions of the finite values: min, max, absmax and the
    counts exactly, mean and std to float32 rounding."""

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        rec = fxviz.record(gm, *[i.clone() for i in inputs])
        for r in rec.values():
            value = r.value
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                continue
            if value.numel() == 0 or value.layout != torch.strided or value._version != 0:
                continue
            s = r.outputs[0]
            wide = value.detach().double().flatten()
            finite = wide[torch.isfinite(wide)]
            assert (s.nan, s.posinf, s.neginf) == (
                int(wide.isnan().sum()),
                int(wide.isposinf().sum()),
                int(wide.isneginf().sum()),
            ), r.name
            assert s.zeros == int((wide == 0).sum()), r.name
            if finite.numel() == 0:
                assert s.min is None, r.name
                continue
            assert (s.min, s.max) == (finite.min().item(), finite.max().item()), r.name
            assert s.absmax == finite.abs().max().item(), r.name
            scale = finite.abs().max().item() or 1.0
            assert math.isclose(s.mean, finite.mean().item(), rel_tol=1e-5, abs_tol=1e-6 * scale)
            if finite.numel() > 1:
                # float32 sums, re-measured around the mean only past mean² > 1e3·var: the
                # cancellation leaves var within ~3·1e3·2**-24 ≈ 2e-4 (std half that, and
                # up to ~2e-4 where n = 2), so 1e-4 failed on a (2, 1) Linear output
                std = finite.std().item()
                assert math.isclose(s.std, std, rel_tol=3e-4, abs_tol=1e-6 * scale), r.name

    check()


@pytest.mark.parametrize("n", [_CHUNK - 1, _CHUNK, _CHUNK + 1, 3 * _CHUNK + 7])
def test_one_aminmax_a_chunk_gives_amin_and_amax(n):
    x = torch.randn(n) * 3
    x[n // 2] = 0.0
    lo, hi, *_ = _statistics(x)
    assert (lo, hi) == (x.min().item(), x.max().item())
