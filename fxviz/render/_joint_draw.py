"""Forward and backward graphs of a :class:`~fxviz.JointGraph`, drawn side by side.

Each pass is a cluster of its own. Every backward node's tooltip names the forward node it
differentiates (and the model node that came from); selecting a node (``selected=``)
highlights it and everything linked to it on the other side: the forward node a backward
node differentiates, or the backward nodes that differentiate a forward node, and the
saved tensors between them.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, cast

from fxviz._capture import JointGraph
from fxviz._record._joint import JointRecording
from fxviz._record._records import unknown_node_message
from fxviz.errors import UnknownNodeError
from fxviz.render._api import Drawing, to_dot
from fxviz.render._fold import Params
from fxviz.render._from_fx import draw_fx
from fxviz.render._inspect import inspector_data
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode, dot_id
from fxviz.render._overlays import Overlay, Style, default_overlays
from fxviz.render._payload import graph_payload
from fxviz.render._source import Source, register

__all__ = [
    "JointGraphSource",
    "JointRecordingSource",
    "draw_joint",
    "joint_dot",
    "joint_report_data",
    "joint_selection",
    "linked_ids",
    "linked_nodes",
]

_SIDES = (("forward", "fw_"), ("backward", "bw_"))


def draw_joint(joint: Any, recording: Any = None) -> DrawGraph:
    """One :class:`DrawGraph` with the forward and the backward graph side by side.

    Node ids are ``fw_<name>`` and ``bw_<name>``; ``recording`` (a ``JointRecording``)
    adds shapes, statistics and the NaN/Inf and error overlays' data.
    """
    nodes: list[DrawNode] = []
    edges: list[DrawEdge] = []
    for side, prefix in _SIDES:
        gm = getattr(joint, side)
        records = getattr(recording, side) if recording is not None else None
        drawn = draw_fx(gm, records=records, name=side)
        for node in drawn.nodes:
            tooltip = node.tooltip + _link_text(joint, side, node.name)
            nodes.append(
                dataclasses.replace(
                    node, id=dot_id(node.name, prefix), module="", cluster=side, tooltip=tooltip
                )
            )
        edges.extend(
            dataclasses.replace(e, src=prefix + e.src, dst=prefix + e.dst) for e in drawn.edges
        )
    saved = len(joint.saved)
    clusters = {
        "backward": f"backward ({len(joint.backward.graph.nodes)} nodes, takes {saved} saved)",
        "forward": f"forward ({len(joint.forward.graph.nodes)} nodes, saves {saved})",
    }
    return DrawGraph(name="joint", nodes=nodes, edges=edges, clusters=clusters)


def linked_nodes(joint: Any, side: str, name: str) -> set[tuple[str, str]]:
    """``(side, name)`` of the nodes linked to node ``name`` of ``side``: the forward node
    a backward node differentiates, or the backward nodes (and saved tensors) of a
    forward node."""
    if side == "backward":
        forward = joint.link(name)
        return {("forward", forward)} if forward else set()
    return {("backward", b) for b, f in joint.links.items() if f == name}


def linked_ids(joint: Any, node_id: str) -> list[str]:
    """The drawing ids (``fw_<name>``/``bw_<name>``) linked to drawn node ``node_id``."""
    for side, prefix in _SIDES:
        if node_id.startswith(prefix):
            pairs = linked_nodes(joint, side, node_id.removeprefix(prefix))
            return sorted(dot_id(n, "fw_" if s == "forward" else "bw_") for s, n in pairs)
    return []


def joint_selection(joint: Any, side: str, name: str) -> Overlay:
    """Highlight node ``name`` of ``side`` (``"forward"``/``"backward"``) and its links."""
    linked = linked_nodes(joint, side, name)
    chosen = ("fw_" if side == "forward" else "bw_") + name

    def overlay(node: DrawNode) -> Style | None:
        if node.id == chosen:
            return Style(border="#8a2be2", penwidth=3.5, classes=("state-selected",))
        node_side = node.cluster or ""
        if (node_side, node.name) in linked:
            arrow = "⇠ differentiated by" if node_side == "forward" else "⇢ differentiates"
            return Style(
                border="#8a2be2", penwidth=3.0, fill="#efe3ff",
                badge=f"{arrow} {name}", classes=("joint-linked",),
            )  # fmt: skip
        return None

    return overlay


def _link_text(joint: Any, side: str, name: str) -> str:
    if side == "forward":
        source = joint.source(name)
        return f"\nfrom model node: {source}" if source else ""
    forward = joint.link(name)
    if forward is None:
        return ""
    if name in joint.saved:
        return f"\nsaved tensor: forward node {forward}"
    source = joint.source(forward)
    return f"\ndifferentiates forward node: {forward}" + (f" ({source})" if source else "")


def joint_dot(
    joint: Any, recording: Any = None, selected: str | None = None, side: str = "backward",
    **options: Any,
) -> Any:  # fmt: skip
    """``graphviz.Digraph`` of both passes side by side (see :func:`fxviz.to_dot` options)."""
    overlays: list[Overlay] = default_overlays() if recording is not None else []
    if selected is not None:
        if side not in ("forward", "backward"):
            raise ValueError(f"side must be 'forward' or 'backward', not {side!r}")
        gm = getattr(joint, side)
        if not any(n.name == selected for n in gm.graph.nodes):
            names = [n.name for n in gm.graph.nodes]
            raise UnknownNodeError(unknown_node_message(selected, names) + f" ({side})")
        overlays.append(joint_selection(joint, side, selected))
    extra = options.pop("overlay", None)
    if extra is not None:
        overlays.extend(cast("list[Overlay]", [extra] if callable(extra) else extra))
    options.setdefault("rankdir", "TB")
    return to_dot(draw_joint(joint, recording), overlay=overlays, **options)


def joint_report_data(obj: Any, max_preview: int = 64) -> tuple[dict[str, Any], str]:
    """What ``fxviz.report`` shows for a ``JointGraph`` or ``JointRecording``: both passes
    drawn side by side as ``fxviz.show`` draws them, each node's inspector (with the nodes
    it is linked to), and a table of the links, backward node to model node.

    Inspectors are keyed as the page's selection names a node: by name, or by drawing id
    (``fw_relu``) where both passes have a node of that name.
    """
    joint = getattr(obj, "joint", obj)
    recording = obj if obj is not joint else None
    drawing = Drawing(obj)
    view = drawing.view(depth=drawing.opening_depth)
    data = graph_payload(drawing, view)
    inspectors: dict[str, Any] = {}
    for node in drawing.graph.nodes:
        side = node.cluster or "forward"
        gm = getattr(joint, side)
        fx_node = next((n for n in gm.graph.nodes if n.name == node.name), None)
        records = getattr(recording, side) if recording is not None else None
        record = records.get(node.name) if records is not None else None
        info = inspector_data(node.name, fx_node, record, max_preview=max_preview)
        info["fields"] = [*info["fields"], *_link_fields(joint, side, node.name)]
        info["planned"] = [list(f) for f in info["fields"][:3]]
        key = node.name if data["units"].get(node.name) == node.id else node.id
        inspectors[key] = info
    data["inspectors"] = inspectors
    rows = "".join(
        f"<tr><td>{html.escape(b)}</td><td>{html.escape(f)}</td>"
        f"<td>{html.escape(joint.source(f) or '')}</td></tr>"
        for b, f in joint.links.items()
        if b not in joint.saved
    )
    bad = obj.first_nonfinite() if recording is not None else None
    first = (
        f"<p>first NaN/Inf in the backward pass: {html.escape(' ← '.join(x for x in bad if x))}</p>"
        if bad
        else ""
    )
    extra = (
        f"<h2>Backward to forward</h2>{first}<table class='fxviz-joint-links'><thead><tr>"
        "<th>backward node</th><th>differentiates forward node</th><th>model node</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    return data, extra


def _link_fields(joint: Any, side: str, name: str) -> list[tuple[str, str]]:
    linked = sorted(n for _, n in linked_nodes(joint, side, name))
    if side == "forward":
        source = joint.source(name)
        fields = [("from model node", source)] if source else []
        return fields + ([("differentiated by", ", ".join(linked))] if linked else [])
    if not linked:
        return []
    what = "saved tensor of" if name in joint.saved else "differentiates"
    source = joint.source(linked[0])
    return [(what, linked[0] + (f" (model node {source})" if source else ""))]


@register(JointGraph)
class JointGraphSource(Source):
    """Both passes side by side; selecting a node marks its links on the other side."""

    def drawing(self, params: Params) -> DrawGraph:
        return draw_joint(self.obj)

    def graph_module(self) -> Any:
        return None

    def linked(self, node_id: str) -> list[str] | None:
        return linked_ids(self.obj, node_id)

    def report(self, max_preview: int = 64) -> tuple[dict[str, Any], str] | None:
        return joint_report_data(self.obj, max_preview)


@register(JointRecording)
class JointRecordingSource(JointGraphSource):
    """A recorded joint run: both passes with shapes and statistics."""

    def drawing(self, params: Params) -> DrawGraph:
        return draw_joint(self.obj.joint, self.obj)

    def linked(self, node_id: str) -> list[str] | None:
        return linked_ids(self.obj.joint, node_id)
