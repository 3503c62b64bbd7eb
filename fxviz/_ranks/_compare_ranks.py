"""``fxviz.compare_ranks``: the first node, and the rank, where the ranks of a job part.

Replicas (data parallel, DDP, one process group's copies) should compute bit for bit the
same values: each rank is compared with rank 0, node by node, bitwise by default. Given
``reference=`` (a single-process run of the same model), each rank's value is compared
instead with the part of the reference it should hold: a DTensor's local shard with its
slice of the reference (from its saved placements), a plain per-rank tensor with the
slice its shape implies, a partial sum with the sum over ranks.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fxviz._compare._metrics import Metrics, one_thread
from fxviz._ranks._cells import MISSING, Criterion, RankCell, measure_all
from fxviz._ranks._layout import grad_values
from fxviz._record._rank import distributed_nodes
from fxviz._record._records import Recording
from fxviz.errors import InputError, UnknownNodeError

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["RankCell", "RankComparison", "RankDivergence", "compare_ranks"]

METRICS = ("exact", "sqnr", "allclose")


@dataclasses.dataclass(frozen=True)
class RankDivergence:
    """Where the ranks part first.

    Attributes:
        node: the first node (in execution order; gradients: parameters after nodes) at
            which a rank parts.
        rank: the rank that parts there (the odd one out when three or more ranks are
            compared; against rank 0 with two).
        ranks: every rank that parts there.
        metrics: how far ``rank`` is from its reference at ``node``.
        reason: the verdict in words (``"differs: max abs error 0.0123"``).
        kind: ``"value"``, ``"grad"`` (the gradient of a node's output) or
            ``"parameter grad"``.
    """

    node: str
    rank: int
    ranks: tuple[int, ...]
    metrics: Metrics | None
    reason: str
    kind: str = "value"


class RankComparison:
    """The ranks of one job side by side; see :func:`fxviz.compare_ranks`.

    Attributes:
        recordings: ``{rank: Recording}``, in rank order.
        reference: the single-process run compared against, or ``None`` (rank 0 is).
        backward: whether gradients were compared (else forward values).
        nodes: the compared rows in order (node names; parameter names for gradients).
        cells: ``{(node, rank): RankCell}``.
        first_divergence: a :class:`RankDivergence`, ``None`` when the ranks agree.
        metric, threshold: the criterion (``"exact"``: bitwise equal).
    """

    def __init__(
        self,
        recordings: dict[int, Recording],
        reference: Recording | None,
        nodes: list[tuple[str, str]],
        cells: dict[tuple[str, int], RankCell],
        *,
        backward: bool,
        metric: str,
        threshold: float | None,
        odd: dict[str, tuple[int, ...]],
    ) -> None:
        self.recordings, self.reference, self.backward = recordings, reference, backward
        self._kinds = dict(nodes)
        self.nodes = [name for name, _ in nodes]
        self.cells, self.metric, self.threshold = cells, metric, threshold
        self.first_divergence: RankDivergence | None = None
        for name in self.nodes:
            parting = tuple(r for r in self.ranks if (c := cells.get((name, r))) and c.diverged)
            if parting:
                ranks = odd.get(name) or parting
                cell = cells.get((name, ranks[0])) or cells[(name, parting[0])]
                self.first_divergence = RankDivergence(
                    name, ranks[0], ranks, cell.metrics, cell.reason, self._kinds[name]
                )
                break

    @property
    def ranks(self) -> list[int]:
        """The ranks compared, in order."""
        return list(self.recordings)

    @property
    def base(self) -> Recording:
        """The run the others are measured against: the reference, or rank 0's."""
        return (
            self.reference if self.reference is not None else next(iter(self.recordings.values()))
        )

    def __getitem__(self, key: tuple[str, int]) -> RankCell:
        """``result[node, rank]``: that node of that rank."""
        try:
            return self.cells[key]
        except KeyError:
            from fxviz._record._records import unknown_node_message

            raise UnknownNodeError(
                f"no cell {key!r}: "
                + unknown_node_message(key[0], self.nodes)
                + f" (ranks: {self.ranks})"
            ) from None

    def diverged(self) -> list[RankCell]:
        """Every (node, rank) that fails the criterion, in node order."""
        return [
            c
            for n in self.nodes
            for r in self.ranks
            if (c := self.cells.get((n, r))) and c.diverged
        ]

    def criterion(self) -> str:
        """The rule in words."""
        against = "the reference's slice" if self.reference is not None else "rank 0"
        if self.metric == "exact":
            rule = "not bitwise equal"
        elif self.metric == "sqnr":
            rule = f"SQNR < {self.threshold:g} dB"
        else:
            rule = "not allclose"
        return f"{rule} to {against}"

    def table(self, value: str = "max_abs_error") -> pd.DataFrame:
        """One row a node (or parameter), a column a rank: how far each rank is from its
        reference (``value``: a :class:`~fxviz._compare.Metrics` field such as
        ``max_abs_error``, ``sqnr_db``, ``rel_l2``; ``"diverged"`` for the verdicts).
        Empty cells: nothing measured there."""
        import pandas as pd

        if value != "diverged" and value not in {f.name for f in dataclasses.fields(Metrics)}:
            raise InputError(
                f"unknown table value {value!r}: use 'diverged' or a metric "
                f"({', '.join(f.name for f in dataclasses.fields(Metrics))})"
            )
        rows = []
        for name in self.nodes:
            row: dict[int, Any] = {}
            for rank in self.ranks:
                cell = self.cells.get((name, rank))
                if cell is None:
                    row[rank] = None
                elif value == "diverged":
                    row[rank] = cell.diverged
                else:
                    row[rank] = None if cell.metrics is None else getattr(cell.metrics, value)
            rows.append(row)
        frame = pd.DataFrame(rows, index=pd.Index(self.nodes, name="node"), columns=self.ranks)
        frame.columns.name = "rank"
        return frame

    def summary(self) -> str:
        """``4 ranks, 7 nodes (not bitwise equal to rank 0): rank 2 parts first at '_0' (...)``."""
        what = "gradients" if self.backward else "nodes"
        text = f"{len(self.ranks)} ranks, {len(self.nodes)} {what} ({self.criterion()}): "
        first = self.first_divergence
        if first is None:
            return text + "the ranks agree everywhere"
        others = [r for r in first.ranks if r != first.rank]
        also = (
            f" (also rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others))})"
            if others
            else ""
        )
        return text + f"rank {first.rank}{also} parts first at {first.node!r} ({first.reason})"

    def __repr__(self) -> str:
        return f"<fxviz.RankComparison: {self.summary()}>"

    def _repr_html_(self) -> str:
        import html

        body = self.table().to_html(escape=True, na_rep="", float_format=lambda v: f"{v:.4g}")
        return f"<div><p><b>fxviz.compare_ranks</b>: {html.escape(self.summary())}</p>{body}</div>"


def compare_ranks(
    recordings_or_paths: Iterable[Any],
    *,
    reference: Any = None,
    backward: bool = False,
    metric: str | None = None,
    sqnr_db: float = 60.0,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> RankComparison:
    """Align the recordings of a job's ranks and find the first node where they part.

    Each rank's recording (live, or a ``.fxrec`` file saved with
    ``rec.save("run-{rank}.fxrec")``; or one pattern, ``"run-*.fxrec"``) is matched node
    by node by name. Without
    ``reference``, ranks are replicas and every rank is compared with rank 0, **bitwise**
    (``metric="exact"``: a weight perturbed by 1e-4 parts; so does nondeterminism). With
    ``reference`` (a single-process recording or path), each rank's value is compared
    with the part of the reference it holds (DTensor shards by their placements, plain
    per-rank tensors by their shape, partial sums summed over ranks), by SQNR (floor
    ``sqnr_db``, 60 dB by default: a sharded matmul sums in another order).

    ``backward=True`` compares gradients instead (record with ``backward=True``): those
    of every node's output, then every parameter's (DDP's replicas must agree on them).

    At the first node where some rank parts, ``first_divergence.rank`` is the odd one
    out: the ranks are grouped by equal values there and the smallest group's first rank
    is named (with two ranks, rank 1).

    Example:
        >>> import torch, fxviz
        >>> model, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
        >>> a, b = fxviz.record(model, x), fxviz.record(model, x)
        >>> b.rank, b.world_size = 1, 2  # (a real job sets them: torch.distributed.run)
        >>> fxviz.compare_ranks([a, b]).first_divergence is None
        True
        >>> with torch.no_grad():
        ...     _ = model.weight.add_(1e-4)
        >>> c = fxviz.record(model, x)
        >>> c.rank = 1
        >>> result = fxviz.compare_ranks([a, c])
        >>> result.first_divergence.rank, result.first_divergence.node
        (1, 'linear')
    """
    if isinstance(recordings_or_paths, (str, os.PathLike)):  # "run-*.fxrec"
        recordings_or_paths = _glob(os.fspath(recordings_or_paths))
    metric = metric or ("exact" if reference is None else "sqnr")
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    runs = _by_rank([_as_recording(r) for r in recordings_or_paths])
    ref = None if reference is None else _as_recording(reference)
    if len(runs) < (1 if ref is not None else 2):
        raise InputError(
            f"compare_ranks needs the recordings of at least two ranks (got {len(runs)}); "
            "save one file a rank with rec.save('run-{rank}.fxrec') and pass them all"
        )
    base = ref if ref is not None else next(iter(runs.values()))
    criterion = Criterion(metric, sqnr_db, rtol, atol)
    with one_thread():
        if backward:
            rows, values = _gradients(base, runs)
        else:
            rows = [(name, "value") for name in base]
            values = {
                name: {
                    r: (MISSING if name not in run else run[name].value if run[name].kept else None)
                    for r, run in runs.items()
                }
                for name in base
            }
            values = {
                name: {**v, -1: base[name].value if base[name].kept else None}
                for name, v in values.items()
            }
        layouts = {r: _layouts(run) for r, run in runs.items()}
        cells, odd = measure_all(rows, values, runs, layouts, ref is not None, criterion)
    threshold = sqnr_db if metric == "sqnr" else None
    return RankComparison(
        runs, ref, rows, cells, backward=backward, metric=metric, threshold=threshold, odd=odd
    )


def _glob(pattern: str) -> list[str]:
    import glob

    found = sorted(glob.glob(pattern))
    if not found:
        raise InputError(
            f"no file matches {pattern!r}: pass the ranks' .fxrec files, or a pattern such "
            "as 'run-*.fxrec' (each rank saves one with rec.save('run-{rank}.fxrec'))"
        )
    return found


def _as_recording(item: Any) -> Recording:
    if isinstance(item, Recording):
        return item
    if isinstance(item, (str, os.PathLike)):
        from fxviz._saved import load

        return load(item)
    raise InputError(
        f"compare_ranks takes recordings or .fxrec paths, not a {type(item).__name__}: "
        "record each rank with fxviz.record(...) and save it with rec.save('run-{rank}.fxrec')"
    )


def _by_rank(recs: list[Recording]) -> dict[int, Recording]:
    """``{rank: recording}`` sorted; recordings without a rank take their position."""
    out: dict[int, Recording] = {}
    for i, rec in enumerate(recs):
        rank = rec.rank if isinstance(rec.rank, int) else i
        if rank in out:
            where = getattr(rec, "path", None) or f"recording #{i}"
            raise InputError(
                f"two recordings of rank {rank} ({where}); pass one recording a rank "
                "(each file a different rank of the same job)"
            )
        out[rank] = rec
    worlds = {rec.world_size for rec in recs if isinstance(rec.world_size, int)}
    if len(worlds) > 1:
        raise InputError(
            f"these recordings come from jobs of different sizes (world sizes {sorted(worlds)}); "
            "compare the ranks of one job"
        )
    return dict(sorted(out.items()))


def _layouts(run: Recording) -> dict[str, dict[str, Any]]:
    return {n: d["layout"] for n, d in distributed_nodes(run).items() if "layout" in d}


def _gradients(
    base: Recording, runs: dict[int, Recording]
) -> tuple[list[tuple[str, str]], dict[str, dict[int, Any]]]:
    """Rows (backward order: nodes last to first, then parameters) and their gradients."""
    grads = {r: grad_values(run) for r, run in runs.items()}
    base_nodes, base_params = grad_values(base)
    if not (base_nodes or base_params):
        raise InputError(
            "no gradients in these recordings: record each rank with "
            "fxviz.record(model, x, backward=True) (and keep='all' or a budget that keeps them)"
        )
    rows = [(n, "grad") for n in reversed(list(base)) if n in base_nodes]
    rows += [(p, "parameter grad") for p in base_params]
    values: dict[str, dict[int, Any]] = {}
    for name, kind in rows:
        index = 1 if kind == "parameter grad" else 0
        values[name] = {r: g[index].get(name, MISSING) for r, g in grads.items()}
        values[name][-1] = (base_params if index else base_nodes)[name]
    return rows, values
