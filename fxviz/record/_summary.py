"""Summaries of the tensors a node produced: shape, dtype, layout and statistics.

Statistics are taken when the node runs, in three reductions (``aminmax``,
``std_mean``, ``count_nonzero``) read back in one transfer; NaN/Inf are counted
only when the min/max show that some exist.

    >>> import torch
    >>> (s,) = summarize(torch.tensor([[0.0, 2.0], [4.0, float("nan")]]))
    >>> s.shape, s.min, s.max, s.nan, s.zeros
    ((2, 2), 0.0, 4.0, 1, 1)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["TensorSummary", "iter_tensors", "summarize"]

_STATS_TYPES = (torch.Tensor, torch.nn.Parameter)


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSummary:
    """One tensor a node produced, as it was when the node ran.

    ``path`` says where the tensor sits in the node's output (``""`` for a bare tensor,
    ``"[0]"``, ``"['logits']"``). Statistics are ``None`` when they were not taken (stats
    off, an empty, complex, sparse, meta or fake tensor). ``min``/``max``/``mean``/``std``/
    ``absmax`` cover the finite values; ``nan``/``posinf``/``neginf`` count the others.
    ``std`` is ``torch.std``'s (Bessel-corrected) standard deviation.
    """

    path: str
    shape: tuple[int | str, ...]
    dtype: torch.dtype
    device: str
    stride: tuple[int, ...] | None
    requires_grad: bool
    numel: int
    nbytes: int
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    absmax: float | None = None
    nan: int | None = None
    posinf: int | None = None
    neginf: int | None = None
    zeros: int | None = None

    @property
    def nonfinite(self) -> int:
        """How many values are NaN or infinite (0 when unknown)."""
        return (self.nan or 0) + (self.posinf or 0) + (self.neginf or 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (dtype as ``"float32"``, NaN statistics as ``None``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["dtype"] = dtype_name(self.dtype)
        out["shape"] = list(self.shape)
        out["stride"] = None if self.stride is None else list(self.stride)
        for key in ("min", "max", "mean", "std", "absmax"):
            if out[key] is not None and not math.isfinite(out[key]):
                out[key] = None
        return out


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def iter_tensors(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in ``value`` (nested tuples, lists, dicts) with its path."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from iter_tensors(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_tensors(item, f"{path}[{key!r}]")


def summarize(value: Any, stats: bool = True) -> tuple[TensorSummary, ...]:
    """One :class:`TensorSummary` per tensor in ``value``, in order."""
    return tuple(_summarize_tensor(path, t, stats) for path, t in iter_tensors(value))


def _summarize_tensor(path: str, t: torch.Tensor, stats: bool) -> TensorSummary:
    numel = t.numel()
    strided = t.layout == torch.strided
    measured = (
        stats
        and strided
        and numel != 0
        and type(t) in _STATS_TYPES
        and not (t.is_meta or t.is_complex() or t.is_quantized)
    )
    return TensorSummary(
        path=path,
        shape=tuple(d if isinstance(d, int) else str(d) for d in t.shape),
        dtype=t.dtype,
        device=str(t.device),
        stride=tuple(t.stride()) if strided else None,
        requires_grad=t.requires_grad,
        numel=numel if isinstance(numel, int) else -1,
        nbytes=numel * t.element_size() if isinstance(numel, int) else -1,
        **(_statistics(t) if measured else {}),
    )


@torch.no_grad()
def _statistics(t: torch.Tensor) -> dict[str, Any]:
    x = t.detach()
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    exact = torch.float32 if x.device.type == "mps" else torch.float64
    lo, hi = torch.aminmax(x)
    if x.is_floating_point():
        wide = x if x.element_size() >= 4 else x.to(torch.float32)
    else:
        wide = x.to(exact)
    std, mean = torch.std_mean(wide, correction=1 if x.numel() > 1 else 0)
    nonzero = torch.count_nonzero(x)
    mn, mx, avg, sd, nz = torch.stack(
        [lo.to(exact), hi.to(exact), mean.to(exact), std.to(exact), nonzero.to(exact)]
    ).tolist()
    numel = x.numel()
    out: dict[str, Any] = {"zeros": numel - int(nz), "nan": 0, "posinf": 0, "neginf": 0}
    if not (math.isfinite(mn) and math.isfinite(mx)):
        nan = int(torch.isnan(x).sum())
        posinf = int(torch.isposinf(x).sum())
        neginf = int(torch.isneginf(x).sum())
        out.update(nan=nan, posinf=posinf, neginf=neginf)
        finite = wide[torch.isfinite(wide)]
        if finite.numel() == 0:
            out.update(min=None, max=None, mean=None, std=None, absmax=None)
            return out
        lo, hi = torch.aminmax(finite)
        std, mean = torch.std_mean(finite, correction=1 if finite.numel() > 1 else 0)
        mn, mx, avg, sd = torch.stack([lo, hi, mean, std]).to(exact).tolist()
        numel = finite.numel()
    out.update(min=mn, max=mx, mean=avg, std=sd if numel > 1 else None, absmax=max(-mn, mx))
    return out
