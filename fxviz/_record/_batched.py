"""The statistics of many tensors at once: for each, the very numbers
:func:`~fxviz._record._moments._statistics` gives it alone. Small float32 CPU tensors
share their reductions (:func:`batched_statistics`); tensors on an accelerator are read in
one transfer (:func:`device_batch_statistics`).

Reading the records of a whole run (a table, the widget, a report) measures every node's
output, and many outputs of a model are small: there the six or seven reductions a tensor
takes cost more in calls than in arithmetic (~1 µs a call, against ~0.2 ns a value).
Tensors of one shape are copied as the rows of a buffer of about 1 MiB (the one read of
their memory; every later reduction reads the cached buffer), and each reduction runs once
for all the rows: up to a few thousand values a tensor this halves the cost; at 2**14
values about a third (10 against 15 µs). Nothing changes in the numbers: min, max and the zero
counts are exact, and torch reduces a contiguous row in the order it reduces the flat
tensor (the sums of ``_block_sums`` rely on that too; so does the zero, ``-0.0`` or
``0.0``, that ``amin``/``amax`` pick: a zero min or max of a row is read again only where
the tensor alone takes ``aminmax``, see ``rows_pick_own_zeros``).
Rows hold at most :data:`GRAIN` values: past that, torch splits one tensor's sum among
threads, in an order a row's sum does not follow.

    >>> import torch
    >>> from fxviz._record._moments import _statistics
    >>> xs = [torch.randn(64, 32).relu() for _ in range(3)]
    >>> batched_statistics(xs) == [_statistics(x) for x in xs]
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from fxviz._record._moments import (
    device_reductions,
    device_statistics,
    finite_statistics,
    flat_measured,
    rows_pick_own_zeros,
    shared_sum_dtypes,
    small_range,
    sum_dtypes,
)
from fxviz._torch_compat import functorch_unwrapped

__all__ = [
    "GRAIN",
    "batchable",
    "batched_statistics",
    "device_batch_statistics",
    "read_device_statistics",
    "start_device_statistics",
]

# at::internal::GRAIN_SIZE: torch reduces a tensor of at most this many values on one
# thread, so its sums are a row's, whatever the number of threads
GRAIN = 1 << 15
_BUFFER_VALUES = 1 << 18  # rows of a stack: about 1 MiB of float32 (stays in the cache)


def batchable(t: torch.Tensor) -> bool:
    """Whether :func:`batched_statistics` measures ``t`` (else it gives ``None`` for it):
    a plain, contiguous float32 CPU tensor of 1 to :data:`GRAIN` values."""
    return (  # the size first: most tensors of a big model are past a grain
        type(t) is torch.Tensor
        and 0 < t.numel() <= GRAIN
        and t.dtype == torch.float32
        and t.is_cpu
        and t.layout == torch.strided
        and t.is_contiguous()
        and functorch_unwrapped(t) is t
    )


def batched_statistics(tensors: Sequence[torch.Tensor]) -> list[tuple[Any, ...] | None]:
    """``_statistics(t)`` of each tensor, measured together where they share a shape;
    ``None`` for a tensor left to ``_statistics`` itself (not :func:`batchable`, alone of
    its shape, or holding a NaN or an infinity)."""
    found: list[tuple[Any, ...] | None] = [None] * len(tensors)
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(tensors):
        if batchable(t):
            by_shape.setdefault(tuple(t.shape), []).append(i)
    with torch.no_grad():  # stacked without autograd's record of it
        for shape, members in by_shape.items():
            if len(members) < 2:
                continue
            n = math.prod(shape)
            rows = max(2, _BUFFER_VALUES // n)
            buffer = torch.empty((min(rows, len(members)), *shape))
            mask = torch.empty((buffer.shape[0], n), dtype=torch.bool)
            for start in range(0, len(members), rows):
                part = members[start : start + rows]
                if len(part) < 2:  # a last stack of one: nothing to share
                    break
                values = [tensors[i] for i in part]
                stacked = torch.stack(values, out=buffer[: len(part)]).view(len(part), n)
                results = _rows_statistics(stacked, values, n, mask[: len(part)])
                for i, stats in zip(part, results, strict=True):
                    found[i] = stats
    return found


def _rows_statistics(
    rows: torch.Tensor, values: list[torch.Tensor], n: int, mask: torch.Tensor
) -> list[tuple[Any, ...] | None]:
    """The statistics of each of ``values`` (``rows``: them, a row each, of ``n`` values;
    ``mask``: room for as many bools), one call a reduction for all; ``None`` for a
    tensor with a NaN or an infinity (left to the general path)."""
    lows, highs = rows.amin(1).tolist(), rows.amax(1).tolist()
    if math.isfinite(sum(lows) + sum(highs)):  # every row finite (the common case)
        finite = range(len(values))
    else:  # or a sum past float32: then look at each row
        finite = [
            i
            for i, (lo, hi) in enumerate(zip(lows, highs, strict=True))
            if math.isfinite(lo) and math.isfinite(hi)
        ]
    # sums accumulated as _sums takes them: in float32, or in float64 past what it holds
    absmaxes = [max(abs(lows[i]), abs(highs[i])) for i in finite]
    totals, norms = [0.0] * len(values), [0.0] * len(values)
    shared = shared_sum_dtypes(absmaxes, n) if len(finite) == len(values) else None
    if shared is not None:
        by_dtypes = {shared: list(finite)}
    else:
        by_dtypes = {}
        for i, absmax in zip(finite, absmaxes, strict=True):
            by_dtypes.setdefault(sum_dtypes(absmax, n), []).append(i)
    for (sum_dtype, norm_dtype), members in by_dtypes.items():
        some = rows if len(members) == len(values) else rows[members]
        for i, total, norm in zip(
            members,
            some.sum(1, dtype=sum_dtype).tolist(),
            torch.linalg.vector_norm(some, dim=1, dtype=norm_dtype).tolist(),
            strict=True,
        ):
            totals[i], norms[i] = total, norm
    counts = None
    if any(lows[i] <= 0 <= highs[i] for i in finite):
        counts = mask.copy_(rows).numpy()  # as bool(): NaN counts, -0.0 does not
    reread = not rows_pick_own_zeros(n)
    out: list[tuple[Any, ...] | None] = [None] * len(values)
    for i in finite:
        mn, mx = lows[i], highs[i]
        if reread and (mn == 0 or mx == 0):  # which zero (-0.0, 0.0): the one of the
            mn, mx = small_range(rows[i], n)  # tensor's own reductions (its row: the same)
        norm = norms[i]
        # counted only where the range holds 0 (else every value is nonzero)
        if counts is None or mn > 0 or mx < 0:
            nonzero = n
        else:
            nonzero = int(np.count_nonzero(counts[i]))
        out[i] = finite_statistics(values[i], n, mn, mx, totals[i], norm * norm, nonzero)
    return out


def device_batch_statistics(tensors: Sequence[torch.Tensor]) -> list[tuple[Any, ...] | None]:
    """``_statistics(t)`` of each tensor on an accelerator, every tensor's reductions
    started on the device and read in one transfer a device: one host sync for them all,
    where one each would stall the device's queue once a tensor. ``None`` for a tensor
    whose dtype the reductions refuse (``summarize_tensor`` widens it).

    >>> xs = [torch.tensor([1.0, -2.0]), torch.arange(4)]
    >>> [s[:2] for s in device_batch_statistics(xs)]  # any device: here the CPU
    [(-2.0, 1.0), (0.0, 3.0)]
    """
    return read_device_statistics([start_device_statistics(t) for t in tensors])


def start_device_statistics(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The reductions of ``t`` on its device, started and not read (no host sync): what
    :func:`read_device_statistics` reads, with the tensor they reduce (its statistics are
    the values as they were now: the device runs them before any later write). ``None``
    where the reductions refuse its dtype (float8, uint16...)."""
    x = flat_measured(t)
    try:
        return x, device_reductions(x)
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def read_device_statistics(
    started: Sequence[tuple[torch.Tensor, torch.Tensor] | None],
) -> list[tuple[Any, ...] | None]:
    """The statistics of each tensor whose reductions :func:`start_device_statistics`
    started, read in one transfer a device (``None`` stays ``None``)."""
    by_device: dict[torch.device, list[tuple[int, torch.Tensor, torch.Tensor]]] = {}
    for i, pair in enumerate(started):
        if pair is not None:
            by_device.setdefault(pair[0].device, []).append((i, *pair))
    found: list[tuple[Any, ...] | None] = [None] * len(started)
    for group in by_device.values():
        read = torch.cat([reductions for _, _, reductions in group]).tolist()
        for k, (i, x, _) in enumerate(group):
            found[i] = device_statistics(x, read[5 * k : 5 * k + 5], True)
    return found
