"""Draw a :class:`Capture`: each graph call as a frame, each ``python`` node as a break marker."""

from __future__ import annotations

from typing import Any

from fxviz._capture import Capture, GraphBreak

__all__ = ["frame_capture"]

_WIDTH = 60


def frame_capture(drawing: Any, capture: Capture) -> Any:
    """Put the nodes of each graph call in a frame of its own (``g0``, ``g1``, ``g1r2``...)
    and label every ``python`` node with why the graph ended and the user's line.

    A run that is one graph call has no frame: there is nothing to tell apart (its nodes
    keep the graph's own names, see :func:`fxviz._capture._stitch.stitch`)."""
    nodes = {n.name: n for n in capture.graph.nodes}
    labels = dict(drawing.modules)
    calls = {call.prefix.rstrip("_"): call for call in capture.calls if call.prefix}
    for drawn in drawing.nodes:
        node = nodes.get(drawn.name)
        if node is None:
            continue
        info = node.meta.get("fxviz_break")
        if isinstance(info, GraphBreak):
            drawn.title = "Python"
            drawn.color_key = "python"  # one colour for every break marker
            drawn.lines = (
                [_short(info.reason), _short(info.where)] if info.where else [_short(info.reason)]
            )
            drawn.tooltip = f"Python ran here, outside any graph: {info}\n{drawn.tooltip}"
            continue
        if node.op == "get_attr" and "fxviz_graph" not in node.meta:
            _place_parameter(drawn, node, calls)
            continue
        if "fxviz_graph" not in node.meta:
            continue
        frame = drawn.name.split("_", 1)[0]
        if frame not in calls:
            continue
        drawn.module = f"{frame}.{drawn.module}" if drawn.module else frame
    for frame, call in calls.items():
        runs = frame.split("r", 1)[1] if "r" in frame else ""
        count = f", call {runs}" if runs else ""
        drawing.modules[frame] = f"graph {call.graph} ({capture.method}{count})"
        for path, label in labels.items():
            drawing.modules[f"{frame}.{path}"] = label
    return drawing


def _place_parameter(drawn: Any, node: Any, calls: dict[str, Any]) -> None:
    """A parameter sits in its module's frame inside the first graph call that reads it."""
    frames = [u.name.split("_", 1)[0] for u in node.users if "fxviz_graph" in u.meta]
    frame = next((f for f in frames if f in calls), None)
    if frame is None:
        return
    owner = str(node.target).rpartition(".")[0]
    drawn.module = f"{frame}.{owner}" if owner else frame


def _short(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"
