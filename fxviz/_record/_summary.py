"""Summaries of the tensors a node produced: shape, dtype, layout and statistics.

Statistics (see :mod:`fxviz._record._moments`) are taken when the node runs.

    >>> import torch
    >>> (s,) = summarize(torch.tensor([[0.0, 2.0], [4.0, float("nan")]]))
    >>> s.shape, s.min, s.max, s.nan, s.zeros
    ((2, 2), 0.0, 4.0, 1, 1)
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from fxviz._record._batched import batched_statistics, device_batch_statistics
from fxviz._record._frozen import positional_constructor
from fxviz._record._moments import _statistics
from fxviz._torch_compat import functorch_unwrapped, stored_values

__all__ = [
    "TensorSummary",
    "iter_tensors",
    "measured_on_device",
    "summarize",
    "summarize_many",
    "summarize_tensor",
    "with_statistics",
]

_STATS_TYPES = (torch.Tensor, torch.nn.Parameter)


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSummary:
    """One tensor a node produced, as it was when the node ran.

    ``path`` says where the tensor sits in the node's output (``""`` for a bare tensor,
    ``"[0]"``, ``"['logits']"``). Statistics are ``None`` when they were not taken (stats
    off, an empty, complex, sparse, meta or fake tensor). ``min``/``max``/``mean``/``std``/
    ``absmax`` cover the finite values; ``nan``/``posinf``/``neginf`` count the others.
    ``std`` is ``torch.std``'s (Bessel-corrected) standard deviation.

    Examples:
        >>> import torch, fxviz
        >>> s = fxviz.record(lambda x: x.log(), torch.tensor([1.0, 0.0, -1.0]))["log"].outputs[0]
        >>> s.shape, s.max, (s.nan, s.neginf), s.nonfinite_count
        ((3,), 0.0, (1, 1), 2)
    """

    path: str
    shape: tuple[int | str, ...]
    dtype: torch.dtype
    device: str
    stride: tuple[int | str, ...] | None
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

    def relaid(
        self, path: str, shape: tuple[int, ...], stride: tuple[int, ...], requires_grad: bool
    ) -> TensorSummary:
        """The summary of the same elements at another ``path`` and layout (a view of
        them): ``dataclasses.replace`` of those four fields, for a tenth of its cost.

        >>> s = summarize(torch.arange(6.0).reshape(2, 3))[0]
        >>> s.relaid("[0]", (3, 2), (1, 3), False) == dataclasses.replace(
        ...     s, path="[0]", shape=(3, 2), stride=(1, 3), requires_grad=False)
        True
        """
        values = list(_FIELD_VALUES(self))
        values[0], values[1], values[4], values[5] = path, shape, stride, requires_grad
        return _new_summary(*values)

    @property
    def nonfinite_count(self) -> int:
        """How many values are NaN or infinite (0 when unknown)."""
        return (self.nan or 0) + (self.posinf or 0) + (self.neginf or 0)

    @property
    def nonfinite(self) -> int:
        """Deprecated name of :attr:`nonfinite_count`."""
        from fxviz.errors import warn_deprecated

        warn_deprecated("TensorSummary.nonfinite", "TensorSummary.nonfinite_count")
        return self.nonfinite_count

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


_FIELDS = tuple(f.name for f in dataclasses.fields(TensorSummary))
_FIELD_VALUES = operator.attrgetter(*_FIELDS)  # every field's value, in order
assert _FIELDS[:6] == ("path", "shape", "dtype", "device", "stride", "requires_grad")
_new_summary = positional_constructor(TensorSummary)  # every field given: half the cost


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
    return tuple(summarize_tensor(path, t, stats) for path, t in iter_tensors(value))


def summarize_tensor(path: str, t: torch.Tensor, stats: bool) -> TensorSummary:
    """The :class:`TensorSummary` of one tensor at ``path`` (what :func:`summarize` makes
    of each tensor in a value)."""
    t = functorch_unwrapped(t)  # a vmap'd value: what it holds, its batch dimension too
    # Nothing here may guard on a size: a fake tensor's sizes can be unbacked symbols
    # (``u0`` after ``nonzero``), and comparing one raises GuardOnDataDependentSymNode.
    # Only plain tensors (whose sizes are ints) are measured; the rest keep their
    # shape, dtype and symbolic sizes as text.
    plain = type(t) in _STATS_TYPES
    strided = t.layout == torch.strided
    numel = t.numel()
    measured = stats and plain and _measurable(t, strided, numel)
    if stats and plain and not strided and isinstance(numel, int) and numel and not t.is_meta:
        return _described(path, t, plain, strided, numel, _sparse_statistics(t))
    return _described(path, t, plain, strided, numel, _measure(t) if measured else ())


def _measurable(t: torch.Tensor, strided: bool, numel: Any) -> bool:
    """Whether the values of a plain tensor (``strided``, of ``numel`` values) can be
    measured: of known, nonzero size, real, with memory."""
    return (
        strided
        and isinstance(numel, int)
        and numel != 0
        and not (t.is_meta or t.is_complex() or t.is_quantized)
    )


def summarize_many(tensors: Sequence[torch.Tensor]) -> list[TensorSummary | None]:
    """``summarize_tensor("", t, True)`` of each tensor, the small float32 ones of one size
    measured together, those on an accelerator read in one transfer
    (:mod:`fxviz._record._batched`: the same numbers); ``None`` for those left to
    :func:`summarize_tensor`."""
    out: list[TensorSummary | None] = []
    # what batched_statistics measures is contiguous float32 on the CPU: its layout
    # fields are those of its shape and strides (a contiguous tensor with a dim of size 1
    # may have any stride there: a (1, 1) view of a (1, 2) tensor has (2, 1)), taken once
    layouts: dict[tuple[torch.Size, tuple[int, ...]], tuple[Any, ...]] = {}
    for t, found in zip(tensors, _statistics_many(tensors), strict=True):
        if found is None:
            out.append(None)
            continue
        if not t.is_cpu:
            out.append(_described("", t, True, True, t.numel(), found))
            continue
        key = (t.shape, t.stride())
        layout = layouts.get(key)
        if layout is None:
            n = t.numel()
            layout = (tuple(t.shape), t.dtype, str(t.device), key[1], n, n * t.element_size())
            layouts[key] = layout
        shape, dtype, device, stride, numel, nbytes = layout
        out.append(
            _new_summary("", shape, dtype, device, stride, t.requires_grad, numel, nbytes, *found)
        )
    return out


def _statistics_many(tensors: Sequence[torch.Tensor]) -> list[tuple[Any, ...] | None]:
    """The statistics of each tensor that can be measured with others: small float32 CPU
    tensors of one shape together, those on an accelerator read in one transfer."""
    found = batched_statistics(tensors)
    on_device = [i for i, t in enumerate(tensors) if measured_on_device(t)]
    if on_device:
        measured = device_batch_statistics([tensors[i] for i in on_device])
        for i, stats in zip(on_device, measured, strict=True):
            found[i] = stats
    return found


def with_statistics(summary: TensorSummary, statistics: tuple[Any, ...]) -> TensorSummary:
    """``summary`` (of a plain dense tensor, statistics not taken) with the ``statistics``
    measured since (later, or together with other tensors'): what :func:`summarize_tensor`
    gives the tensor.

    >>> from fxviz._record._moments import _statistics
    >>> t = torch.arange(4.0)
    >>> unmeasured = summarize_tensor("", t, False)
    >>> with_statistics(unmeasured, _statistics(t)) == summarize_tensor("", t, True)
    True
    """
    return _new_summary(*_FIELD_VALUES(summary)[:8], *statistics)


def measured_on_device(t: torch.Tensor) -> bool:
    """Whether ``t`` is a plain tensor with values on an accelerator, measured there
    (``fxviz._record._batched``'s device path)."""
    return (
        not t.is_cpu
        and type(t) in _STATS_TYPES
        and functorch_unwrapped(t) is t
        and _measurable(t, t.layout == torch.strided, t.numel())
    )


def _described(
    path: str, t: torch.Tensor, plain: bool, strided: bool, numel: Any, statistics: tuple[Any, ...]
) -> TensorSummary:
    """The summary of ``t`` with its ``statistics`` (``()``: none taken)."""
    known = isinstance(numel, int)
    return (_new_summary if statistics else TensorSummary)(
        path,
        tuple(t.shape) if plain else tuple(_dim(d) for d in t.shape),
        t.dtype,
        str(t.device),
        (t.stride() if plain else tuple(_dim(s) for s in t.stride())) if strided else None,
        t.requires_grad,
        numel if known else -1,
        numel * t.element_size() if known else -1,
        *statistics,
    )


def _measure(t: torch.Tensor) -> tuple[Any, ...]:
    """Statistics, widening dtypes the reductions do not support (float8, uint16...);
    none at all rather than a failed run."""
    try:
        return _statistics(t)
    except (RuntimeError, NotImplementedError, TypeError):
        pass
    try:
        return _statistics(t.detach().to(torch.float32 if t.is_floating_point() else torch.float64))
    except (RuntimeError, NotImplementedError, TypeError):
        return ()


def _sparse_statistics(t: torch.Tensor) -> tuple[Any, ...]:
    """The statistics of a sparse tensor, its implicit zeros counted, from those of the
    values it stores (none for a layout that stores none, or a complex one).

    >>> s = torch.sparse_coo_tensor([[1, 3]], [2.0, 4.0], (4,))  # [0, 2, 0, 4]
    >>> low, high, mean, std, absmax, nan, posinf, neginf, zeros = _sparse_statistics(s)
    >>> low, high, mean, round(std, 4), zeros
    (0.0, 4.0, 1.5, 1.9149, 2)
    """
    stored = stored_values(t.detach())
    if stored is None or stored.is_complex():
        return ()
    found = _measure(stored) if stored.numel() else (None,) * 5 + (0, 0, 0, 0)
    implicit = t.numel() - stored.numel()
    if not found or implicit == 0:
        return found
    low, high, _, _, absmax, nan, posinf, neginf, zeros = found
    zero = 0.0 if stored.is_floating_point() else 0  # the type the dense tensor's give
    if low is None or high is None:  # no finite value stored
        low, high = zero, zero
    else:
        low, high = min(low, zero), max(high, zero)
    mean, std = _with_zeros(stored, absmax or 0.0, implicit)
    return (low, high, mean, std, max(abs(low), abs(high)), nan, posinf, neginf, zeros + implicit)


def _with_zeros(stored: torch.Tensor, absmax: float, zeros: int) -> tuple[float, float | None]:
    """Mean and std of the finite ``stored`` values and ``zeros`` more zeros, in float64,
    two passes over the values scaled by a power of two (no overflow, no cancellation)."""
    x = stored.detach().reshape(-1).to(torch.float64)
    x = x[torch.isfinite(x)]
    n = x.numel() + zeros
    scale = 2.0 ** math.frexp(absmax)[1] if absmax > 0 else 1.0
    x = x / scale
    mean = float(x.sum()) / n
    spread = float((x - mean).square().sum()) + zeros * mean * mean
    std = math.sqrt(spread / (n - 1)) * scale if n > 1 else None
    return mean * scale, std


def _dim(size: Any) -> int | str:
    """A size as an int, or as text when it is symbolic (``s0``, ``2*s0``)."""
    return size if isinstance(size, int) else str(size)
