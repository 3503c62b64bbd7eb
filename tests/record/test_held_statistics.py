"""Values dropped as the run goes (``keep="stats"``, a byte budget) get the statistics
their nodes gave them: the same numbers keeping every value gives, through in-place
writes (foreseen or not), NaNs, failures and long runs; on an accelerator their
reductions wait and are read together (``fxviz._record._held``: checked here on CPU
tensors, its torch code being device-agnostic), in few transfers on CUDA.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record._held import HELD_VALUES
from fxviz._record._summary import summarize_tensor


class _Blocks(nn.Module):
    """Many nodes (more than are held at once on an accelerator), an in-place ReLU that
    writes the value the node before gave, a tuple output, and a log that makes NaN and
    -inf."""

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


_LIB = torch.library.Library("fxviz_held_test", "DEF")
_LIB.define("bump(Tensor x) -> Tensor")  # says it writes nothing


def _bump(x: torch.Tensor) -> torch.Tensor:
    x.add_(100.0)  # ... and writes its input (an extension kernel with a wrong schema)
    return x.sum().reshape(1)


_LIB.impl("bump", _bump, "CPU")


def test_a_write_fxviz_cannot_foresee_does_not_reach_a_value_waiting_to_be_measured():
    """A value dropped as the run goes is measured as its node gave it, even when a later
    node writes it where nothing said it would (a wrong op schema, a module writing a
    buffer it shares): what waits is a copy."""

    class M(nn.Module):
        def forward(self, x):
            h = x * 2
            return torch.ops.fxviz_held_test.bump(h) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the interpreted engine warns of the write
        rec = fxviz.record(M(), torch.ones(4), keep="stats", method="symbolic")
    assert rec["mul"].outputs[0].mean == 2.0


def test_values_waiting_are_read_as_their_nodes_gave_them_through_later_writes():
    """The accelerator path run on CPU tensors (its torch code is device-agnostic): each
    value's reductions start as it is held; a value a node may write is copied first
    (``before_write``); one written where nothing said it would keeps its statistics
    (the reductions were taken), and only the past-limit reads come in between."""
    from fxviz._record import _held
    from fxviz._record._moments import _device_statistics, flat_measured
    from fxviz._record._summary import with_statistics

    class Entry:
        outputs = None

    torch.manual_seed(0)
    held = _held.HeldSummaries(waits=lambda t: True)
    values = [torch.randn(64, 8) for _ in range(_held.HELD_VALUES + 10)]
    values[3][0, 0] = math.nan  # read again (NaN): from its copy, taken before its write
    want = [
        (
            with_statistics(
                summarize_tensor("", v, False), _device_statistics(flat_measured(v), True)
            ),
        )
        for v in values
    ]
    entries = [Entry() for _ in values]
    for i, (entry, value) in enumerate(zip(entries, values, strict=True)):
        assert held.hold(entry, value)
        if i == 3:
            held.before_write([value[1:]])  # a view of it is about to be written
            value.add_(1)
        if i == 5:
            value.mul_(0)  # unforeseen: its reductions were taken already
    assert entries[0].outputs is not None  # read once HELD_VALUES were held
    assert entries[-1].outputs is None
    held.read()
    assert not held
    for entry, expected in zip(entries, want, strict=True):
        assert len(entry.outputs) == 1
        got, wanted = entry.outputs[0], expected[0]
        assert (got.min, got.max, got.nan, got.zeros) == (
            wanted.min,
            wanted.max,
            wanted.nan,
            wanted.zeros,
        )
        assert got.mean == wanted.mean or (math.isnan(got.mean) and math.isnan(wanted.mean))


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
