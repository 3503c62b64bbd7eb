"""Tensor summaries: statistics agree with torch on every layout and dtype."""

from __future__ import annotations

import math

import pytest
import torch

from fxviz._record._summary import summarize


def _reference(t: torch.Tensor) -> dict[str, float]:
    x = t.detach().to(torch.float64).flatten()
    finite = x[torch.isfinite(x)]
    return {
        "min": finite.min().item(),
        "max": finite.max().item(),
        "mean": finite.mean().item(),
        "std": finite.std().item(),
        "zeros": int((x == 0).sum()),
        "nan": int(torch.isnan(x).sum()),
        "posinf": int(torch.isposinf(x).sum()),
        "neginf": int(torch.isneginf(x).sum()),
    }


CASES = {
    "contiguous": lambda: torch.randn(64, 33),
    "transposed view": lambda: torch.randn(4, 8, 5).transpose(0, 2),
    "sliced view": lambda: torch.randn(10, 10)[::2, 1:7],
    "expanded view": lambda: torch.randn(4, 1).expand(4, 6),
    "mean far above std": lambda: torch.randn(5000) * 1e-3 + 1e4,
    "relu zeros": lambda: torch.randn(100).relu(),
    "positive, no zeros": lambda: torch.rand(100) + 0.5,
    "negative with zeros": lambda: -torch.randn(100).relu(),
    "float32 sums overflow": lambda: torch.randn(5000) * 1e36,
    "float32 sums overflow and cancel": lambda: (
        torch.full((5000,), 3e37) * (1 + torch.randn(5000) * 1e-4)
    ),
    "bfloat16": lambda: torch.randn(300).to(torch.bfloat16),
    "float64": lambda: torch.randn(50, dtype=torch.float64),
    "large int ids": lambda: torch.randint(2**30, 2**31, (64,)),
    "bool": lambda: torch.rand(40) > 0.5,
    "with nan and infs": lambda: torch.tensor(
        [1.0, float("nan"), -2.0, float("inf"), 0.0, -float("inf")]
    ),
    "masked attention": lambda: torch.randn(2, 8, 8).masked_fill(
        torch.ones(8, 8).triu(1).bool(), -math.inf
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_statistics_match_a_float64_reference(name):
    t = CASES[name]()
    (s,) = summarize(t)
    ref = _reference(t)
    assert s.min == pytest.approx(ref["min"], rel=1e-6, abs=1e-6)
    assert s.max == pytest.approx(ref["max"], rel=1e-6, abs=1e-6)
    assert s.mean == pytest.approx(ref["mean"], rel=1e-5, abs=1e-5)
    assert s.std == pytest.approx(ref["std"], rel=1e-4, abs=1e-6)
    assert s.absmax == pytest.approx(max(abs(ref["min"]), abs(ref["max"])), rel=1e-6)
    assert (s.zeros, s.nan, s.posinf, s.neginf) == (
        ref["zeros"],
        ref["nan"],
        ref["posinf"],
        ref["neginf"],
    )
    assert s.shape == tuple(t.shape)
    assert s.stride == t.stride()
    assert s.dtype == t.dtype


def test_summaries_leave_the_tensor_alone():
    t = torch.randn(6, 4, requires_grad=True).t()
    version = t._version
    summarize(t)
    assert t._version == version
    assert t.grad_fn is not None  # still the view it was; no graph was added to it


def test_all_nonfinite_and_empty_and_single():
    (s,) = summarize(torch.full((3,), float("nan")))
    assert s.nan == 3
    assert s.min is None
    assert s.mean is None
    (e,) = summarize(torch.empty(0, 4))
    assert e.numel == 0
    assert e.min is None
    (one,) = summarize(torch.tensor([2.5]))
    assert one.mean == 2.5
    assert one.std is None


def test_meta_tensors_have_shapes_but_no_statistics():
    (s,) = summarize(torch.empty(2, 3, device="meta"))
    assert s.shape == (2, 3)
    assert s.device == "meta"
    assert s.min is None
    assert s.nbytes == 24


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.uint16, torch.uint32, torch.int8])
def test_dtypes_without_native_reductions_are_widened(dtype):
    (s,) = summarize(torch.tensor([0.0, 1.0, 2.0, 3.0]).to(dtype))
    assert s.dtype == dtype
    assert (s.min, s.max, s.mean, s.zeros) == (0.0, 3.0, 1.5, 1)
