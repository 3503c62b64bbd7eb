"""How far one tensor is from another, in float64: the numbers behind ``fxviz.compare``.

``a`` is the reference. Errors are measured where both sides are finite; values that are
NaN or infinite on one side only are counted apart (they are a divergence of their own).

    >>> import torch
    >>> m = measure(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 4.5]))
    >>> round(m.max_abs_error, 3), round(m.max_rel_error, 3), round(m.sqnr_db, 1)
    (0.5, 0.125, 19.2)
"""

from __future__ import annotations

import dataclasses
import math

import torch

__all__ = ["Metrics", "measure"]

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
    statistics), which saves two passes.
    """
    a = x.detach().reshape(-1)
    b = y.detach().to(a.device).reshape(-1)
    nonfinite_a = nonfinite_b = one_sided = 0
    if nonfinite:
        a, b = a.to(torch.float64), b.to(torch.float64)
        finite_a, finite_b = torch.isfinite(a), torch.isfinite(b)
        nonfinite_a = a.numel() - int(finite_a.sum())
        nonfinite_b = b.numel() - int(finite_b.sum())
        if nonfinite_a or nonfinite_b:
            both = finite_a & finite_b
            neither = ~(finite_a | finite_b)
            same_kind = (a == b) | (torch.isnan(a) & torch.isnan(b))
            one_sided = int((~both & ~(neither & same_kind)).sum())
            a, b = a[both], b[both]
    n = a.numel()
    if n == 0:
        return Metrics(
            0.0, 0.0, 1.0, math.inf, 0.0, 0.0, nonfinite_a, nonfinite_b, one_sided, not one_sided
        )
    sums = _Sums()
    step = n if a.device.type != "cpu" else _CHUNK  # on the CPU: chunks that stay in cache
    for start in range(0, n, step):
        sums.add(a[start : start + step], b[start : start + step], rtol, atol)
    sse, saa, sbb, sab = sums.sse, sums.saa, sums.sbb, sums.sab
    return Metrics(
        max_abs_error=sums.max_abs,
        max_rel_error=sums.max_rel,
        cosine=_cosine(sab, saa, sbb),
        sqnr_db=_sqnr(saa, sse),
        rmse=math.sqrt(sse / n),
        rel_l2=math.sqrt(sse / saa) if saa else (0.0 if sse == 0 else math.inf),
        nonfinite_a=nonfinite_a,
        nonfinite_b=nonfinite_b,
        one_sided=one_sided,
        allclose=one_sided == 0 and sums.allclose,
    )


_CHUNK = 1 << 15  # float64 elements: arrays of 256 KiB that stay in cache; at or below
# ATen's grain size, so no chunk pays for waking intra-op threads


class _Sums:
    """Running sums and maxima over chunks, each chunk widened to float64 once."""

    def __init__(self) -> None:
        self.sse = self.saa = self.sbb = self.sab = 0.0
        self.max_abs = self.max_rel = 0.0
        self.allclose = True

    def add(self, x: torch.Tensor, y: torch.Tensor, rtol: float, atol: float) -> None:
        a, b = x.to(torch.float64), y.to(torch.float64)
        error = a - b
        # torch.inner reaches BLAS's dot product, several times faster than torch.dot here
        self.saa += float(torch.inner(a, a))
        self.sab += float(torch.inner(a, b))
        self.sbb += float(torch.inner(b, b))
        self.sse += float(torch.inner(error, error))
        error.abs_()
        self.max_abs = max(self.max_abs, float(error.max()))
        if self.allclose:
            self.allclose = bool((error <= b.abs_().mul_(rtol).add_(atol)).all())
        self.max_rel = max(self.max_rel, float(error.div_(a.abs_().clamp_min_(_TINY)).max()))


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
