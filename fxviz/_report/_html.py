"""``fxviz.report``: one self-contained HTML file to share a graph or a recorded run.

The page carries the same front end as the notebook widget (WebAssembly Graphviz
included) and the records as JSON: it opens offline, with no server and no CDN, and a
recorded run can be replayed in it, forward and back.
"""

from __future__ import annotations

import datetime
import html
import json
import pathlib
import platform
from typing import Any

import torch

from fxviz._record._records import Recording
from fxviz._shapes._report import ShapeReport
from fxviz._static import static_file
from fxviz.render._api import _default_overlays, draw
from fxviz.render._collapse import (
    group_wide,
    module_id,
    module_members,
    opening_depth,
    unit_path,
    units,
)
from fxviz.render._diff import GraphDiff
from fxviz.render._dot import render

__all__ = ["report"]

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 1.2em; font: 13px system-ui, sans-serif; color: #222; }}
header h1 {{ font-size: 18px; margin: 0 0 4px; }} header p {{ margin: 2px 0; color: #555; }}
.fxviz-timeline {{ width: 100%; margin: 8px 0 4px; }}
.fxviz-graph {{ height: 70vh !important; }} .fxviz-inspector {{ max-height: 70vh !important; }}
{css}
</style></head>
<body>
<header><h1>{title}</h1>{facts}</header>
<div id="fxviz-report"></div>
{extra}
<script>{bundle}</script>
<script type="application/json" id="fxviz-data">{data}</script>
<script>fxvizReport.mountReport(document.getElementById("fxviz-report"),
  JSON.parse(document.getElementById("fxviz-data").textContent));</script>
</body></html>
"""


def report(
    obj: Any,
    path: str | pathlib.Path | None = None,
    *,
    title: str | None = None,
    inputs: Any = None,
    max_preview: int = 64,
) -> str | None:
    """Write ``obj`` as one self-contained HTML file (or return the HTML if ``path`` is None).

    GraphModules, ShapeReports, ExportedPrograms and TorchScript give the interactive graph
    and its table; a Recording or a Debugger also gives a replay of the run (a timeline,
    step forward and back, each node's shapes, statistics, histogram, capped value
    preview and error); a GraphDiff its merged view and change table.

    Example:
        >>> import torch, fxviz
        >>> page = fxviz.report(fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3)))
        >>> page.startswith("<!doctype html>") and "http" not in page.split("<script>")[0]
        True
    """
    data = _data(obj, max_preview)
    name = title or f"fxviz: {data['model']}"
    facts = "".join(f"<p>{html.escape(line)}</p>" for line in _facts(obj, data, inputs))
    extra = _diff_table(obj) if isinstance(obj, GraphDiff) else ""
    page = _PAGE.format(
        title=html.escape(name),
        facts=facts,
        extra=extra,
        css=_read("widget.css"),
        bundle=_read("report.js").replace("</script", "<\\/script"),
        data=json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c"),
    )
    if path is None:
        return page
    pathlib.Path(path).write_text(page, encoding="utf-8")
    return None


def _data(obj: Any, max_preview: int) -> dict[str, Any]:
    from fxviz._record import Debugger
    from fxviz.render._inspect import inspector_data, table_rows

    recording = obj.recording if isinstance(obj, (Debugger, ShapeReport)) else obj
    replay = isinstance(obj, (Recording, Debugger))
    drawn_from = obj.recording if isinstance(obj, Debugger) else obj
    drawing = group_wide(draw(drawn_from))  # wide levels (flat 20k-node chains) in groups
    depth = opening_depth(drawing)
    overlays = _default_overlays(drawn_from)
    dot = render(drawing, depth=depth, overlays=overlays, legend=False).source  # HTML legend
    nodes = {n.name: n for n in drawing.nodes}
    fx_nodes = _fx_nodes(obj)
    records = dict(recording.items()) if isinstance(recording, Recording) else {}
    inspectors = {}
    for name, drawn in nodes.items():
        record = records.get(name)
        info = inspector_data(name, fx_nodes.get(name), record, max_preview=max_preview)
        planned = [list(f) for f in info["fields"][:3]]
        if drawn.lines:
            planned.append(["expected output", drawn.lines[0]])
        info["planned"] = planned
        inspectors[name] = info
    order = [r.name for r in records.values()]
    rows = (
        table_rows(list(records.values()))
        if records
        else [
            {"name": n.name, "op": n.kind, "target": n.title, "shape": n.out_label}
            for n in nodes.values()
        ]
    )
    return {
        "dot": dot,
        "units": units(drawing, depth),
        "expansions": _expansions(drawing, depth, overlays),
        "index": [[n.name, n.title, n.module] for n in drawing.nodes],  # what search looks in
        "rows": rows,
        "inspectors": inspectors,
        "order": order,
        "records": {
            r.name: {"nonfinite": r.nonfinite, "error": None if r.error is None else str(r.error)}
            for r in records.values()
        },
        "replay": replay and bool(order),
        "model": drawing.name,
        "status": "",
    }


_OPENED_MAX = 3000  # nodes a box may hold to be opened in the page


def _expansions(drawing: Any, depth: int | None, overlays: list) -> dict[str, Any]:
    """For each collapsed box of the opening view, its insides drawn on their own: the page
    has no kernel to redraw, so a click on a box shows this DOT."""
    if depth is None:
        return {}
    members: dict[str, list[Any]] = {}
    for n in drawing.nodes:
        path = unit_path(n.module, depth, frozenset())
        if path is not None:
            members.setdefault(path, []).append(n)
    opened = {}
    for path, inside in members.items():
        if 1 < len(inside) <= _OPENED_MAX:
            sub = module_members(drawing, path)
            dot = render(sub, depth=None, overlays=overlays, legend=False).source
            opened[module_id(path)] = {"dot": dot, "nodes": [[n.name, n.id] for n in inside]}
    return opened


def _fx_nodes(obj: Any) -> dict[str, Any]:
    gm = getattr(obj, "graph_module", obj)
    graph = getattr(gm, "graph", None)
    nodes = getattr(graph, "nodes", None)
    if nodes is None or not hasattr(nodes, "__iter__") or callable(nodes):
        return {}
    return {n.name: n for n in nodes}


def _facts(obj: Any, data: dict[str, Any], inputs: Any) -> list[str]:
    import fxviz

    made = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        f"model: {data['model']} · {len(data['inspectors'])} nodes · made {made}",
        f"fxviz {fxviz.__version__} · torch {torch.__version__} · Python {platform.python_version()}",
    ]
    shapes = _input_shapes(obj, inputs)
    if shapes:
        lines.append(f"inputs: {shapes}")
    summary = getattr(obj, "summary", None)
    if callable(summary):
        text = summary()
        lines.append(
            text if isinstance(text, str) else ", ".join(f"{k} {v}" for k, v in text.items())
        )
    return lines


def _input_shapes(obj: Any, inputs: Any) -> str:
    records = obj.recording if hasattr(obj, "recording") and not isinstance(obj, Recording) else obj
    if isinstance(records, Recording):
        placeholders = [r for r in records.values() if r.op == "placeholder"]
        return ", ".join(
            f"{r.name}: {r.dtype and str(r.dtype).removeprefix('torch.')}{list(r.shape or [])}"
            for r in placeholders
        )
    if inputs is not None:
        return ", ".join(f"{list(t.shape)}" for t in inputs if isinstance(t, torch.Tensor))
    return ""


def _diff_table(diff: GraphDiff) -> str:
    table = diff.table()
    changed = table[table["status"] != "same"]
    body = changed.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.3g}")
    return f"<h2>What changed</h2><p>{html.escape(diff.summary())}</p>{body}"


def _read(name: str) -> str:
    return static_file(name).read_text(encoding="utf-8")
