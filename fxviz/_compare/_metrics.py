"""How far one tensor is from another, in float64: the numbers behind ``fxviz.compare``.

``a`` is the reference. Errors are measured where both sides are finite; values that are
NaN or infinite on one side only are counted apart (they are a divergence of their own).

    >>> import torch
    >>> m = measure(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 4.5]))
    >>> round(m.max_abs_error, 3), round(m.max_rel_error, 3), round(m.sqnr_db, 1)
    (0.5, 0.125, 19.2)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import torch

from fxviz._record._moments import flat_dense, permuted_dense

__all__ = ["Metrics", "measure", "measure_statistics", "memory_key", "one_thread"]

_TINY = 1e-12  # relative errors divide by max(|a|, this)


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Errors of ``b`` against ``a`` over the values finite on both sides.

    Attributes:
        max_abs_error: ``max |a - b|``.
        max_rel_error: ``max |a - b| / max(|a|, 1e-12)``.
        cosine: cosine similarity of the two as flat vectors (1.0 when both are zero).
        sqnr_db: signal-to-quantization-noise ratio ``10 log10(Σa² / Σ(a-b)²)``, in dB
            (``inf`` when equal); 30 dB is about 3% relative error in L2.
        rmse: root of the mean squared error.
        rel_l2: ``‖a - b‖ / ‖a‖``.
        nonfinite_a / nonfinite_b: NaN and infinite values on each side.
        one_sided: positions that are NaN/Inf on one side only (or NaN against Inf).
        allclose: ``|a - b| <= atol + rtol |b|`` everywhere (NaN equal to NaN).
    """

    max_abs_error: float
    max_rel_error: float
    cosine: float
    sqnr_db: float
    rmse: float
    rel_l2: float
    nonfinite_a: int
    nonfinite_b: int
    one_sided: int
    allclose: bool


def measure(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    nonfinite: bool = True,
) -> Metrics:
    """Compare two tensors of the same shape in float64 (on ``x``'s device).

    ``nonfinite=False`` promises that neither holds NaN or Inf (known from the recorded
    statistics), which saves two passes. Complex tensors are compared as their (real,
    imaginary) pairs; a 0-d tensor as one value; empty tensors are equal.
    """
    x, y = x.detach(), y.detach().to(x.device)
    if x.is_complex() or y.is_complex():
        x, y = _as_real(x), _as_real(y)
    a, b = _flat(x, y)
    sums = _Sums(rtol, atol, nonfinite)
    step = a.numel() if a.device.type != "cpu" else _CHUNK  # on the CPU: chunks in cache
    for start in range(0, a.numel(), max(step, 1)):
        sums.add(a[start : start + step], b[start : start + step])
    n, sse, saa, sbb, sab = sums.count, sums.sse, sums.saa, sums.sbb, sums.sab
    if n == 0:
        return Metrics(
            *(0.0, 0.0, 1.0, math.inf, 0.0, 0.0),
            *(sums.nonfinite_a, sums.nonfinite_b, sums.one_sided, not sums.one_sided),
        )
    return Metrics(
        max_abs_error=sums.max_abs,
        max_rel_error=sums.max_rel,
        cosine=_cosine(sab, saa, sbb),
        sqnr_db=_sqnr(saa, sse),
        rmse=math.sqrt(sse / n),
        rel_l2=math.sqrt(sse / saa) if saa else (0.0 if sse == 0 else math.inf),
        nonfinite_a=sums.nonfinite_a,
        nonfinite_b=sums.nonfinite_b,
        one_sided=sums.one_sided,
        allclose=sums.one_sided == 0 and sums.allclose,
    )


def measure_statistics(sa: Any, sb: Any, *, rtol: float = 1e-5, atol: float = 1e-6) -> Metrics:
    """Compare two recorded :class:`~fxviz.TensorSummary` by their statistics alone (the
    values were not kept): min, max, mean, std and absmax as one vector each, NaN/Inf by
    their counts (``one_sided`` is how many more one side holds, a lower bound)."""
    keys = [k for k in _STATISTICS if getattr(sa, k) is not None and getattr(sb, k) is not None]
    a = torch.tensor([float(getattr(sa, k)) for k in keys], dtype=torch.float64)
    b = torch.tensor([float(getattr(sb, k)) for k in keys], dtype=torch.float64)
    m = measure(a, b, rtol=rtol, atol=atol)
    bad_a, bad_b = sa.nonfinite_count, sb.nonfinite_count
    return dataclasses.replace(
        m,
        nonfinite_a=bad_a,
        nonfinite_b=bad_b,
        one_sided=abs(bad_a - bad_b),
        allclose=m.allclose and bad_a == bad_b,
    )


_STATISTICS = ("min", "max", "mean", "std", "absmax")


def _as_real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its (real, imaginary) pairs; a real one with zero imaginary parts."""
    if not t.is_complex():
        t = t.to(torch.complex128 if t.dtype == torch.float64 else torch.complex64)
    return torch.view_as_real(t.resolve_conj().resolve_neg())


def _flat(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both as 1-d tensors whose elements correspond: over their own memory, without a
    copy, when they share a dense layout (a transposed view in both runs), else copied in
    logical order."""
    if a.dim() == 0 or b.dim() == 0:  # one value: nothing to slice over
        return a.reshape(1), b.reshape(1)
    if a.stride() == b.stride():
        return flat_dense(a), flat_dense(b)
    return a.reshape(-1), b.reshape(-1)


_CHUNK = 1 << 15  # float64 elements: arrays of 256 KiB that stay in cache; at or below
# ATen's grain size, so no chunk pays for waking intra-op threads


class _Sums:
    """Running sums, counts and maxima over chunks, each chunk widened to float64 once."""

    def __init__(self, rtol: float, atol: float, nonfinite: bool) -> None:
        self.rtol, self.atol, self.nonfinite = rtol, atol, nonfinite
        self.sse = self.saa = self.sbb = self.sab = 0.0
        self.max_abs = self.max_rel = 0.0
        self.count = self.nonfinite_a = self.nonfinite_b = self.one_sided = 0
        self.allclose = True

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        a, b = x.to(torch.float64), y.to(torch.float64)
        if self.nonfinite:
            a, b = self._finite(a, b)
        if a.numel() == 0:
            return
        self.count += a.numel()
        error = a - b
        # ATen's vectorized norms, not BLAS dot products: BLAS wakes its own threads for
        # every call, which costs more than the sums on a busy machine
        saa = float(torch.linalg.vector_norm(a)) ** 2
        sbb = float(torch.linalg.vector_norm(b)) ** 2
        sse = float(torch.linalg.vector_norm(error)) ** 2
        self.saa += saa
        self.sbb += sbb
        self.sse += sse
        self.sab += (saa + sbb - sse) / 2  # Σab from ‖a‖² + ‖b‖² - ‖a - b‖²
        error.abs_()
        largest = float(error.max())
        self.max_abs = max(self.max_abs, largest)
        if self.allclose and largest > self.atol:  # else every |a - b| <= atol: close
            bound = b.abs_()
            if largest > self.atol + self.rtol * float(bound.max()):
                self.allclose = False  # even the loosest bound is broken
            else:
                self.allclose = bool((error <= bound.mul_(self.rtol).add_(self.atol)).all())
        self.max_rel = max(self.max_rel, float(error.div_(a.abs_().clamp_min_(_TINY)).max()))

    def _finite(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The positions finite on both sides; counts the others."""
        finite_a, finite_b = torch.isfinite(a), torch.isfinite(b)
        bad_a = a.numel() - int(finite_a.sum())
        bad_b = b.numel() - int(finite_b.sum())
        if not (bad_a or bad_b):
            return a, b
        self.nonfinite_a += bad_a
        self.nonfinite_b += bad_b
        both = finite_a & finite_b
        neither = ~(finite_a | finite_b)
        same_kind = (a == b) | (torch.isnan(a) & torch.isnan(b))
        self.one_sided += int((~both & ~(neither & same_kind)).sum())
        return a[both], b[both]


def _cosine(sab: float, saa: float, sbb: float) -> float:
    if saa == 0 and sbb == 0:
        return 1.0
    if saa == 0 or sbb == 0:
        return 0.0
    return max(-1.0, min(1.0, sab / math.sqrt(saa * sbb)))


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Measure with one intra-op thread: the metrics run in cache-sized chunks, for which
    waking a thread pool costs more than it saves (ten times more on a busy machine)."""
    threads = torch.get_num_threads()
    if threads > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if threads > 1:
            torch.set_num_threads(threads)


def memory_key(x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...] | None:
    """What the metrics of ``x`` against ``y`` depend on when both are dense views of the
    same layout (``view``, ``transpose``... of values already measured): the memory they
    cover, element for element, and their dtypes. ``None`` when that is not the case."""
    if x.stride() != y.stride() or x.device != y.device:
        return None
    spans = []
    for t in (x, y):
        if not permuted_dense(t):
            return None
        spans.append((t.untyped_storage().data_ptr(), t.storage_offset(), t.numel(), t.dtype))
    return (*spans, x.device)
