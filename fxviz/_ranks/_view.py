"""How a rank comparison looks: each node shaded by its farthest rank and badged with
how far each rank is from rank 0 (or the reference); the report page around it."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from fxviz.overlays import Style, highlight_errors
from fxviz.render._api import draw
from fxviz.render._source import Source

if TYPE_CHECKING:
    from fxviz._ranks._compare_ranks import RankCell, RankComparison
    from fxviz.render._fold import Params
    from fxviz.render._model import DrawGraph, DrawNode

__all__ = ["RankComparisonSource", "inspector", "rank_overlay", "report_data", "table_rows"]

_AGREE, _NEAR, _PART = "#d3f9d8", "#fff3bf", "#ffa8a8"


def _distance(cell: RankCell) -> str:
    """``=`` bitwise equal, else the SQNR or the reason."""
    m = cell.metrics
    if cell.reason == "bitwise equal" or (
        m is not None and m.max_abs_error == 0 and not m.one_sided
    ):
        return "="
    if m is None:
        return "?" if not cell.diverged else "≠"
    return f"{m.sqnr_db:.0f}dB" if math.isfinite(m.sqnr_db) else "="


def _cells(result: RankComparison, name: str) -> list[RankCell]:
    return [c for r in result.ranks if (c := result.cells.get((name, r))) is not None]


def _row_name(result: RankComparison, name: str) -> str | None:
    """The compared row a drawn node stands for (its own name; with gradients too)."""
    return name if any((name, r) in result.cells for r in result.ranks) else None


def rank_overlay(result: RankComparison) -> Any:
    """Green where every rank agrees, red where one parts (a badge ``r1 = · r2 41dB``
    lists each rank's distance); a thick red border on the first divergence."""
    first = result.first_divergence

    def overlay(node: DrawNode) -> Style | None:
        name = _row_name(result, node.name)
        if name is None:
            return None
        cells = _cells(result, name)
        shown = [c for c in cells if not (result.reference is None and c.rank == result.ranks[0])]
        if not shown:
            return None
        parting = [c for c in shown if c.diverged]
        badge = " · ".join(f"r{c.rank} {_distance(c)}" for c in shown)
        tooltip = "\n".join(f"rank {c.rank}: {c.reason}" for c in shown)
        if first is not None and first.node == name:
            return Style(
                fill=_PART,
                border="#c92a2a",
                penwidth=4.0,
                badge=f"◆ rank {first.rank} parts here · {badge}",
                tooltip=tooltip,
                classes=("ranks-first", "ranks-part"),
            )
        if parting:
            return Style(fill=_PART, badge=badge, tooltip=tooltip, classes=("ranks-part",))
        measured = any(c.metrics is not None for c in shown)
        return Style(
            fill=_AGREE if measured else _NEAR,
            badge=badge if measured else None,
            tooltip=tooltip,
            classes=("ranks-agree",),
        )

    return overlay


def table_rows(result: RankComparison) -> list[dict[str, Any]]:
    """One small dict a node for the report's linked table: each rank's distance."""
    rows = []
    for name in result.nodes:
        row: dict[str, Any] = {"name": name}
        for cell in _cells(result, name):
            row[f"rank {cell.rank}"] = _distance(cell)
        row["verdict"] = "; ".join(
            f"rank {c.rank}: {c.reason}" for c in _cells(result, name) if c.diverged
        )
        rows.append(row)
    return rows


def inspector(result: RankComparison, name: str, max_preview: int = 64) -> dict[str, Any]:
    """A node's inspector: each rank's verdict, then the base run's own fields."""
    from fxviz.render._inspect import inspector_data

    fields = [[f"rank {c.rank}", c.reason] for c in _cells(result, name)]
    base = result.base
    if name in base:
        info = inspector_data(name, None, base[name], max_preview=max_preview)
        fields += [list(f) for f in info["fields"]]
        if "preview" in info:
            fields.append(["value", info["preview"]])
    return {"name": name, "fields": fields} if fields else {}


def report_data(result: RankComparison, max_preview: int = 64) -> tuple[dict[str, Any], str]:
    """What ``fxviz.report(result)`` puts in the page: the base run's drawing shaded by
    rank agreement, a row a node, each node's inspector, and the table of ranks."""
    from fxviz.render._api import Drawing
    from fxviz.render._payload import box_expansions, graph_payload

    drawing = Drawing(result, group=True)
    view = drawing.view(depth=drawing.opening_depth, legend=False)
    data = graph_payload(drawing, view, include_rows=False)
    data.update(
        rows=table_rows(result),
        inspectors={n.name: inspector(result, n.name, max_preview) for n in drawing.graph.nodes},
        expansions=box_expansions(drawing, view),
        model=f"{len(result.ranks)} ranks of {_model(result.base)}",
        status=result.summary(),
    )
    table = result.table("sqnr_db" if result.metric == "sqnr" else "max_abs_error")
    body = table.to_html(escape=True, na_rep="", float_format=lambda v: f"{v:.4g}")
    layout = "".join(
        f"<li>rank {r}: {html.escape(_where(rec))}</li>" for r, rec in result.recordings.items()
    )
    extra = (
        '<section class="fxviz-ranks"><h2>Where the ranks part</h2>'
        f"<p>{html.escape(result.summary())}</p><ul>{layout}</ul>{body}</section>"
    )
    return data, extra


def _where(rec: Any) -> str:
    groups = ", ".join(f"group {g.get('name')}: ranks {g.get('ranks')}" for g in rec.process_groups)
    path = getattr(rec, "path", None)
    world = f"of {rec.world_size}" if rec.world_size is not None else "(no process group)"
    return " ".join(x for x in (world, f"({path.name})" if path else "", groups) if x)


def _model(recording: Any) -> str:
    gm = recording.graph_module
    name = getattr(gm, "name", None) if type(gm).__name__ == "SavedGraph" else None
    return name if isinstance(name, str) else type(gm).__name__


class RankComparisonSource(Source):
    """How fxviz draws a :class:`RankComparison` (registered by ``fxviz._ranks``): the base
    rank's graph, each node badged with how far each rank is from it."""

    def drawing(self, params: Params) -> DrawGraph:
        return draw(self.obj.base)

    def overlays(self) -> list[Any]:
        return [highlight_errors(), rank_overlay(self.obj)]

    def graph_module(self) -> Any:
        return None

    def rows(self) -> list[dict[str, Any]] | None:
        return table_rows(self.obj)

    def inspector(self, name: str, max_preview: int = 64) -> dict[str, Any] | None:
        return inspector(self.obj, name, max_preview)

    def report(self, max_preview: int = 64) -> tuple[dict[str, Any], str] | None:
        return report_data(self.obj, max_preview)
