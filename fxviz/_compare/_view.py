"""How a :class:`~fxviz.Comparison` looks: a heat overlay, the inspector, the report page."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any, cast

from fxviz.overlays import Style, highlight_errors
from fxviz.render._source import Source

if TYPE_CHECKING:
    import pandas as pd

    from fxviz._compare._comparison import Comparison, NodeComparison
    from fxviz.render._fold import Params
    from fxviz.render._model import DrawGraph, DrawNode

__all__ = [
    "ComparisonSource",
    "heat_overlay",
    "inspector",
    "report_data",
    "report_table",
    "table_rows",
]

# agreement, from far above the threshold to far below it
_SHADES = ("#ebfbee", "#d3f9d8", "#fff3bf", "#ffe066", "#ffc078", "#ff922b", "#fa5252")
_MEANINGS = (
    "agree, far above the threshold",
    "agree, above the threshold",
    "agree, near the threshold",
    "just above the threshold",
    "just below the threshold",
    "below the threshold",
    "far below, or only in one run",
)
FILL = {
    "title": "fill: agreement of the two runs",
    "rows": [list(r) for r in zip(_SHADES, _MEANINGS, strict=True)],
}


def heat_overlay(comparison: Comparison) -> Any:
    """Green where the runs agree, yellow near the threshold, orange to red below it;
    a thick red border and a badge on the first divergence."""
    by_id: dict[str, NodeComparison] = {}
    for pair, drawn in zip(comparison.pairs, comparison.diff.pairs, strict=True):
        if drawn.after is not None:
            by_id[drawn.after.id] = pair
        elif drawn.before is not None:
            by_id[f"removed__{drawn.before.id}"] = pair
    first = comparison.first_divergence

    def overlay(node: DrawNode) -> Style | None:
        pair = by_id.get(node.id)
        if pair is None:
            return None
        if pair.metrics is None and not pair.diverged:
            return None
        step = _step(comparison, pair)
        tooltip = _tooltip(pair)
        if pair is first:
            return Style(
                fill=_SHADES[step],
                border="#c92a2a",
                penwidth=4.0,
                badge=f"◆ first divergence: {pair.reason}",
                tooltip=tooltip,
                classes=("cmp-first", f"cmp-{step}"),
            )
        badge = pair.reason if pair.diverged else None
        return Style(fill=_SHADES[step], badge=badge, tooltip=tooltip, classes=(f"cmp-{step}",))

    return overlay


def _step(comparison: Comparison, pair: NodeComparison) -> int:
    """0 (far better than the threshold) .. 6 (far worse), 6 for structural divergences."""
    m = pair.metrics
    if m is None or m.one_sided:
        return 6
    if comparison.metric == "sqnr":
        margin = m.sqnr_db - comparison.threshold  # type: ignore[operator]
        if math.isinf(margin):
            return 0 if margin > 0 else 6
        for step, floor in enumerate((40.0, 20.0, 10.0, 0.0, -10.0, -20.0)):
            if margin >= floor:
                return step
        return 6
    if comparison.metric == "cosine":
        return 1 if m.cosine >= comparison.threshold else 5  # type: ignore[operator]
    return 1 if m.allclose else 5


def _tooltip(pair: NodeComparison) -> str:
    lines = [f"a: {pair.a or '—'} · b: {pair.b or '—'}"]
    lines += [f"{label}: {value}" for label, value in _metric_fields(pair)]
    return "\n".join(lines)


def _metric_fields(pair: NodeComparison) -> list[tuple[str, str]]:
    m = pair.metrics
    fields = []
    if pair.dtype_a != pair.dtype_b and pair.dtype_a is not None and pair.dtype_b is not None:
        fields.append(("dtypes", f"{_dtype(pair.dtype_a)} (a) vs {_dtype(pair.dtype_b)} (b)"))
    if m is None:
        if pair.reason:
            fields.append(("compared", pair.reason))
        return fields
    if pair.measured_on == "statistics":  # the numbers below are of min/max/mean/std/absmax
        fields.append(("compared", "statistics only (values not kept)"))
    fields += [
        ("SQNR", f"{m.sqnr_db:.2f} dB"),
        ("cosine", f"{m.cosine:.8f}"),
        ("max abs error", f"{m.max_abs_error:.4g}"),
        ("max rel error", f"{m.max_rel_error:.4g}"),
        ("RMSE · rel L2", f"{m.rmse:.4g} · {m.rel_l2:.4g}"),
    ]
    if m.nonfinite_a or m.nonfinite_b:
        fields.append(
            ("NaN/Inf a · b · one side", f"{m.nonfinite_a} · {m.nonfinite_b} · {m.one_sided}")
        )
    fields.append(("verdict", ("diverges: " if pair.diverged else "agrees: ") + pair.reason))
    return fields


def inspector(comparison: Comparison, name: str, max_preview: int = 64) -> dict[str, Any]:
    """The inspector of one node: the comparison, then each run's shapes, stats and values."""
    from fxviz.render._inspect import inspector_data

    try:
        pair = comparison[name]
    except KeyError:  # UnknownNodeError: a node of neither run
        return {}
    fields = [["compared", f"a: {pair.a or '—'} · b: {pair.b or '—'} ({pair.status})"]]
    fields += [list(f) for f in _metric_fields(pair)]
    data: dict[str, Any] = {"name": name}
    for side, run, node in (("a", comparison.a, pair.a), ("b", comparison.b, pair.b)):
        if node is None or node not in run:
            continue
        info = inspector_data(node, None, run[node], max_preview=max_preview)
        fields += [[f"{side} {key}", value] for key, value in info["fields"]]
        if "preview" in info:
            fields.append([f"{side} value", info["preview"]])
        if "error" in info:
            data["error"] = f"{side}: {info['error']}"
        if side == "b" and "histogram" in info:
            data["histogram"] = info["histogram"]
    data["fields"] = fields
    return data


def report_table(comparison: Comparison) -> str:
    """The HTML section under the report's graph: the summary and the diverging pairs."""
    table = comparison.table()
    shown = table[table["diverged"]]
    columns = [
        *("a", "b", "op", "target", "dtype_a", "dtype_b"),
        *("sqnr_db", "cosine", "max_abs_error", "max_rel_error", "reason"),
    ]
    body = (
        cast("pd.DataFrame", shown[columns])
        .head(200)
        .to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.4g}")
    )
    more = f"<p>{len(shown) - 200} more not shown.</p>" if len(shown) > 200 else ""
    return (
        f'<section class="fxviz-comparison"><h2>Where the runs part</h2>'
        f"<p>{html.escape(comparison.summary())}</p>{body}{more}</section>"
    )


def _dtype(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def table_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """One small dict a pair for the linked table of the widget and the report."""
    return [
        {
            "name": p.name,
            "op": p.op,
            "target": p.target,
            "dtypes": " / ".join(
                _dtype(d) if d is not None else "—" for d in (p.dtype_a, p.dtype_b)
            ),
            "SQNR dB": _number(p.sqnr_db, 2),
            "cosine": _number(p.cosine, 6),
            "max abs error": _number(p.max_abs_error, None),
            "verdict": ("diverges: " if p.diverged else "") + p.reason,
        }
        for p in comparison.pairs
    ]


def report_data(comparison: Comparison, max_preview: int = 64) -> tuple[dict[str, Any], str]:
    """What ``fxviz.report(comparison)`` puts in the page: the shaded drawing, a table of
    every pair, each node's inspector with both runs' values, and the diverging pairs."""
    from fxviz.render._api import Drawing
    from fxviz.render._payload import box_expansions, graph_payload

    drawing = Drawing(comparison, group=True)  # the shaded drawing (ComparisonSource)
    view = drawing.view(depth=drawing.opening_depth, legend=False)  # the page's HTML legend
    data = graph_payload(drawing, view, include_rows=False)
    data.update(
        rows=table_rows(comparison),
        inspectors={
            n.name: inspector(comparison, n.name, max_preview) for n in drawing.graph.nodes
        },
        expansions=box_expansions(drawing, view),
        model=f"{_model(comparison.a)} vs {_model(comparison.b)}",
        status=comparison.summary(),
    )
    return data, report_table(comparison)


def _model(recording: Any) -> str:
    gm = recording.graph_module
    name = getattr(gm, "name", None) if type(gm).__name__ == "SavedGraph" else None
    return name if isinstance(name, str) else type(gm).__name__


def _number(value: float | None, digits: int | None) -> float | str | None:
    """JSON-safe: infinities as text (``"inf"``), others rounded."""
    if value is None:
        return None
    if not math.isfinite(value):
        return str(value)
    return round(value, digits) if digits is not None else float(f"{value:.4g}")


class ComparisonSource(Source):
    """How fxviz draws a :class:`~fxviz.Comparison` (registered by ``fxviz._compare``):
    both runs merged and shaded by agreement, both runs' rows, inspectors and page."""

    def drawing(self, params: Params) -> DrawGraph:
        return self.obj.drawing()

    def overlays(self) -> list[Any]:
        return [highlight_errors(), self.obj.overlay()]

    def graph_module(self) -> Any:
        return None

    def rows(self) -> list[dict[str, Any]] | None:
        return table_rows(self.obj)

    def inspector(self, name: str, max_preview: int = 64) -> dict[str, Any] | None:
        return inspector(self.obj, name, max_preview)

    def fill(self) -> dict[str, Any] | None:
        return FILL

    def report(self, max_preview: int = 64) -> tuple[dict[str, Any], str] | None:
        return report_data(self.obj, max_preview)
