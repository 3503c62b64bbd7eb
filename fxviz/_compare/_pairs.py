"""The numbers of the comparison engine: each aligned pair measured, or said why not.

Structure comes from :func:`fxviz.render._align.align` (one alignment for ``diff``,
``compare`` and ``shapes_diff``); every pair of values is measured here, in float64
(:mod:`fxviz._compare._metrics`), and judged by one :class:`Criterion`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from fxviz._compare._metrics import Metrics, measure, measure_statistics, memory_key, one_thread
from fxviz._compare._thresholds import Criterion
from fxviz._record._records import NodeRecord, unwritten_memory
from fxviz._torch_compat import stored_values

__all__ = ["NodeComparison", "measure_pairs"]


@dataclasses.dataclass(frozen=True)
class NodeComparison:
    """One aligned pair of nodes and how far ``b``'s value is from ``a``'s.

    ``status`` is the structural status from the alignment (``same``, ``changed``,
    ``replaced``, ``added``, ``removed``, ``inlined``). ``measured_on`` says what was
    measured: ``"values"`` (the first output tensor, or a plain Python value compared for
    equality), ``"statistics"`` (the values were not kept: min, max, mean, std and absmax
    compared instead) or ``""`` (not measured; ``reason`` says why). ``metrics`` holds the
    numbers where tensors or statistics were measured; ``diverged`` says whether the pair
    fails the comparison's criterion, and ``reason`` why. A node a pass inserted is
    measured against the value it displaced (``reason`` names it).
    """

    a: str | None
    b: str | None
    status: str
    op: str
    target: str
    shape_a: tuple[int | str, ...] | None
    shape_b: tuple[int | str, ...] | None
    dtype_a: torch.dtype | None
    dtype_b: torch.dtype | None
    metrics: Metrics | None
    diverged: bool
    reason: str = ""
    measured_on: str = ""

    @property
    def name(self) -> str:
        """The node's name in ``b`` (in ``a`` when ``b`` has no counterpart)."""
        return self.b or self.a or ""

    @property
    def measured(self) -> bool:
        """Whether values or statistics of the pair were measured."""
        return bool(self.measured_on)

    def __getattr__(self, key: str) -> Any:  # row.sqnr_db, row.cosine... from the metrics
        if key in _METRIC_FIELDS:
            metrics = object.__getattribute__(self, "metrics")
            return None if metrics is None else getattr(metrics, key)
        raise AttributeError(key)


_METRIC_FIELDS = {f.name for f in dataclasses.fields(Metrics)}
_DENSE_MAX = 1 << 24  # values of a sparse pair made dense to compare (128 MiB of float64)


def measure_pairs(aligned: list[Any], criterion: Criterion) -> list[NodeComparison]:
    """One :class:`NodeComparison` per aligned pair (``render._align.Pair``) of drawn nodes
    whose ``record`` is the node's NodeRecord."""
    measured: dict[tuple[Any, ...], Metrics] = {}  # views of measured memory: same numbers
    # per side: record -> the target that allocated the unwritten memory it holds
    fresh = _unwritten(aligned, ("before", "reference")) | _unwritten(aligned, ("after",))
    with one_thread():
        return [_pair(p, criterion, measured, fresh) for p in aligned]


def _unwritten(aligned: list[Any], sides: tuple[str, ...]) -> dict[int, str]:
    """``id`` of each record of one recording (the pairs' ``sides``) that holds memory not
    written yet when it ran -> the target that allocated it."""
    drawn = (getattr(p, side) for p in aligned for side in sides)
    records = {id(n.record): n.record for n in drawn if n is not None}
    known = [r for r in records.values() if isinstance(r, NodeRecord)]
    found = unwritten_memory(known)
    return {id(r): found[r.name] for r in known if r.name in found}


def _pair(
    p: Any, criterion: Criterion, measured: dict[tuple[Any, ...], Metrics], fresh: dict[int, str]
) -> NodeComparison:
    ra = p.before.record if p.before is not None else None
    rb = p.after.record if p.after is not None else None
    reference = p.reference.record if p.before is None and p.reference is not None else None
    drawn: Any = p.after or p.before
    first_a = _first(ra or reference)
    first_b = _first(rb)
    known = rb or ra
    base: dict[str, Any] = {
        "a": ra.name if ra else (drawn.name if p.status == "removed" else None),
        "b": rb.name if rb else (drawn.name if p.status != "removed" else None),
        "status": p.status,
        "op": known.op if known else drawn.kind,
        "target": known.target if known else drawn.title,
        "shape_a": first_a.shape if first_a else None,
        "shape_b": first_b.shape if first_b else None,
        "dtype_a": first_a.dtype if first_a else None,
        "dtype_b": first_b.dtype if first_b else None,
    }
    if ra is None and reference is not None and rb is not None:
        found = _measure(reference, rb, criterion, measured, fresh)
        found["reason"] = f"against {reference.name}, the value it displaced: {found['reason']}"
        return NodeComparison(**base, **found)
    if ra is None or rb is None:
        why = "values not recorded" if p.after is not None and p.before is not None else ""
        side = "b" if ra is None else "a"
        return NodeComparison(**base, metrics=None, diverged=False, reason=why or f"only in {side}")
    return NodeComparison(**base, **_measure(ra, rb, criterion, measured, fresh))


def _measure(
    ra: NodeRecord,
    rb: NodeRecord,
    criterion: Criterion,
    measured: dict[tuple[Any, ...], Metrics],
    fresh: dict[int, str],
) -> dict[str, Any]:
    """``metrics``, ``diverged``, ``reason`` and ``measured_on`` of two records (``fresh``:
    the records holding memory not written yet, by ``id``, and what allocated it)."""
    first_a, first_b = _first(ra), _first(rb)
    if first_a and first_b and first_a.shape != first_b.shape:
        shapes = f"shape {_shape(first_a.shape)} vs {_shape(first_b.shape)}"
        return _found(None, True, shapes, "values")
    allocated = fresh.get(id(rb)) or fresh.get(id(ra))
    if allocated is not None:  # whatever the memory held: different from run to run
        return _found(None, False, f"not measured: uninitialized memory ({allocated})", "")
    if (first_a is None) != (first_b is None) and ra.kept and rb.kept:
        kinds = f"{_kind(ra.value)} vs {_kind(rb.value)}"
        return _found(None, True, kinds, "values")
    x, y = _first_tensor(ra), _first_tensor(rb)
    if x is not None and y is not None:
        return _tensors(x, y, ra, rb, criterion, measured)
    if first_a is not None and first_b is not None:  # tensors whose values were not kept
        if _has_statistics(first_a) and _has_statistics(first_b):
            m = measure_statistics(first_a, first_b, rtol=criterion.rtol, atol=criterion.atol)
            diverged, reason = criterion.verdict(m)
            return _found(m, diverged, f"statistics only: {reason}", "statistics")
        return _found(None, False, "not measured: values not kept and no statistics", "")
    if ra.kept and rb.kept and _plain(ra.value) and _plain(rb.value):
        same = _equal(ra.value, rb.value)
        why = "equal" if same else f"{_short(ra.value)} vs {_short(rb.value)}"
        if not same and _metadata(ra.value) and _metadata(rb.value):
            return _found(None, False, f"{why} (dtypes and devices are not values)", "values")
        return _found(None, not same, why, "values")
    if not (ra.kept and rb.kept):
        return _found(None, False, "not measured: values not kept", "")
    return _found(None, False, f"not measured: {_kind(rb.value)} holds no tensor", "")


def _tensors(
    x: torch.Tensor,
    y: torch.Tensor,
    ra: NodeRecord,
    rb: NodeRecord,
    criterion: Criterion,
    measured: dict[tuple[Any, ...], Metrics],
) -> dict[str, Any]:
    if x.shape != y.shape:
        return _found(None, True, f"shape {_shape(x.shape)} vs {_shape(y.shape)}", "values")
    if x.is_meta or y.is_meta or _fake(x) or _fake(y):
        return _found(None, False, "not measured: meta or fake tensors hold no values", "")
    key = None  # dense copies are not what their memory key would name (freed, reused)
    if _not_strided(x) or _not_strided(y):
        layouts = f"{x.layout} and {y.layout}".replace("torch.", "")
        if stored_values(x) is None or stored_values(y) is None:
            return _found(None, False, f"not measured: {layouts} tensors are not compared", "")
        if x.numel() > _DENSE_MAX:
            why = f"not measured: sparse tensors of {x.numel():,} values (compared dense up to {_DENSE_MAX:,})"
            return _found(None, False, why, "")
        x, y = x.detach().to_dense(), y.detach().to_dense()
    else:
        key = memory_key(x, y)
    metrics = measured.get(key) if key is not None else None
    if metrics is None:
        metrics = measure(
            x, y, rtol=criterion.rtol, atol=criterion.atol, nonfinite=_may_be_nonfinite(ra, rb)
        )
        if key is not None:
            measured[key] = metrics
    diverged, reason = criterion.verdict(metrics)
    if x.is_complex() or y.is_complex():
        reason = f"{reason} (complex: as real/imaginary pairs)"
    return _found(metrics, diverged, reason, "values")


def _found(metrics: Metrics | None, diverged: bool, reason: str, on: str) -> dict[str, Any]:
    return {"metrics": metrics, "diverged": diverged, "reason": reason, "measured_on": on}


def _first(record: NodeRecord | None) -> Any:
    return record.outputs[0] if record is not None and record.outputs else None


def _has_statistics(summary: Any) -> bool:
    return summary.mean is not None or summary.numel == 0


def _not_strided(t: torch.Tensor) -> bool:
    """Sparse or nested: no strides, no one block of memory to measure."""
    return t.layout != torch.strided or t.is_nested


def _fake(t: torch.Tensor) -> bool:
    return type(t).__name__ == "FakeTensor"


def _may_be_nonfinite(ra: NodeRecord, rb: NodeRecord) -> bool:
    """False when both records' statistics show no NaN/Inf in their first output."""
    for r in (ra, rb):
        first = r.outputs[0] if r.outputs else None
        if first is None or first.nan is None or first.nonfinite_count:
            return True
    return False


def _first_tensor(record: NodeRecord) -> torch.Tensor | None:
    if not record.kept:
        return None
    value = record.value
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return next((v for v in value if isinstance(v, torch.Tensor)), None)
    if isinstance(value, dict):
        return next((v for v in value.values() if isinstance(v, torch.Tensor)), None)
    return None


_PLAIN = (type(None), bool, int, float, complex, str, torch.dtype, torch.device)


def _plain(value: Any) -> bool:
    """A value compared for equality: numbers, strings, dtypes, and tuples of them."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def _metadata(value: Any) -> bool:
    """A dtype or device (``x.dtype``): expected to differ between a float32 and a bfloat16
    run, as the tensors' own dtypes are, so not a divergence."""
    if isinstance(value, (tuple, list)):
        return bool(value) and all(_metadata(v) for v in value)
    return isinstance(value, (torch.dtype, torch.device))


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN both sides
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _kind(value: Any) -> str:
    return "a tensor" if isinstance(value, torch.Tensor) else type(value).__name__


def _shape(shape: Any) -> str:
    return "×".join(map(str, shape)) or "scalar"
