"""Values dropped as the run goes (``keep="stats"``, a byte budget) are measured together
(``fxviz._record._held``): the statistics are those of each node's value as it ran,
the same numbers as keeping every value gives, through in-place writes, NaNs, failures
and runs longer than what is held at once; on CUDA, read in few transfers.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record._held import HELD_VALUES


class _Blocks(nn.Module):
    """Many small tensors of a few shapes (held and measured together), an in-place
    ReLU that writes a value held a moment before, a tuple output, and a log that makes
    NaN and -inf (measured alone)."""

    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.layers:
            y = layer(x)
            y = torch.relu_(y)  # writes the value the layer gave, in place
            x = x + y * 0.5
        lo, hi = x.chunk(2, dim=-1)
        return (lo - hi).log(), x.sum(-1)


def _summaries(rec: fxviz.Recording) -> dict[str, tuple]:
    return {r.name: r.outputs for r in rec.values()}


def _same(a: dict[str, tuple], b: dict[str, tuple]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        for x, y in zip(a[name], b[name], strict=True):
            for field in ("shape", "dtype", "min", "max", "mean", "std", "nan", "neginf", "zeros"):
                got, want = getattr(x, field), getattr(y, field)
                both_nan = isinstance(got, float) and math.isnan(got) and math.isnan(want)
                assert got == want or both_nan, (name, field, got, want)


@pytest.mark.parametrize("keep", ["stats", 0, 4096])
def test_dropped_values_get_the_statistics_kept_values_get(keep):
    torch.manual_seed(0)
    model, x = _Blocks(HELD_VALUES // 2).eval(), torch.randn(8, 16)  # > HELD_VALUES nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the budget's warning: values were dropped
        dropped = fxviz.record(model, x, keep=keep)
    kept = fxviz.record(model, x)
    assert len(dropped) > HELD_VALUES
    assert not any(r.value is not None for r in list(dropped.values())[-5:-1])
    _same(_summaries(dropped), _summaries(kept))
    log = dropped["log"].outputs[0]
    assert log.nan > 0  # measured alone: not finite
    assert log.neginf is not None


def test_a_value_written_in_place_is_measured_as_its_node_gave_it():
    def f(x):
        y = x * 2  # held, then written by the next node
        return y.add_(100.0)

    x = torch.randn(4, 8)
    rec = fxviz.record(f, x, keep="stats")
    assert rec["mul"].outputs[0].max == pytest.approx((x * 2).max().item())
    assert rec["add_"].outputs[0].min == pytest.approx((x * 2 + 100).min().item())


def test_a_failed_run_keeps_the_statistics_of_the_nodes_before_the_failure():
    def f(x):
        a = x.relu()
        b = a * 3
        return b @ torch.ones(5, 5)  # (4, 8) @ (5, 5): fails

    x = torch.randn(4, 8)
    with pytest.raises(fxviz.FxvizError) as raised:
        fxviz.record(f, x, keep="stats")
    rec = raised.value.recording
    assert rec["mul"].outputs[0].max == pytest.approx((x.relu() * 3).max().item())
    assert rec["relu"].outputs[0].zeros == int((x <= 0).sum())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_run_that_keeps_only_statistics_syncs_once_not_once_a_node():
    torch.manual_seed(0)
    model, x = _Blocks(40).eval(), torch.randn(8, 16)
    on_cpu = fxviz.record(model, x, keep="stats")
    model, x = model.cuda(), x.cuda()
    fxviz.record(model, x, keep="stats")  # captured and warmed up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec = fxviz.record(model, x, keep="stats")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= len(rec) // 16, f"{len(syncs)} host syncs recording {len(rec)} nodes"
    for name, summaries in _summaries(on_cpu).items():
        for got, want in zip(rec[name].outputs, summaries, strict=True):
            assert (got.shape, got.zeros, got.nan) == (want.shape, want.zeros, want.nan)
            if want.max is not None and math.isfinite(want.max):
                assert got.max == pytest.approx(want.max, rel=1e-4, abs=1e-5)
