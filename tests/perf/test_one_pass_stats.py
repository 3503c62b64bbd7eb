"""Statistics read back in one transfer equal those read one number at a time (the old
way), bit for bit, on the outputs of generated graphs and on hard cases."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import fxviz
from fxviz._record import _moments
from fxviz._record._moments import _CHUNK, _statistics
from tests.test_generated_graphs import graphs


def _old_chunk(x, buffer, zeros):
    """``_chunk_moments`` as it read float32 reductions before: one ``item()`` each."""
    n = x.numel()
    lo, hi = torch.aminmax(x) if n <= _moments._AMINMAX_MAX else (x.amin(), x.amax())
    mn, mx = lo.item(), hi.item()
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return _NEW_CHUNK(x, buffer, zeros)
    total, squares = _moments._sums(x, max(abs(mn), abs(mx)))
    nonzero = n
    if zeros and mn <= 0 <= mx:
        nonzero = int(torch.count_nonzero(x).item())
    return mn, mx, total, squares, n, 0, 0, 0, nonzero


_NEW_CHUNK = _moments._chunk_moments


def _old_statistics(t, monkeypatch):
    if t.dtype != torch.float32:
        return _statistics(t)
    with monkeypatch.context() as patch:
        patch.setattr(_moments, "_chunk_moments", _old_chunk)
        return _statistics(t)


def _same(a, b):
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


CASES = {
    "small": lambda: torch.randn(7, 5),
    "relu": lambda: torch.randn(64, 256).relu(),
    "chunked": lambda: torch.randn(3 * _CHUNK + 5),
    "sums overflow": lambda: torch.randn(5000) * 1e36,
    "squares overflow": lambda: torch.randn(64, 256) * 1e20,
    "tiny": lambda: torch.randn(100) * 1e-30,
    "mean far above std": lambda: torch.randn(5000) * 1e-3 + 1e4,
    "nan": lambda: torch.tensor([1.0, math.nan, 0.0]),
    "infs in chunks": lambda: torch.randn(2 * _CHUNK).index_fill_(0, torch.tensor([3]), math.inf),
}


@pytest.mark.parametrize("name", list(CASES))
def test_one_transfer_equals_one_read_each(name, monkeypatch):
    t = CASES[name]()
    assert _same(_statistics(t), _old_statistics(t, monkeypatch))


def test_statistics_of_generated_graphs_equal_the_old_way(monkeypatch):
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        rec = fxviz.record(gm, *[i.clone() for i in inputs], keep="all")
        for r in rec.values():
            value = r.value
            if not isinstance(value, torch.Tensor) or value.numel() == 0:
                continue
            if value.is_complex() or value.layout != torch.strided or value.is_inference():
                continue
            if r.outputs[0].min is None:
                continue
            new = _statistics(value)
            assert _same(new, _old_statistics(value, monkeypatch)), r.name
            summary = r.outputs[0]
            assert (summary.nan, summary.posinf, summary.neginf) == tuple(new[5:8])

    check()
