"""The statistics of one tensor: min, max, mean, std, absmax, NaN/Inf and zero counts.

On the CPU, reductions run one chunk of up to 2**20 values at a time (``amin`` and
``amax``, or one ``aminmax`` on small tensors; ``sum``, ``vector_norm``, and a branch-free
zero count where the range holds 0), read with ``item()`` (on the CPU a read costs less
than stacking the results); a float32 tensor of at most one chunk with finite values
takes a shorter path of the same reductions. float32 sums and sums of squares are taken
per block of 2**16 values, in one call for all the blocks of a chunk, and the blocks'
results added in float64 (the numbers of reducing each block on its own; past one chunk
they are added chunk by chunk, as the chunks' other results). Where a sum of
squares would cancel (mean >> std) the spread is measured again around the mean, and
where it overflows on the values scaled down by a power of two, both in the tensor's own
dtype (no float64 copy). NaN/Inf are counted only where min/max show that some exist. On
an accelerator, four whole-tensor reductions are read back in one transfer.

    >>> import torch
    >>> lo, hi, mean, std, absmax, nan, posinf, neginf, zeros = _statistics(
    ...     torch.tensor([[0.0, 2.0], [4.0, float("nan")]]))
    >>> lo, hi, mean, round(std, 6), nan, zeros
    (0.0, 4.0, 2.0, 2.0, 1, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fxviz._torch_compat import permuted_dense

_NO_NONFINITE = (0, 0, 0)

# CPU reductions run one chunk at a time: 1M float32 values (4 MiB) stay in the last-level
# cache while every reduction reads them, where a bigger tensor read whole comes from
# memory once per reduction. Chunks of 64K values (a core's L2) took 13-16% more time for
# every value of the GPT benchmark (~1.3 µs a call, 5-6 calls a chunk).
_CHUNK = 1 << 20
# up to this, one aminmax beats amin + amax; past ~20K values torch's aminmax is the
# slower (0.15 against 0.12 ns a value at 64K values, 2 cores of an AMD EPYC). Between
# 8K and 16K values the two are even on a tensor alone (16K: 3.9 against 4.1 µs warm,
# 4.1-4.3 against 4.5-4.9 cold), and amin/amax let a row of many measured at once keep
# the zero its tensor's own min/max picks (``_batched`` reads a row with a zero min or
# max again up to this size: ~4.5 µs at 16K values, every ReLU output)
_AMINMAX_MAX = 1 << 13
# float32 sums and norms are taken per block of this many values (see _block_sums)
_BLOCK = 1 << 16
# up to this many values, count_nonzero's mispredicted branches cost less than a mask
_BRANCHY_MAX = 1 << 10


def _statistics(t: torch.Tensor, zeros: bool = True) -> tuple[Any, ...]:
    """``(min, max, mean, std, absmax, nan, posinf, neginf, zeros)`` of a tensor (``zeros``
    ``None`` when not asked for: on the CPU, not counted)."""
    x = flat_measured(t)
    if not x.is_cpu:
        return _device_statistics(x, zeros)
    numel = x.numel()
    if numel <= _CHUNK and x.dtype == torch.float32:
        found = _small_float32(x, numel, zeros)
        if found is not None:
            return found
    # small tensors (most of a model's) whole, as they are: every call counts
    if numel <= _CHUNK:
        moments = _chunk_moments(x, None, zeros)
    else:
        moments = _cpu_moments(x.view(-1), zeros)
    mn, mx, total, squares, finite, nan, posinf, neginf, nonzero = moments
    if finite == numel:
        counted = (lambda _x, _n: nonzero) if zeros else None
        return finite_statistics(x, numel, mn, mx, total, squares, counted)
    n_zeros = numel - nonzero if zeros else None
    if finite == 0:
        return (None, None, None, None, None, nan, posinf, neginf, n_zeros)
    mean, std = _mean_std(total, squares, finite)
    overflowed = not (math.isfinite(mean) and math.isfinite(std or 0.0))
    if overflowed or (std is not None and mean * mean > 1e3 * std * std):
        wide = _wide(x, torch.float64)
        mean, std = _exact_mean_std(wide[torch.isfinite(wide)], torch.float64)
    return (mn, mx, mean, std, max(abs(mn), abs(mx)), nan, posinf, neginf, n_zeros)


def _small_float32(x: torch.Tensor, n: int, zeros: bool) -> tuple[Any, ...] | None:
    """The common case in the fewest calls (each one counts at this size): a float32 CPU
    tensor of at most one chunk, every value finite; the same numbers as the general path.
    ``None`` otherwise (then the general path measures it)."""
    mn, mx = small_range(x, n)
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return None
    total, squares = _sums(x, max(abs(mn), abs(mx)))
    return finite_statistics(x, n, mn, mx, total, squares, _nonzero if zeros else None)


def small_range(x: torch.Tensor, n: int) -> tuple[float, float]:
    """``(min, max)`` of a CPU tensor of ``n`` values, at most one chunk: one ``aminmax``
    or ``amin`` and ``amax`` (which of two zeros, ``-0.0`` or ``0.0``, each gives when both
    are there is its own)."""
    lo, hi = torch.aminmax(x) if n <= _AMINMAX_MAX else (x.amin(), x.amax())
    return lo.item(), hi.item()


def finite_statistics(
    x: torch.Tensor,
    n: int,
    mn: float,
    mx: float,
    total: float,
    squares: float,
    nonzero: Callable[[torch.Tensor, int], int] | int | None,
) -> tuple[Any, ...]:
    """The statistics of a dense CPU ``x`` of ``n`` finite values from its reductions
    (its min, max, and its sum and sum of squares as :func:`_sums` takes them), however
    they were taken (one tensor, or many at once in ``_batched``); ``nonzero``: how many
    values are nonzero, or ``nonzero(x, n)`` counts them when the range holds 0
    (``None``: zeros not counted).
    Where the sums overflowed or the squares cancel, the spread is measured again."""
    absmax = max(abs(mn), abs(mx))
    mean, std = _mean_std(total, squares, n)
    if not (math.isfinite(mean) and math.isfinite(std or 0.0)):
        mean, std = _scaled_mean_std(_wide(x, torch.float64), absmax, torch.float64)
    elif std is not None and mean * mean > 1e3 * std * std:  # measured around the mean
        mean, std = _centered_mean_std(_wide(x, torch.float64), mean, torch.float64)
    if nonzero is None:
        n_zeros = None
    elif mn > 0 or mx < 0:
        n_zeros = 0
    else:
        n_zeros = n - (nonzero if isinstance(nonzero, int) else nonzero(x, n))
    return (mn, mx, mean, std, absmax, 0, 0, 0, n_zeros)


def _nonzero(x: torch.Tensor, n: int) -> int:
    """How many of the ``n`` values of a flat CPU tensor are nonzero (NaN counts, -0.0
    does not)."""
    if n <= _BRANCHY_MAX:
        return int(torch.count_nonzero(x).item())
    return _count(x.bool())


def _wide(x: torch.Tensor, exact: torch.dtype) -> torch.Tensor:
    """``x`` in a dtype its sums can be taken in: float32 at least; integers in ``exact``
    (float32 would round ids above 2**24)."""
    if x.is_floating_point():
        return x if x.element_size() >= 4 else x.to(torch.float32)
    return x.to(exact)


# (min, max of the finite values, their sum and sum of squares, how many are finite, NaN,
# +inf and -inf counts, how many are nonzero)
_Moments = tuple[Any, Any, float, float, int, int, int, int, int]


def _cpu_moments(flat: torch.Tensor, zeros: bool) -> _Moments:
    """The moments of a flat, dense CPU tensor of more than one chunk, one chunk at a time
    (the chunks' sums added in Python floats, i.e. float64)."""
    buffer = None
    if not (flat.is_floating_point() and flat.element_size() >= 4):
        buffer = torch.empty(_CHUNK, dtype=_wide(flat[:1], torch.float64).dtype)
    mn = mx = None
    total = squares = 0.0
    counts = [0, 0, 0, 0, 0]  # finite, nan, posinf, neginf, nonzero
    for chunk in flat.split(_CHUNK):
        lo, hi, s, sq, *chunk_counts = _chunk_moments(chunk, buffer, zeros)
        if lo is not None:
            mn = lo if mn is None else min(mn, lo)
            mx = hi if mx is None else max(mx, hi)
        total += s
        squares += sq
        counts = [a + b for a, b in zip(counts, chunk_counts, strict=True)]
    return (mn, mx, total, squares, *counts)  # type: ignore[return-value]


def _chunk_moments(x: torch.Tensor, buffer: torch.Tensor | None, zeros: bool) -> _Moments:
    """The moments of one chunk, or of a whole contiguous tensor of at most one chunk
    (``buffer``: reused room to widen it into; ``zeros``: count them, else all nonzero)."""
    n = x.numel()
    floating = x.is_floating_point()
    if buffer is not None:
        wide = buffer[:n].copy_(x)
    elif floating and x.element_size() >= 4:
        wide = x
    else:
        wide = _wide(x, torch.float64)
    # min and max of floats on the widened values (the same numbers; half-precision
    # reductions are slower), of integers on their own (float64 rounds above 2**53)
    ranged = wide if floating else x
    if n <= _AMINMAX_MAX:
        lo, hi = torch.aminmax(ranged)
    else:
        lo, hi = ranged.amin(), ranged.amax()
    mn, mx = lo.item(), hi.item()
    if math.isfinite(mn) and math.isfinite(mx):
        total, squares = _sums(wide, max(abs(mn), abs(mx)))
        finite, nan, posinf, neginf = n, 0, 0, 0
    else:
        mn, mx, total, squares, finite, nan, posinf, neginf = _nonfinite_chunk(wide, mn, mx)
    if not zeros or mn is None or mn > 0 or mx < 0:  # no finite 0 (NaN, Inf are nonzero)
        nonzero = n
    elif not floating and mn >= 0 and mx <= 1:
        nonzero = int(total)  # 0/1 values (a bool mask): their sum counts them
    elif n <= _BRANCHY_MAX:
        nonzero = int(torch.count_nonzero(x).item())
    else:
        # bool() is x != 0 (NaN counts, -0.0 does not), then counted as bytes:
        # count_nonzero branches on every value and costs 10-20x this on fresh data that
        # mixes zeros and nonzeros, like a ReLU's output
        nonzero = _count(x.bool())
    return mn, mx, total, squares, finite, nan, posinf, neginf, nonzero


def _sums(x: torch.Tensor, absmax: float) -> tuple[float, float]:
    """The sum and the sum of squares of ``x``, accumulated in float64 where float32 would
    overflow (big values, many of them) or lose the squares to underflow (values below
    ~1e-15): ``vector_norm`` neither scales nor widens, and float64 accumulation costs a
    few µs where the fallbacks that would follow cost more."""
    if x.dtype != torch.float32:
        return x.sum().item(), torch.linalg.vector_norm(x).item() ** 2
    return _block_sums(x, *sum_dtypes(absmax, x.numel()))


def sum_dtypes(absmax: float, n: int) -> tuple[torch.dtype | None, torch.dtype | None]:
    """The accumulation dtypes (``None``: float32's own) of the sum and of the norm of
    ``n`` float32 values up to ``absmax``, as :func:`_sums` takes them."""
    n = min(n, _BLOCK)
    wide_sum = absmax * n > 1e37
    wide_norm = _wide_sums(absmax, n)
    return (torch.float64 if wide_sum else None, torch.float64 if wide_norm else None)


def shared_sum_dtypes(
    absmaxes: list[float], n: int
) -> tuple[torch.dtype | None, torch.dtype | None] | None:
    """What :func:`sum_dtypes` gives each of ``absmaxes`` (of ``n`` values each) when it
    gives all of them float32's own (``(None, None)``), from two calls: its wide cases are
    past a bound (monotone) or in ``(0, 1e-15)``; ``None`` when some may differ."""
    low, top = min(absmaxes), max(absmaxes)
    if low > 0 and sum_dtypes(low, n) == sum_dtypes(top, n) == (None, None):
        return (None, None)
    return None


def rows_pick_own_zeros(n: int) -> bool:
    """Whether ``amin(1)``/``amax(1)`` of contiguous rows of ``n`` values pick, among
    ``-0.0`` and ``0.0``, the zero :func:`small_range` picks for each row alone: past
    :data:`_AMINMAX_MAX` both take ``amin``/``amax``, which reduce a row as the flat
    tensor; up to it ``aminmax`` may pick the other zero."""
    return n > _AMINMAX_MAX


def _block_sums(
    x: torch.Tensor, sum_dtype: torch.dtype | None, norm_dtype: torch.dtype | None
) -> tuple[float, float]:
    """The sum and the sum of squares of a dense float32 ``x``, one :data:`_BLOCK` of values
    at a time (the rows of one 2-d view: two calls for any size), the blocks' results added
    in float64, in order: the float32 rounding of a block's sum does not grow with the
    tensor, and the numbers are those of reducing each block on its own."""
    n = x.numel()
    if n <= _BLOCK:
        norm = torch.linalg.vector_norm(x, dtype=norm_dtype).item()
        return x.sum(dtype=sum_dtype).item(), norm * norm
    x = x.view(-1)
    whole = n - n % _BLOCK
    rows = x[:whole].view(-1, _BLOCK)
    sums = rows.sum(1, dtype=sum_dtype).tolist()
    norms = torch.linalg.vector_norm(rows, dim=1, dtype=norm_dtype).tolist()
    if whole < n:
        sums.append(x[whole:].sum(dtype=sum_dtype).item())
        norms.append(torch.linalg.vector_norm(x[whole:], dtype=norm_dtype).item())
    total = squares = 0.0
    for block_sum, norm in zip(sums, norms, strict=True):
        total += block_sum
        squares += norm * norm
    return total, squares


def _wide_sums(absmax: float, n: int) -> bool:
    """Whether float32 sums of squares of ``n`` values up to ``absmax`` could overflow, or
    lose the squares to underflow (then :func:`_sums` accumulates in float64)."""
    return absmax * n > 1e37 or 0 < absmax < 1e-15 or absmax * absmax * n > 1e37


def _count(mask: torch.Tensor) -> int:
    """How many values of a (fresh, CPU) bool tensor are true: numpy counts bytes with
    SIMD, 2-3x faster than any torch reduction of them."""
    return int(np.count_nonzero(mask.numpy()))


def _nonfinite_chunk(x: torch.Tensor, lo: float, hi: float) -> tuple[Any, ...]:
    """``(min, max, sum, sum of squares, finite, nan, posinf, neginf)`` of a chunk with NaN or
    Inf (``lo``/``hi``: its ``amin``/``amax``, which say which of them it can hold).

    ``nan_to_num`` is far cheaper than boolean masks here: it zeroes the non-finite values
    for the sums (and, mostly, for the min and max), or pushes them past every finite value.
    """
    has_nan = math.isnan(lo) or math.isnan(hi)  # amin and amax propagate NaN
    nan = _count(torch.isnan(x)) if has_nan else 0
    posinf = _count(torch.isposinf(x)) if has_nan or hi == math.inf else 0
    neginf = _count(torch.isneginf(x)) if has_nan or lo == -math.inf else 0
    finite = x.numel() - nan - posinf - neginf
    if finite == 0:
        return (None, None, 0.0, 0.0, 0, nan, posinf, neginf)
    zeroed = torch.nan_to_num(x, 0.0, 0.0, 0.0)
    big = torch.finfo(x.dtype).max
    # with the non-finite values zeroed, a negative min (a positive max) is the finite
    # values' own; else one of them may be the 0, and they are pushed past every value
    if not math.isfinite(lo):
        lo = zeroed.amin().item()
        if lo >= 0:
            lo = torch.nan_to_num(x, big, big, big).amin().item()
    if not math.isfinite(hi):
        hi = zeroed.amax().item()
        if hi <= 0:
            hi = torch.nan_to_num(x, -big, -big, -big).amax().item()
    total, squares = _sums(zeroed, max(abs(lo), abs(hi)))
    return (lo, hi, total, squares, finite, nan, posinf, neginf)


def _device_statistics(x: torch.Tensor, zeros: bool) -> tuple[Any, ...]:
    """:func:`_statistics` on an accelerator: whole-tensor reductions, read in one
    transfer (no chunks: each would be a kernel launch, and nothing is cached between)."""
    return device_statistics(x, device_reductions(x).tolist(), zeros)


def device_reductions(x: torch.Tensor) -> torch.Tensor:
    """The reductions :func:`device_statistics` starts from, of a flat dense tensor on an
    accelerator (``flat_measured``): its min, max, sum, norm and nonzero count, in one
    tensor of :func:`exact_dtype` left on the device (nothing is read: no host sync, so
    many tensors' can be read in one transfer).

    >>> device_reductions(torch.tensor([0.0, 3.0, 4.0])).tolist()
    [0.0, 4.0, 7.0, 5.0, 2.0]
    """
    exact = exact_dtype(x)
    wide = _wide(x, exact)
    lo, hi = torch.aminmax(x)
    found = (lo, hi, wide.sum(), torch.linalg.vector_norm(wide), torch.count_nonzero(x))
    return torch.stack([s.to(exact) for s in found])


def exact_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype an accelerator's statistics are summed and read in (MPS has no float64)."""
    return torch.float32 if x.device.type == "mps" else torch.float64


def device_statistics(x: torch.Tensor, read: list[Any], zeros: bool) -> tuple[Any, ...]:
    """:func:`_statistics` of ``x`` on an accelerator from its :func:`device_reductions`,
    ``read`` (as Python numbers); NaN/Inf, and sums that overflow or cancel, are measured
    again on the device."""
    numel = x.numel()
    exact = exact_dtype(x)
    mn, mx, total, norm, nonzero = read
    n_zeros = numel - int(nonzero) if zeros else None
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return (*_nonfinite_statistics(_wide(x, exact), exact), n_zeros)
    mean, std = _mean_std(total, norm * norm, numel)
    absmax = max(abs(mn), abs(mx))
    if not (math.isfinite(mean) and math.isfinite(std or 0.0)):
        mean, std = _scaled_mean_std(_wide(x, exact), absmax, exact)  # the sums overflowed
    elif std is not None and mean * mean > 1e3 * std * std:
        mean, std = _centered_mean_std(_wide(x, exact), mean, exact)  # squares cancel
    return (mn, mx, mean, std, absmax, *_NO_NONFINITE, n_zeros)


def flat_measured(t: torch.Tensor) -> torch.Tensor:
    """``t`` as the statistics read it: detached (no autograd graph is built, no
    ``no_grad()`` needed), flat where its layout allows (:func:`flat_dense`), a bool
    tensor as its bytes (0 and 1: no copy)."""
    x = flat_dense(t.detach())
    return x.view(torch.uint8) if x.dtype == torch.bool else x


def flat_dense(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a flat tensor over the same memory when its layout allows (statistics do
    not depend on order, and reductions over permuted strides are slow); else a copy."""
    if x.is_contiguous():
        return x
    if permuted_dense(x):
        return x.as_strided((x.numel(),), (1,))
    return x.contiguous()  # overlapping or gapped (expand, slicing): copy once


def _read(exact: torch.dtype, *scalars: torch.Tensor) -> list[Any]:
    """Python numbers from 0-d tensors: plain reads on the CPU, one transfer elsewhere."""
    if scalars[0].device.type == "cpu":
        return [s.item() for s in scalars]
    return torch.stack([s.to(exact) for s in scalars]).tolist()


def _mean_std(total: float, squares: float, n: int) -> tuple[float, float | None]:
    """Mean and Bessel-corrected standard deviation from a sum and a sum of squares
    (``inf``/``nan`` when those overflowed: the caller then computes them exactly)."""
    mean = total / n
    if n < 2:
        return mean, None
    variance = (squares - n * mean * mean) / (n - 1)
    if math.isnan(variance):
        return mean, math.nan
    return mean, math.sqrt(max(variance, 0.0))


def _scaled_mean_std(
    wide: torch.Tensor, absmax: float, exact: torch.dtype
) -> tuple[float, float | None]:
    """Mean and std of values whose sums overflow ``wide``'s dtype, measured on the values
    scaled down by a power of two (exactly); float64 only if that still fails.

    >>> x = torch.full((100_000,), 3e34) + torch.arange(100_000.0) * 1e30
    >>> mean, std = _scaled_mean_std(x, float(x.abs().max()), torch.float64)
    >>> ref_std, ref_mean = torch.std_mean(x.double())
    >>> abs(mean / float(ref_mean) - 1) < 1e-6, abs(std / float(ref_std) - 1) < 1e-5
    (True, True)
    """
    n = wide.numel()
    # scaled down just enough that n squares fit: values that were small stay normal
    # (subnormal floats make every reduction many times slower)
    room = (math.frexp(torch.finfo(wide.dtype).max)[1] - 1 - n.bit_length()) // 2 - 1
    scale = 2.0 ** max(math.frexp(absmax)[1] - room, 0)
    scaled = wide * (1.0 / scale)
    total, norm = _read(exact, scaled.sum(), torch.linalg.vector_norm(scaled))
    mean, std = _mean_std(total, norm * norm, n)
    if std is not None and mean * mean > 1e3 * std * std:
        mean, std = _centered_mean_std(scaled, mean, exact)
    if not (math.isfinite(mean) and math.isfinite(std or 0.0)):
        return _exact_mean_std(wide, exact)
    return mean * scale, None if std is None else std * scale


def _centered_mean_std(
    wide: torch.Tensor, guess: float, exact: torch.dtype
) -> tuple[float, float | None]:
    """Mean and std measured around ``guess`` (a mean that may be off by rounding), in
    ``wide``'s own dtype, summed in ``exact``, without a float64 copy: ``x - guess`` is
    exact for the values near the mean (Sterbenz), and the corrected two-pass formula
    removes the guess's error. Falls back to :func:`_exact_mean_std` only if these sums
    overflow.

    >>> x = torch.full((1000,), 1e4) + torch.arange(1000) % 2 * 2.0 ** -10
    >>> mean, std = _centered_mean_std(x, 1e4, torch.float64)
    >>> mean == float(x.double().mean()), abs(std / float(x.double().std()) - 1) < 1e-6
    (True, True)
    """
    n = wide.numel()
    centered = wide - guess
    offset, norm = _read(
        exact, centered.sum(dtype=exact), torch.linalg.vector_norm(centered, dtype=exact)
    )
    shift = offset / n
    variance = (norm * norm - offset * shift) / (n - 1)
    if not (math.isfinite(shift) and math.isfinite(variance)):
        return _exact_mean_std(wide, exact)
    return guess + shift, math.sqrt(max(variance, 0.0))


def _exact_mean_std(x: torch.Tensor, exact: torch.dtype) -> tuple[float, float | None]:
    if x.numel() < 2:
        return float(x.to(exact).mean()), None
    std, mean = torch.std_mean(x.to(exact))
    return float(mean), float(std)


def _nonfinite_statistics(x: torch.Tensor, exact: torch.dtype) -> tuple[Any, ...]:
    """``(min, max, mean, std, absmax, nan, posinf, neginf)`` over the finite values.

    ``nan_to_num`` is far cheaper than boolean masks here: it zeroes the non-finite values
    for the sums and pushes them past every finite value for the min and max.
    """
    big = torch.finfo(x.dtype).max
    zeroed = torch.nan_to_num(x, 0.0, 0.0, 0.0)
    nan, posinf, neginf, lo, hi, total, norm = _read(
        exact,
        torch.count_nonzero(torch.isnan(x)),
        torch.count_nonzero(torch.isposinf(x)),
        torch.count_nonzero(torch.isneginf(x)),
        torch.nan_to_num(x, big, big, big).amin(),
        torch.nan_to_num(x, -big, -big, -big).amax(),
        zeroed.sum(),
        torch.linalg.vector_norm(zeroed),
    )
    n_finite = x.numel() - nan - posinf - neginf
    if n_finite == 0:
        return (None, None, None, None, None, nan, posinf, neginf)
    mean, std = _mean_std(total, norm * norm, n_finite)
    if not (math.isfinite(mean) and math.isfinite(std or 0.0)) or (
        std is not None and mean * mean > 1e3 * std * std
    ):
        mean, std = _exact_mean_std(x[torch.isfinite(x)], exact)
    return (lo, hi, mean, std, max(abs(lo), abs(hi)), nan, posinf, neginf)
