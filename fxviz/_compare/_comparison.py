"""``fxviz.compare``: where two runs part, node by node.

The two recordings (live or loaded) are aligned as :func:`fxviz.diff` aligns graphs
(provenance first, then name, then target and rank), and every aligned pair of values
is measured in float64 (:mod:`fxviz._compare._metrics`).
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import TYPE_CHECKING, Any

import torch

from fxviz._compare._metrics import Metrics, measure, memory_key, one_thread
from fxviz._record._records import NodeRecord, Recording
from fxviz._record._summary import dtype_name
from fxviz.errors import InputError, UnknownNodeError

if TYPE_CHECKING:
    import graphviz
    import pandas as pd

    from fxviz.render._diff import GraphDiff
    from fxviz.render._model import DrawGraph

__all__ = ["METRICS", "Comparison", "NodeComparison", "compare"]

METRICS = ("sqnr", "allclose", "cosine")
DEFAULT_SQNR_DB = 30.0


@dataclasses.dataclass(frozen=True)
class NodeComparison:
    """One aligned pair of nodes and how far ``b``'s value is from ``a``'s.

    ``status`` is the structural status from the alignment (``same``, ``changed``,
    ``added``, ``removed``, ``inlined``); ``metrics`` is ``None`` where no values could be
    compared (a side missing or not kept, not a tensor, shapes differ); ``diverged`` says
    whether the pair fails the comparison's criterion, and ``reason`` why.
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

    @property
    def name(self) -> str:
        """The node's name in ``b`` (in ``a`` when ``b`` has no counterpart)."""
        return self.b or self.a or ""

    def __getattr__(self, key: str) -> Any:  # row.sqnr_db, row.cosine... from the metrics
        if key in _METRIC_FIELDS:
            metrics = object.__getattribute__(self, "metrics")
            return None if metrics is None else getattr(metrics, key)
        raise AttributeError(key)


_METRIC_FIELDS = {f.name for f in dataclasses.fields(Metrics)}


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
        metric: str,
        threshold: float | None,
        rtol: float,
        atol: float,
    ) -> None:
        self.a, self.b, self.pairs, self.diff = a, b, pairs, diff
        self.metric, self.threshold, self.rtol, self.atol = metric, threshold, rtol, atol
        self.first_divergence = next((p for p in pairs if p.diverged and p.b), None) or next(
            (p for p in pairs if p.diverged), None
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
        if self.metric == "sqnr":
            return f"SQNR < {self.threshold:g} dB"
        if self.metric == "cosine":
            return f"cosine < {self.threshold:g}"
        return f"not allclose(rtol={self.rtol:g}, atol={self.atol:g})"

    def table(self) -> pd.DataFrame:
        """One row a pair: ``a``, ``b``, ``status``, ``op``, ``target``, shapes and dtypes
        on both sides, ``max_abs_error``, ``max_rel_error``, ``cosine``, ``sqnr_db``,
        ``rmse``, ``rel_l2``, NaN/Inf counts (``nonfinite_a``, ``nonfinite_b``,
        ``one_sided``), ``allclose``, ``diverged`` and ``reason``."""
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
            row |= {"diverged": p.diverged, "reason": p.reason}
            rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """``85 pairs compared (SQNR < 30 dB): 12 diverge; first at 'matmul_1' (SQNR 27.4 dB)``."""
        measured = sum(p.metrics is not None for p in self.pairs)
        bad = self.diverged()
        text = f"{measured} of {len(self.pairs)} pairs compared ({self.criterion()}): "
        if not bad:
            return text + "the runs agree everywhere"
        first = self.first_divergence
        assert first is not None
        return text + f"{len(bad)} diverge; first at {first.name!r} ({first.reason})"

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

    # hooks read by fxviz.to_dot / fxviz.show / fxviz.report
    def _fxviz_drawing(self) -> DrawGraph:
        return self.drawing()

    def _fxviz_overlays(self) -> list[Any]:
        from fxviz.overlays import highlight_errors

        return [highlight_errors(), self.overlay()]

    def _fxviz_inspector(self, name: str, max_preview: int = 64) -> dict[str, Any]:
        from fxviz._compare._view import inspector

        return inspector(self, name, max_preview)

    def _fxviz_rows(self) -> list[dict[str, Any]]:
        from fxviz._compare._view import table_rows

        return table_rows(self)

    def _fxviz_report(self, max_preview: int = 64) -> tuple[dict[str, Any], str]:
        from fxviz._compare._view import report_data

        return report_data(self, max_preview)

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
    """Compare two recorded runs node by node: where do they part?

    The runs may be of the same graph or of graphs related by a pass (aligned as
    :func:`fxviz.diff` does: provenance, then name, then target and rank), in other
    dtypes, on other devices or on other inputs; either may be live or loaded from a
    file. Every aligned pair of first output tensors is measured in float64: max
    abs/rel error, cosine similarity, SQNR, RMSE, relative L2, NaN/Inf on one side only.

    A pair diverges when its shapes differ, when NaN/Inf appear on one side only, or when
    it fails ``metric``: ``"sqnr"`` (default: SQNR below ``sqnr_db``, 30 dB, about 3%
    relative L2 error), ``"cosine"`` (below ``min_cosine``) or ``"allclose"`` (outside
    ``rtol``/``atol``, as ``torch.allclose``). ``provenance`` maps node names of ``b``
    to the names in ``a`` they were made from, where a pass knows it.

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        >>> x = torch.randn(4, 8)
        >>> same = fxviz.compare(fxviz.record(model, x), fxviz.record(model, x))
        >>> same.first_divergence is None
        True
        >>> other = fxviz.compare(fxviz.record(model, x), fxviz.record(model, x + 1))
        >>> other.first_divergence.name
        'input_1'
    """
    from fxviz.render._align import align
    from fxviz.render._api import draw
    from fxviz.render._diff import GraphDiff

    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    for name, run in (("a", a), ("b", b)):
        if not isinstance(run, Recording):
            raise InputError(
                f"compare() takes two recordings; {name} is a {type(run).__name__}. Record "
                "a run with fxviz.record(model, *inputs) or load one with fxviz.load(path); "
                "fxviz.compare_dtype and fxviz.compare_pass record both runs for you"
            )
    threshold = {"sqnr": sqnr_db, "cosine": min_cosine, "allclose": None}[metric]
    left, right = draw(a), draw(b)
    aligned = align(left, right, provenance or {})
    measured: dict[tuple[Any, ...], Metrics] = {}  # views of measured memory: same numbers
    with one_thread():
        pairs = _pairs(aligned, metric, threshold, rtol, atol, measured)
    return Comparison(
        a,
        b,
        pairs,
        GraphDiff(left, right, aligned),
        metric=metric,
        threshold=threshold,
        rtol=rtol,
        atol=atol,
    )


def _pairs(
    aligned: list[Any],
    metric: str,
    threshold: float | None,
    rtol: float,
    atol: float,
    measured: dict[tuple[Any, ...], Metrics],
) -> list[NodeComparison]:
    return [
        _pair(
            p.before.record if p.before else None,
            p.after.record if p.after else None,
            p.status,
            (p.after or p.before),
            metric,
            threshold,
            rtol,
            atol,
            measured,
        )
        for p in aligned
    ]


def _pair(
    ra: NodeRecord | None,
    rb: NodeRecord | None,
    status: str,
    drawn: Any,
    metric: str,
    threshold: float | None,
    rtol: float,
    atol: float,
    measured: dict[tuple[Any, ...], Metrics],
) -> NodeComparison:
    first_a = ra.outputs[0] if ra is not None and ra.outputs else None
    first_b = rb.outputs[0] if rb is not None and rb.outputs else None
    known = rb or ra
    base = {
        "a": ra.name if ra else (drawn.name if status == "removed" else None),
        "b": rb.name if rb else (drawn.name if status != "removed" else None),
        "status": status,
        "op": known.op if known else drawn.kind,
        "target": known.target if known else drawn.title,
        "shape_a": first_a.shape if first_a else None,
        "shape_b": first_b.shape if first_b else None,
        "dtype_a": first_a.dtype if first_a else None,
        "dtype_b": first_b.dtype if first_b else None,
    }
    if ra is None or rb is None:
        return NodeComparison(
            **base, metrics=None, diverged=False, reason=f"only in {'b' if ra is None else 'a'}"
        )
    if first_a and first_b and first_a.shape != first_b.shape:
        shapes = f"shape {_shape(first_a.shape)} vs {_shape(first_b.shape)}"
        return NodeComparison(**base, metrics=None, diverged=True, reason=shapes)
    x, y = _first_tensor(ra), _first_tensor(rb)
    if x is None or y is None:
        why = "values not kept" if not (ra.kept and rb.kept) else "not a tensor"
        return NodeComparison(**base, metrics=None, diverged=False, reason=why if first_a else "")
    if x.shape != y.shape:
        return NodeComparison(
            **base,
            metrics=None,
            diverged=True,
            reason=f"shape {_shape(x.shape)} vs {_shape(y.shape)}",
        )
    if x.is_complex() or y.is_complex() or x.is_meta or y.is_meta:
        return NodeComparison(
            **base, metrics=None, diverged=False, reason="not compared (complex or meta)"
        )
    key = memory_key(x, y)
    metrics = measured.get(key) if key is not None else None
    if metrics is None:
        metrics = measure(x, y, rtol=rtol, atol=atol, nonfinite=_may_be_nonfinite(ra, rb))
        if key is not None:
            measured[key] = metrics
    diverged, reason = _verdict(metrics, metric, threshold)
    return NodeComparison(**base, metrics=metrics, diverged=diverged, reason=reason)


def _verdict(m: Metrics, metric: str, threshold: float | None) -> tuple[bool, str]:
    sqnr = (
        f"SQNR {m.sqnr_db:.1f} dB"
        if math.isfinite(m.sqnr_db)
        else ("equal" if m.sqnr_db > 0 else "SQNR -inf dB")
    )
    if m.one_sided:
        return True, f"{m.one_sided} NaN/Inf on one side only; {sqnr}"
    if metric == "sqnr":
        return m.sqnr_db < threshold, sqnr  # type: ignore[operator]
    if metric == "cosine":
        return m.cosine < threshold, f"cosine {m.cosine:.6f}"  # type: ignore[operator]
    return not m.allclose, f"max abs error {m.max_abs_error:.3g}, max rel {m.max_rel_error:.3g}"


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


def _shape(shape: Any) -> str:
    return "×".join(map(str, shape)) or "scalar"
