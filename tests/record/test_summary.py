"""Tensor summaries: statistics agree with torch on every layout and dtype."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fxviz._record._moments import _BLOCK, _CHUNK, _mean_std, _statistics
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
    # the non-finite values zeroed would be the min (the max): measured past them instead
    "positive with infs": lambda: torch.tensor([3.0, -math.inf, 0.5, math.inf, 2.0]),
    "negative with infs and nan": lambda: torch.tensor([-3.0, math.inf, -0.5, math.nan]),
    "chunked positive with -inf": lambda: _with(torch.rand(2 * _CHUNK + 1) + 1, [7], -math.inf),
    "masked attention": lambda: torch.randn(2, 8, 8).masked_fill(
        torch.ones(8, 8).triu(1).bool(), -math.inf
    ),
    "relu zeros, counted as bytes": lambda: torch.randn(64, 256).relu(),
    "negative with zeros, float16": lambda: -torch.randn(64, 256).relu().half(),
    "tiny values": lambda: torch.randn(100) * 1e-30,  # float32 squares underflow
    "subnormal values": lambda: torch.randn(100) * 1e-40,
    "tiny constant plus tinier": lambda: torch.full((1000,), 1e-25) + torch.randn(1000) * 1e-29,
    "chunked tiny values": lambda: torch.randn(2 * _CHUNK + 3) * 1e-22,
    "squares overflow": lambda: torch.randn(64, 256) * 1e20,  # float32 sums do not
    "float16 near its max, some inf": lambda: torch.randn(5000).half() * 6e4,
    "float16": lambda: torch.randn(300).half(),
    "0/1 integers": lambda: torch.randint(0, 2, (50,)),
    "negative integers": lambda: torch.randint(-5, 0, (50,)),
    # past one chunk (_CHUNK values): reduced one chunk at a time, the last one partial
    "chunked": lambda: torch.randn(3 * _CHUNK + 17),
    "chunked relu zeros": lambda: torch.randn(2 * _CHUNK + 5).relu(),
    "chunked transposed": lambda: torch.randn(300, 700).t(),
    "chunked sliced (copied)": lambda: torch.randn(600, 700)[:, ::3],
    "chunked bfloat16": lambda: torch.randn(2 * _CHUNK + 1).to(torch.bfloat16),
    "chunked float16 zeros": lambda: torch.randn(2 * _CHUNK + 1).relu().half(),
    "chunked int ids": lambda: torch.randint(2**40, 2**41, (2 * _CHUNK + 3,)),
    "chunked ints with zeros": lambda: torch.randint(-3, 4, (2 * _CHUNK + 3,)),
    "chunked bool": lambda: torch.rand(2 * _CHUNK + 9) > 0.3,
    "chunked float64": lambda: torch.randn(_CHUNK + 1, dtype=torch.float64),
    "chunked mean far above std": lambda: torch.randn(2 * _CHUNK) * 1e-3 + 1e4,
    "chunked sums overflow": lambda: torch.randn(2 * _CHUNK) * 1e36,
    "chunked nan in one chunk": lambda: _with(torch.randn(3 * _CHUNK), [5], math.nan),
    "chunked infs in two chunks": lambda: _with(
        torch.randn(3 * _CHUNK), [1, _CHUNK + 2, 2 * _CHUNK + 3], -math.inf, math.inf
    ),
    "chunked nan and -inf, zeros": lambda: _with(
        torch.randn(2 * _CHUNK).relu(), [3, 4, _CHUNK + 9], math.nan, -math.inf
    ),
    "chunked masked attention": lambda: torch.randn(4, 4, 128, 128).masked_fill(
        torch.ones(128, 128).triu(1).bool(), -math.inf
    ),
}


def _with(t: torch.Tensor, where: list[int], *values: float) -> torch.Tensor:
    """``t`` with ``values`` (cycled) written at flat positions ``where``."""
    flat = t.view(-1)
    for i, at in enumerate(where):
        flat[at] = values[i % len(values)]
    return t


@pytest.mark.parametrize("name", list(CASES))
def test_statistics_match_a_float64_reference(name):
    t = CASES[name]()
    (s,) = summarize(t)
    ref = _reference(t)
    scale = min(1.0, max(abs(ref["min"]), abs(ref["max"])))  # tiny values: tiny tolerance
    assert s.min == pytest.approx(ref["min"], rel=1e-6, abs=1e-6 * scale)
    assert s.max == pytest.approx(ref["max"], rel=1e-6, abs=1e-6 * scale)
    assert s.mean == pytest.approx(ref["mean"], rel=1e-5, abs=1e-5 * scale)
    assert s.std == pytest.approx(ref["std"], rel=1e-4, abs=1e-6 * scale)
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
    # a chunk of nothing but NaN/Inf beside finite ones: statistics of the finite chunk
    t = torch.randn(2 * _CHUNK)
    t[_CHUNK:] = float("inf")
    (s,) = summarize(t)
    assert (s.posinf, s.nan, s.neginf) == (_CHUNK, 0, 0)
    assert s.max == t[:_CHUNK].max().item()
    assert s.mean == pytest.approx(t[:_CHUNK].double().mean().item(), rel=1e-5, abs=1e-6)
    (all_bad,) = summarize(torch.full((2 * _CHUNK + 1,), float("-inf")))
    assert (all_bad.neginf, all_bad.min, all_bad.zeros) == (2 * _CHUNK + 1, None, 0)


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


def _each_block_alone(t: torch.Tensor) -> tuple[float, float]:
    """The sum and sum of squares of a float32 tensor as fxviz took them before the blocks
    of a chunk were reduced in one call: each block of ``_BLOCK`` values on its own, in
    float32, the results added in float64, in order."""
    total = squares = 0.0
    for block in t.flatten().split(_BLOCK):
        total += block.sum().item()
        norm = torch.linalg.vector_norm(block).item()
        squares += norm * norm
    return total, squares


@settings(max_examples=20, deadline=None)
@example(n=3 * _BLOCK + 7, shift=0.5, relu=False, seed=1)  # whole blocks and a rest
@example(n=2 * _CHUNK + 3 * _BLOCK + 3, shift=0.0, relu=False, seed=0)  # across chunks
@given(
    n=st.integers(2, 2 * _CHUNK + 3 * _BLOCK + 5),
    shift=st.sampled_from([0.0, 0.5, -2.0]),
    relu=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_float32_mean_and_std_are_those_of_each_block_reduced_alone(n, shift, relu, seed):
    """One call for all the blocks of a chunk (rows of a 2-d view) gives the very numbers
    of reducing each block on its own, added in float64: within one chunk exactly, across
    chunks to float64's rounding (each chunk's total is added to the others').
    At one thread: torch splits a reduction among threads, in an order that depends on
    their count, so that the last bits of a float32 sum do too."""
    t = torch.randn(n, generator=torch.Generator().manual_seed(seed)) + shift
    if relu:
        t = t.relu()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, _, mean, std, *_ = _statistics(t)
        want = _mean_std(*_each_block_alone(t), n)
    finally:
        torch.set_num_threads(threads)
    if n <= _CHUNK:
        assert (mean, std) == want
    else:  # each chunk's blocks are added up, then the chunks: float64's last bits may differ
        assert mean == pytest.approx(want[0], rel=1e-12, abs=1e-15)
        assert std == pytest.approx(want[1], rel=1e-12)
