"""``fxviz.report``: one self-contained HTML file to share a graph or a recorded run.

The page carries the same front end as the notebook widget (WebAssembly Graphviz
included) and the records as JSON: it opens offline, with no server and no CDN, and a
recorded run can be replayed in it, forward and back.
"""

from __future__ import annotations

import datetime
import html
import itertools
import json
import pathlib
import platform
from typing import Any

import torch

from fxviz._capture import Capture
from fxviz._record._records import Recording
from fxviz._static import static_file
from fxviz._training import Incident
from fxviz._version import __version__
from fxviz.render._api import Drawing
from fxviz.render._fold import Params
from fxviz.render._inspect import inspector_data
from fxviz.render._payload import box_expansions, graph_payload, replay_payload
from fxviz.render._source import source_of
from fxviz.render._style import visible
from fxviz.render._title import capture_name

__all__ = ["report"]

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 1.2em; font: 13px system-ui, sans-serif; color: var(--jp-ui-font-color1, #222);
  background: var(--jp-layout-color0, #fff); }}
header h1 {{ font-size: 18px; margin: 0 0 4px; }}
header p {{ margin: 2px 0; color: var(--jp-ui-font-color2, #555); }}
.fxviz-timeline {{ width: 100%; margin: 8px 0 4px; }}
.fxviz-graph {{ height: 70vh !important; }} .fxviz-inspector {{ max-height: 70vh !important; }}
{css}
</style></head>
<body class="fxviz-page">
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
    params: Params = "fold",
) -> str | None:
    """Write ``obj`` as one self-contained HTML file (or return the HTML if ``path`` is None).

    GraphModules, ShapeReports, ExportedPrograms and TorchScript give the interactive graph
    and its table; a Recording or a Debugger also gives a replay of the run (a timeline,
    step forward and back, each node's shapes, statistics, histogram, capped value
    preview and error); a GraphDiff its merged view and change table. ``params``: as
    for :func:`fxviz.to_dot`; the replay steps over parameter fetches like the Debugger.

    Examples:
        >>> import torch, fxviz
        >>> page = fxviz.report(fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3)))
        >>> page.startswith("<!doctype html>") and "http" not in page.split("<script>")[0]
        True
    """
    if isinstance(obj, Incident):  # a training run's bad step: the page of its replay
        title = title or f"fxviz: {obj.headline}"
        obj = obj.replay()
    source = source_of(obj)
    own = source.report(max_preview)  # comparisons and joint graphs make their own page
    if own is not None:
        data, extra = own
    else:
        data = _data(obj, max_preview, params)
        extra = source.report_extra()
    name = title or f"fxviz: {data['model']}"
    facts = "".join(f"<p>{html.escape(visible(line))}</p>" for line in _facts(obj, data, inputs))
    page = _PAGE.format(
        title=html.escape(visible(name)),  # a bidi override must not reorder the title
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


def _data(obj: Any, max_preview: int, params: Params = "fold") -> dict[str, Any]:
    """The page's data: the same payload the widget gets (:mod:`fxviz.render._payload`),
    plus every node's inspector and, for a recorded run, the Debugger's replay states."""
    source = source_of(obj)
    recording = source.recording()
    skip_fetches = source.replay()
    replay = skip_fetches is not None
    records = recording.records() if isinstance(recording, Recording) else None
    drawing = Drawing(source.shown(), params=params, group=True)
    if replay and records:  # each node is marked as the replay runs it, never before
        drawing.defaults = []  # (no NaN outline nor error on a node not run yet)
    view = drawing.view(depth=drawing.opening_depth, legend=False)  # drawn once; HTML legend
    data = graph_payload(drawing, view, records or None)
    data["expansions"] = box_expansions(drawing, view)  # a click on a box opens it offline
    fx_nodes = _fx_nodes(source.graph_module())
    by_name = dict(recording.items()) if isinstance(recording, Recording) else {}
    inspectors = {}
    for drawn in drawing.graph.nodes:
        name = drawn.name
        info = inspector_data(
            name,
            fx_nodes.get(name),
            by_name.get(name),
            max_preview=max_preview,
            folded=drawn.folded,
        )
        planned = [list(f) for f in info["fields"][:3]]
        if drawn.lines:
            planned.append(["expected output", drawn.lines[0]])
        info["planned"] = planned
        inspectors[name] = info
    data["inspectors"] = inspectors
    if replay and records:
        data["replay"] = replay_payload(recording, skip_fetches=bool(skip_fetches))
        # at each position, the table shows the drawn nodes run so far (a parameter fetch
        # folded into its user is never a row: the model's own nodes, in order)
        drawn_before = list(
            itertools.accumulate((r.name in inspectors for r in records), initial=0)
        )
        for position, step in enumerate(data["replay"]["steps"]):
            step["rows"] = drawn_before[min(position + bool(step["error"]), len(records))]
    return data


def _fx_nodes(gm: Any) -> dict[str, Any]:
    graph = getattr(gm, "graph", None)
    nodes = getattr(graph, "nodes", None)
    if nodes is None or not hasattr(nodes, "__iter__") or callable(nodes):
        return {}
    return {n.name: n for n in nodes}


def _facts(obj: Any, data: dict[str, Any], inputs: Any) -> list[str]:
    made = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        f"model: {data['model']} · {len(data['inspectors'])} nodes · made {made}",
        f"fxviz {__version__} · torch {torch.__version__} · Python {platform.python_version()}",
    ]
    shapes = _input_shapes(obj, inputs)
    if shapes:
        lines.append(f"inputs: {shapes}")
    lines.extend(_capture_facts(obj))
    summary = getattr(obj, "summary", None)
    if callable(summary):
        lines.append(_without_count(str(summary()), obj))  # one line on every object with one
    return lines


def _without_count(summary: str, obj: Any) -> str:
    """A recording's summary (``"10 nodes, complete, 0.37 ms"``) less its count of every
    node run, parameter fetches included: the header counts the model's nodes once."""
    if isinstance(obj, Recording):
        head = f"{len(obj)} nodes, "
        if summary.startswith(head):
            return "run: " + summary.removeprefix(head)
    return summary


def _input_text(record: Any) -> str:
    """``float32[2, 3]`` for a tensor input, ``None`` or the value's type otherwise."""
    if record.shape is None:
        value = record.value
        return "None" if value is None else type(value).__name__
    return f"{str(record.dtype).removeprefix('torch.')}{list(record.shape)}"


def _capture_facts(obj: Any) -> list[str]:
    """How the graph was captured, and for a capture of one run, every break."""
    gm = getattr(obj, "graph_module", obj)
    method = getattr(gm, "meta", {}).get("fxviz_method") if gm is not None else None
    if not isinstance(gm, Capture):
        return [f"captured by: {capture_name(method)}"] if method else []
    lines = [f"captured by: {capture_name(method or gm.method)} ({gm.summary()})"]
    # one graph call: the Python after it only hands the output back, no break to show
    breaks = gm.breaks if len(gm.calls) > 1 else [b for b in gm.breaks if b.node != "python_return"]
    shown = 12  # a loop over many boxes breaks once a box: the first ones tell the story
    lines += [f"break {b.node}: {b}" for b in breaks[:shown]]
    if len(breaks) > shown:
        lines.append(f"… and {len(breaks) - shown} more breaks (capture.breaks)")
    return lines


def _input_shapes(obj: Any, inputs: Any) -> str:
    records = obj.recording if hasattr(obj, "recording") and not isinstance(obj, Recording) else obj
    if isinstance(records, Recording):
        placeholders = [r for r in records.values() if r.op == "placeholder"]
        return ", ".join(f"{r.name}: {_input_text(r)}" for r in placeholders)
    if inputs is not None:
        return ", ".join(f"{list(t.shape)}" for t in inputs if isinstance(t, torch.Tensor))
    return ""


def _read(name: str) -> str:
    return static_file(name).read_text(encoding="utf-8")
