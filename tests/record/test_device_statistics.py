"""Statistics of tensors on an accelerator: the same numbers as on the CPU, and a whole
recording's read in one transfer, not one host sync a node.

The accelerator path is device-agnostic torch code, so its numbers are checked here on CPU
tensors (no GPU on the CI machine); the CUDA test at the end counts the host syncs where
a GPU is present.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record._batched import device_batch_statistics
from fxviz._record._moments import _device_statistics, _statistics, flat_measured
from tests.record.test_batched_stats import CASES, _many, _same

NONFINITE = {
    "NaN and zeros": lambda g: torch.tensor([1.0, math.nan, 0.0, -3.0]),
    "+inf and -inf": lambda g: torch.tensor([1.0, math.inf, -math.inf, 0.5]),
    "all NaN": lambda g: torch.full((5,), math.nan),
    "NaN among big values": lambda g: torch.cat(
        [torch.randn(100, generator=g), torch.tensor([math.nan])]
    ),
}
OTHER_DTYPES = {
    "int64 ids": lambda g: torch.randint(0, 50_000, (4, 64), generator=g),
    "bool mask": lambda g: torch.rand(300, generator=g) < 0.3,
    "float16": lambda g: torch.randn(256, generator=g).half(),
    "bfloat16 relu": lambda g: torch.randn(256, generator=g).relu().bfloat16(),
    "float64": lambda g: torch.randn(100, generator=g, dtype=torch.float64),
    "transposed": lambda g: torch.randn(30, 40, generator=g).t(),
    "sliced (gapped: copied)": lambda g: torch.randn(30, 40, generator=g)[:, ::3],
    "past a chunk": lambda g: torch.randn(1 << 20 | 5, generator=g),
}
ALL = {**CASES, **NONFINITE, **OTHER_DTYPES}


def _close(device: tuple, cpu: tuple) -> None:
    """The accelerator path's statistics against the CPU path's: min, max, absmax and the
    counts exactly; mean and std to float32 rounding (the CPU path sums in blocks)."""
    lo, hi, mean, std, absmax, *counts = device
    c_lo, c_hi, c_mean, c_std, c_absmax, *c_counts = cpu
    assert (lo, hi, absmax, counts) == (c_lo, c_hi, c_absmax, c_counts)
    for got, want in ((mean, c_mean), (std, c_std)):
        if want is None or got is None:
            assert got is want
        else:
            scale = max(abs(want), abs(c_absmax or 0.0) * 1e-3, 1e-30)
            assert abs(got - want) <= 1e-5 * scale, (got, want)


@pytest.mark.parametrize("name", list(ALL))
def test_the_accelerator_path_gives_the_cpu_statistics(name):
    for t in _many(ALL[name], n=2):
        _close(_device_statistics(flat_measured(t), True), _statistics(t))


@pytest.mark.parametrize("name", list(ALL))
def test_read_together_equals_each_read_alone(name):
    tensors = _many(ALL[name], n=3)
    found = device_batch_statistics(tensors)
    for t, stats in zip(tensors, found, strict=True):
        assert _same(stats, _device_statistics(flat_measured(t), True))


def test_mixed_sizes_dtypes_and_nonfinite_read_in_one_call():
    generator = torch.Generator().manual_seed(1)
    tensors = [make(generator) for make in ALL.values()]
    found = device_batch_statistics(tensors)
    for t, stats in zip(tensors, found, strict=True):
        assert _same(stats, _device_statistics(flat_measured(t), True))


def test_a_dtype_the_reductions_refuse_is_left_to_the_tensor_alone():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 in this torch")
    odd = torch.randn(8).to(torch.float8_e4m3fn)
    found = device_batch_statistics([torch.randn(4), odd, torch.arange(3)])
    assert [f is None for f in found] == [False, True, False]


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            *[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(40)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x).softmax(-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_recording_reads_its_statistics_in_few_transfers():
    """Reading every node's statistics syncs with the device about once per block of
    nodes read together, not once a node; and the numbers are the CPU run's."""
    model, x = _Mlp().eval(), torch.randn(8, 64)
    on_cpu = fxviz.record(model.cpu(), x)
    rec = fxviz.record(model.cuda(), x.cuda())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = rec.table()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= len(rec) // 16, f"{len(syncs)} host syncs reading {len(rec)} nodes"
    want = on_cpu.table()
    assert list(table.index) == list(want.index)
    for column in ("min", "max", "mean", "zeros"):
        got, expected = table[column].astype(float), want[column].astype(float)
        assert ((got - expected).abs() <= 1e-4 * (1 + expected.abs())).all(), column
