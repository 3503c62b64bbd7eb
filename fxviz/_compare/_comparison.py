"""``fxviz.compare``: where two runs part, node by node.

The two recordings (live or loaded) are aligned as :func:`fxviz.diff` aligns graphs
(provenance first, then name, then target and rank: :mod:`fxviz.render._align`), and
every aligned pair is measured in float64 or said why not (:mod:`fxviz._compare._pairs`).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from fxviz._compare._pairs import NodeComparison, measure_pairs
from fxviz._compare._thresholds import DEFAULT_SQNR_DB, METRICS, Criterion
from fxviz._record._records import Recording
from fxviz._record._summary import dtype_name
from fxviz.errors import InputError, UnknownNodeError

if TYPE_CHECKING:
    import graphviz
    import pandas as pd

    from fxviz.render._diff import GraphDiff
    from fxviz.render._model import DrawGraph

__all__ = ["METRICS", "Comparison", "NodeComparison", "compare"]


class Comparison:
    """Two runs side by side; see :func:`fxviz.compare`.

    Attributes:
        a, b: the two recordings (``a`` is the reference).
        pairs: one :class:`NodeComparison` per node of either run, in ``b``'s order.
        first_divergence: the first pair (in ``b``'s execution order) that diverges, or
            ``None`` when the runs agree everywhere.
        metric, threshold: the criterion (``"sqnr"`` and its dB floor, ``"cosine"`` and
            its floor, or ``"allclose"`` with ``rtol``/``atol``).
    """

    def __init__(
        self,
        a: Recording,
        b: Recording,
        pairs: list[NodeComparison],
        diff: GraphDiff,
        *,
        criterion: Criterion | None = None,
        what: str = "",
        **thresholds: Any,  # metric=, threshold=, rtol=, atol= as before
    ) -> None:
        if criterion is None:
            threshold = thresholds.pop("threshold", None)
            metric = thresholds.get("metric", "sqnr")
            if threshold is not None:
                thresholds[{"sqnr": "sqnr_db", "cosine": "min_cosine"}[metric]] = threshold
            criterion = Criterion(**thresholds)
        self.a, self.b, self.pairs, self.diff = a, b, pairs, diff
        self.rule, self.what = criterion, what
        self.metric, self.threshold = criterion.metric, criterion.threshold
        self.rtol, self.atol = criterion.rtol, criterion.atol
        self.first_divergence = next((p for p in pairs if p.diverged and p.b), None) or next(
            (p for p in pairs if p.diverged), None
        )

    @property
    def unmeasured(self) -> list[NodeComparison]:
        """The pairs present in both runs whose values could not be measured (each says
        why in ``reason``); nothing is claimed about them."""
        return [p for p in self.pairs if p.a and p.b and not p.measured]

    @property
    def agree(self) -> bool:
        """True only when every pair present in both runs was measured on its values
        and none diverges."""
        return self.first_divergence is None and all(
            p.measured_on == "values" for p in self.pairs if p.a and p.b
        )

    def __getitem__(self, name: str) -> NodeComparison:
        """The pair whose node (in ``b``, else in ``a``) is called ``name``."""
        for p in self.pairs:
            if name in (p.b, p.a):
                return p
        from fxviz._record._records import unknown_node_message

        raise UnknownNodeError(unknown_node_message(name, [p.name for p in self.pairs]))

    def diverged(self) -> list[NodeComparison]:
        """Every pair that fails the criterion, in ``b``'s order."""
        return [p for p in self.pairs if p.diverged]

    def criterion(self) -> str:
        """The rule in words: ``SQNR < 30 dB``, ``cosine < 0.999``, ``not allclose(...)``."""
        return self.rule.describe()

    def table(self) -> pd.DataFrame:
        """One row a pair: ``a``, ``b``, ``status``, ``op``, ``target``, shapes and dtypes
        on both sides, ``max_abs_error``, ``max_rel_error``, ``cosine``, ``sqnr_db``,
        ``rmse``, ``rel_l2``, NaN/Inf counts (``nonfinite_a``, ``nonfinite_b``,
        ``one_sided``), ``allclose``, ``diverged``, ``reason`` and ``measured_on``
        (``values``, ``statistics``, or empty where the pair was not measured)."""
        import pandas as pd

        rows = []
        for p in self.pairs:
            row: dict[str, Any] = {
                "a": p.a or "",
                "b": p.b or "",
                "status": p.status,
                "op": p.op,
                "target": p.target,
                "shape_a": p.shape_a,
                "shape_b": p.shape_b,
                "dtype_a": None if p.dtype_a is None else dtype_name(p.dtype_a),
                "dtype_b": None if p.dtype_b is None else dtype_name(p.dtype_b),
            }
            for key in _COLUMNS:
                row[key] = getattr(p, key)
            row |= {"diverged": p.diverged, "reason": p.reason, "measured_on": p.measured_on}
            rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """``85 of 85 pairs compared (SQNR < 30 dB): 12 diverge; first at 'matmul_1' (SQNR
        27.4 dB)``; pairs measured on statistics only and pairs not measured are counted,
        and the runs are said to agree only where they were measured."""
        measured = [p for p in self.pairs if p.measured]
        notes = [self.criterion()]
        on_stats = sum(p.measured_on == "statistics" for p in measured)
        if on_stats:
            notes.append(f"{on_stats} on statistics only")
        why: dict[str, int] = {}
        for p in self.pairs:
            if not p.measured:
                key = p.reason.removeprefix("not measured: ") or "nothing to measure"
                why[key] = why.get(key, 0) + 1
        if why:
            reasons = ", ".join(f"{n} {reason}" for reason, n in why.items())
            notes.append(f"{len(self.pairs) - len(measured)} not measured: {reasons}")
        text = f"{len(measured)} of {len(self.pairs)} pairs compared ({'; '.join(notes)}): "
        if self.what:
            text = f"{self.what}: {text}"
        bad = self.diverged()
        if bad:
            first = self.first_divergence
            assert first is not None
            return text + f"{len(bad)} diverge; first at {first.name!r} ({first.reason})"
        if not measured:
            return text + "nothing was measured, so nothing is said about agreement"
        if self.agree and not on_stats:
            return text + "the runs agree everywhere"
        return text + f"the runs agree on the {len(measured)} pairs compared"

    def overlay(self) -> Any:
        """The overlay that shades nodes by agreement and marks the first divergence."""
        from fxviz._compare._view import heat_overlay

        return heat_overlay(self)

    def drawing(self) -> DrawGraph:
        """Both runs in one drawing: ``b``'s nodes, and ``a``'s that have no counterpart."""
        return self.diff.merged()

    def to_dot(self, **options: Any) -> graphviz.Digraph:
        """DOT of the merged drawing, shaded by agreement; options as for :func:`fxviz.to_dot`."""
        from fxviz.render._api import to_dot

        return to_dot(self, **options)

    def __repr__(self) -> str:
        return f"<fxviz.Comparison: {self.summary()}>"

    def _repr_html_(self) -> str:
        table = self.table()
        shown = table[table["diverged"]].head(40) if len(table) > 40 else table
        body = shown.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.4g}")
        return f"<div><p><b>fxviz.Comparison</b>: {html.escape(self.summary())}</p>{body}</div>"


_COLUMNS = (
    *("max_abs_error", "max_rel_error", "cosine", "sqnr_db", "rmse", "rel_l2"),
    *("nonfinite_a", "nonfinite_b", "one_sided", "allclose"),
)


def compare(
    a: Any,
    b: Any,
    *,
    metric: str = "sqnr",
    sqnr_db: float = DEFAULT_SQNR_DB,
    min_cosine: float = 0.999,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    provenance: dict[str, str] | None = None,
) -> Comparison:
    """Compare two recorded runs node by node: where do their values part?

    Use ``compare`` for *how the values differ* (dtypes, devices, inputs, a pass's
    numerics) and :func:`fxviz.diff` for *what changed in the graph*; both are views of one
    engine: one alignment (provenance, then name, then target and rank) and one set of
    float64 numbers judged by one threshold vocabulary (``metric``, ``sqnr_db``,
    ``min_cosine``, ``rtol``, ``atol``). :func:`fxviz.shapes_diff` aligns shape reports the
    same way.

    The runs may be of the same graph or of graphs related by a pass, in other dtypes, on
    other devices or on other inputs; either may be live or loaded from a file. Every
    aligned pair is measured, or marked not measured with the reason: first output
    tensors in float64 (max abs/rel error, cosine similarity, SQNR, RMSE, relative L2,
    NaN/Inf on one side only; complex tensors as real/imaginary pairs; 0-d and empty
    tensors too), plain Python values for equality, and, where the values were not kept
    (``keep="stats"``), the recorded statistics, said so. The summary counts what was
    measured; runs are never said to agree on pairs that were not.

    A pair diverges when its shapes differ, when NaN/Inf appear on one side only, or when
    it fails ``metric``: ``"sqnr"`` (default: SQNR below ``sqnr_db``, 30 dB, about 3%
    relative L2 error), ``"cosine"`` (below ``min_cosine``) or ``"allclose"`` (outside
    ``rtol``/``atol``, as ``torch.allclose``). Thresholds must be finite and non-negative.
    ``provenance`` maps node names of ``b`` to the names in ``a`` they were made from,
    where a pass knows it.

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        >>> x = torch.randn(4, 8)
        >>> same = fxviz.compare(fxviz.record(model, x), fxviz.record(model, x))
        >>> same.first_divergence is None, same.agree
        (True, True)
        >>> other = fxviz.compare(fxviz.record(model, x), fxviz.record(model, x + 1))
        >>> other.first_divergence.name
        'input_1'
    """
    criterion = Criterion(metric, sqnr_db, min_cosine, rtol, atol)
    for name, run in (("a", a), ("b", b)):
        if not isinstance(run, Recording):
            raise InputError(
                f"compare() takes two recordings; {name} is a {type(run).__name__}. Record "
                "a run with fxviz.record(model, *inputs) or load one with fxviz.load(path); "
                "fxviz.compare_dtype and fxviz.compare_pass record both runs for you"
            )
    return engine(a, b, criterion, provenance=provenance or {})


def engine(
    a: Recording,
    b: Recording,
    criterion: Criterion,
    *,
    provenance: dict[str, str],
    params: str = "fold",
    what: str = "",
) -> Comparison:
    """The comparison engine: draw both runs, align them once, measure every pair."""
    from fxviz.render._align import align
    from fxviz.render._api import draw
    from fxviz.render._diff import GraphDiff

    left, right = draw(a, params=params), draw(b, params=params)  # type: ignore[arg-type]
    aligned = align(left, right, provenance)
    pairs = measure_pairs(aligned, criterion)
    structure = GraphDiff(left, right, aligned)
    comparison = Comparison(a, b, pairs, structure, criterion=criterion, what=what)
    structure.measured_by(comparison)
    return comparison
