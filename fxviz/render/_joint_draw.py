"""Forward and backward graphs of a :class:`~fxviz.JointGraph`, drawn side by side.

Each pass is a cluster of its own. Every backward node's tooltip names the forward node it
differentiates (and the model node that came from); selecting a node (``selected=``)
highlights it and everything linked to it on the other side: the forward node a backward
node differentiates, or the backward nodes that differentiate a forward node, and the
saved tensors between them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fxviz.render._from_fx import draw_fx
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode, dot_id
from fxviz.render._overlays import Overlay, Style

__all__ = ["draw_joint", "joint_selection", "linked_ids", "linked_nodes"]

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
    from fxviz.render._api import to_dot
    from fxviz.render._overlays import highlight_errors, highlight_nonfinite

    overlays: list[Overlay] = (
        [highlight_errors, highlight_nonfinite] if recording is not None else []
    )
    if selected is not None:
        if side not in ("forward", "backward"):
            raise ValueError(f"side must be 'forward' or 'backward', not {side!r}")
        gm = getattr(joint, side)
        if not any(n.name == selected for n in gm.graph.nodes):
            from fxviz._record._records import unknown_node_message
            from fxviz.errors import UnknownNodeError

            names = [n.name for n in gm.graph.nodes]
            raise UnknownNodeError(unknown_node_message(selected, names) + f" ({side})")
        overlays.append(joint_selection(joint, side, selected))
    extra = options.pop("overlay", None)
    if extra is not None:
        overlays.extend([extra] if callable(extra) else extra)
    options.setdefault("rankdir", "TB")
    return to_dot(draw_joint(joint, recording), overlay=overlays, **options)


def joint_report(recording: Any, path: Any = None, *, title: str | None = None) -> str | None:
    """One HTML page with the forward and the backward report side by side."""
    import html
    import pathlib

    from fxviz._report import report

    frames = []
    for side in ("forward", "backward"):
        page = report(getattr(recording, side), title=f"{side} pass")
        frames.append(
            f'<section><h2>{side}</h2><iframe title="{side} pass" '
            f'srcdoc="{html.escape(page or "", quote=True)}"></iframe></section>'
        )
    name = html.escape(title or "fxviz: forward and backward")
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title><style>"
        "body{font-family:sans-serif;margin:8px}main{display:flex;gap:8px}"
        "section{flex:1;min-width:0}iframe{width:100%;height:90vh;border:1px solid #ccc}"
        f"</style></head><body><h1>{name}</h1><main>{''.join(frames)}</main></body></html>"
    )
    if path is None:
        return text
    pathlib.Path(path).write_text(text, encoding="utf-8")
    return None
