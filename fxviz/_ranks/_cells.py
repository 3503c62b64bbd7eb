"""Each (node, rank) measured against what it should equal: rank 0's value, or the
slice of a single-process reference the rank holds; and the odd ranks out."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from fxviz._compare._metrics import Metrics, measure
from fxviz._ranks._layout import expected_shard, infer_layout, plain
from fxviz._record._records import Recording

__all__ = ["EQUAL", "MISSING", "Criterion", "RankCell", "measure_all"]

MISSING = object()  # the node is not in that rank's recording


@dataclasses.dataclass(frozen=True)
class RankCell:
    """One node of one rank against its reference (rank 0, or the reference run's slice).

    ``metrics`` is ``None`` where nothing could be measured (``reason`` says why);
    ``diverged`` whether the pair fails the criterion."""

    node: str
    rank: int
    metrics: Metrics | None
    diverged: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Criterion:
    metric: str
    sqnr_db: float
    rtol: float
    atol: float

    def judge(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Metrics, bool, str]:
        exact = self.metric == "exact"
        if exact and _bitwise_equal(x, y):
            return EQUAL, False, "bitwise equal"
        rtol, atol = (0.0, 0.0) if exact else (self.rtol, self.atol)
        m = measure(x, y, rtol=rtol, atol=atol)
        sqnr = f"SQNR {m.sqnr_db:.1f} dB" if math.isfinite(m.sqnr_db) else "equal values"
        if m.one_sided:
            return m, True, f"{m.one_sided} NaN/Inf on one side only; {sqnr}"
        if exact:
            why = "dtypes differ" if x.dtype != y.dtype else f"max abs error {m.max_abs_error:.3g}"
            return m, True, f"differs: {why}, {sqnr}"
        if self.metric == "sqnr":
            return m, m.sqnr_db < self.sqnr_db, sqnr
        return m, not m.allclose, f"max abs error {m.max_abs_error:.3g}, {sqnr}"


EQUAL = Metrics(0.0, 0.0, 1.0, math.inf, 0.0, 0.0, 0, 0, 0, True)


def _bitwise_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.numel() == 0:
        return True
    a, b = x.detach().contiguous(), y.detach().to(x.device).contiguous()
    if a.dtype == torch.bool:
        return bool(torch.equal(a, b))
    return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))


def measure_all(
    rows: list[tuple[str, str]],
    values: dict[str, dict[int, Any]],
    runs: dict[int, Recording],
    layouts: dict[int, dict[str, dict[str, Any]]],
    has_reference: bool,
    criterion: Criterion,
) -> tuple[dict[tuple[str, int], RankCell], dict[str, tuple[int, ...]]]:
    cells: dict[tuple[str, int], RankCell] = {}
    odd: dict[str, tuple[int, ...]] = {}
    first_parting = None
    for name, kind in rows:
        per_rank = values[name]
        ref = plain(per_rank[-1]) if per_rank[-1] is not None else None
        ranks = [r for r in runs if not (r == min(runs) and not has_reference)]
        if has_reference:
            expected = _expected(name, ref, per_rank, runs, layouts, kind)
        else:
            expected = dict.fromkeys(ranks, ref)
        for rank in ranks:
            cells[name, rank] = _cell(name, rank, per_rank.get(rank), expected.get(rank), criterion)
        if not has_reference:
            cells[name, min(runs)] = RankCell(name, min(runs), EQUAL, False, "reference (rank 0)")
        if first_parting is None and any(cells[name, r].diverged for r in ranks):
            first_parting = name
            odd[name] = _odd_ranks(per_rank, runs, has_reference, cells, name)
    return cells, odd


def _expected(
    name: str,
    ref: torch.Tensor | None,
    per_rank: dict[int, Any],
    runs: dict[int, Recording],
    layouts: dict[int, dict[str, dict[str, Any]]],
    kind: str,
) -> dict[int, Any]:
    """Per rank, the part of the reference value it should hold (or why there is none)."""
    if ref is None:
        return dict.fromkeys(runs, "reference value not kept")
    locals_ = {r: plain(v) for r, v in per_rank.items() if r >= 0 and v is not MISSING}
    out: dict[int, Any] = {}
    inferred = None
    for rank in runs:
        layout = layouts[rank].get(name) if kind == "value" else None
        if layout is None:
            if inferred is None:
                shapes = {r: tuple(t.shape) for r, t in locals_.items() if t is not None}
                inferred = infer_layout(tuple(ref.shape), shapes) or {}
            layout = inferred
        if not layout:
            out[rank] = "layout unknown (shapes do not split the reference's)"
            continue
        part = expected_shard(ref, layout, rank)
        if isinstance(part, str):  # a partial sum: the sum over ranks is the reference
            total = sum(t for t in locals_.values() if t is not None)
            out[rank] = ("partial", ref, total)
        else:
            out[rank] = "layout not understood" if part is None else part
    return out


def _cell(name: str, rank: int, value: Any, expected: Any, criterion: Criterion) -> RankCell:
    if value is MISSING:
        return RankCell(name, rank, None, True, f"node missing in rank {rank}")
    if isinstance(expected, tuple):  # a partial sum: measured once over the ranks' sum
        _, ref, total = expected
        m, bad, why = (
            criterion.judge(ref, total) if isinstance(total, torch.Tensor) else (None, False, "")
        )
        return RankCell(name, rank, m, bad, f"partial sum over ranks: {why}")
    if isinstance(expected, str) or expected is None:
        return RankCell(name, rank, None, False, expected or "value not kept")
    mine = plain(value)
    if mine is None:
        return RankCell(
            name, rank, None, False, "value not kept" if value is None else "not a tensor"
        )
    if mine.shape != expected.shape:
        shape = "×".join(map(str, mine.shape))
        return RankCell(
            name, rank, None, True, f"shape {shape} vs {'×'.join(map(str, expected.shape))}"
        )
    if mine.is_complex() or mine.is_meta:
        return RankCell(name, rank, None, False, "not compared (complex or meta)")
    m, bad, why = criterion.judge(expected, mine)
    return RankCell(name, rank, m, bad, why)


def _odd_ranks(
    per_rank: dict[int, Any],
    runs: dict[int, Recording],
    has_reference: bool,
    cells: dict[tuple[str, int], RankCell],
    name: str,
) -> tuple[int, ...]:
    """The ranks outside the largest group of equal values (ties: the group of the
    lowest rank stays); against a reference, those that part."""
    parting = tuple(r for r in runs if (c := cells.get((name, r))) and c.diverged)
    if has_reference or len(runs) < 3:
        return parting
    groups: list[list[int]] = []
    for rank in runs:
        value = per_rank.get(rank)
        mine = None if value is MISSING else plain(value)
        for group in groups:
            other = per_rank.get(group[0])
            theirs = None if other is MISSING else plain(other)
            if (mine is None and theirs is None) or (
                mine is not None and theirs is not None and _bitwise_equal(mine, theirs)
            ):
                group.append(rank)
                break
        else:
            groups.append([rank])
    largest = max(groups, key=len)  # max keeps the first of equal sizes: rank 0's group
    return tuple(r for r in runs if r not in largest) or parting
