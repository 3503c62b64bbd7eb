"""Overlays: an ordered list of small rules, each turning a drawn node into a style.

A rule is any function ``(node) -> Style | None``; later rules win where they set a field.
Extend the view by writing one more function, no subclassing:

    >>> import fxviz
    >>> def big(node):
    ...     rec = node.record
    ...     return fxviz.Style(border="#c00") if rec and rec.outputs and rec.outputs[0].numel > 10**6 else None
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fxviz.render._model import DrawNode

__all__ = [
    "Overlay",
    "Style",
    "apply_overlays",
    "bytes_heat",
    "debugger_state",
    "errors",
    "flops_heat",
    "nonfinite_values",
    "time_heat",
]


@dataclasses.dataclass(frozen=True)
class Style:
    """How an overlay wants a node drawn; ``None`` fields leave the node as it was.

    ``classes`` become CSS classes on the node's SVG group (the widget styles states with
    them); ``badge`` is an extra label line; ``tooltip`` an extra tooltip line.
    """

    fill: str | None = None
    border: str | None = None
    penwidth: float | None = None
    badge: str | None = None
    tooltip: str | None = None
    classes: tuple[str, ...] = ()


Overlay = Callable[[DrawNode], Style | None]

STATE_STYLES = {
    "done": Style(fill="#e8e8e8", classes=("state-done",)),
    "current": Style(border="#1f6feb", penwidth=3.0, classes=("state-current",)),
    "pending": Style(classes=("state-pending",)),
    "error": Style(fill="#ffb3b3", border="#c00000", penwidth=2.5, classes=("state-error",)),
    "breakpoint": Style(
        border="#d12", penwidth=2.0, badge="● breakpoint", classes=("state-breakpoint",)
    ),
    "selected": Style(border="#8a2be2", penwidth=3.0, classes=("state-selected",)),
}


def apply_overlays(node: DrawNode, overlays: Iterable[Overlay]) -> tuple[Style, list[str]]:
    """Merge the styles of every overlay for ``node``; returns the style and its badges."""
    merged: dict[str, Any] = {}
    badges: list[str] = []
    tooltips: list[str] = []
    classes: list[str] = []
    for overlay in overlays:
        style = overlay(node)
        if style is None:
            continue
        for field in ("fill", "border", "penwidth"):
            value = getattr(style, field)
            if value is not None:
                merged[field] = value
        if style.badge:
            badges.append(style.badge)
        if style.tooltip:
            tooltips.append(style.tooltip)
        classes.extend(style.classes)
    result = Style(**merged, tooltip="\n".join(tooltips) or None, classes=tuple(classes))
    return result, badges


def debugger_state(states: Mapping[str, str | Iterable[str]]) -> Overlay:
    """Colour nodes by debugger state: ``done``, ``current``, ``pending``, ``error``,
    ``breakpoint``, ``selected`` (a node may have several, e.g. current and breakpoint)."""

    def overlay(node: DrawNode) -> Style | None:
        state = states.get(node.name)
        if state is None:
            return None
        names = [state] if isinstance(state, str) else list(state)
        parts = [STATE_STYLES[s] for s in names if s in STATE_STYLES]
        if not parts:
            return None
        merged = {}
        for part in parts:
            merged.update(
                {k: v for k, v in dataclasses.asdict(part).items() if v not in (None, ())}
            )
        merged["classes"] = tuple(c for part in parts for c in part.classes)
        return Style(**merged)

    return overlay


def nonfinite_values(node: DrawNode) -> Style | None:
    """A red border and a badge on nodes whose output held NaN or Inf."""
    record = node.record
    if record is None or not record.nonfinite:
        return None
    counts = [
        f"{label} {n}"
        for label, n in (
            ("NaN", sum(s.nan or 0 for s in record.outputs)),
            ("+Inf", sum(s.posinf or 0 for s in record.outputs)),
            ("-Inf", sum(s.neginf or 0 for s in record.outputs)),
        )
        if n
    ]
    return Style(
        border="#d00000", penwidth=2.5, badge="⚠ " + ", ".join(counts), classes=("nonfinite",)
    )


def errors(node: DrawNode) -> Style | None:
    """Nodes that raised, in red, with the exception's type."""
    record = node.record
    if record is None or record.error is None:
        return None
    return Style(
        fill="#ffb3b3",
        border="#c00000",
        penwidth=2.5,
        badge=f"✖ {type(record.error).__name__}",
        tooltip=f"raised {type(record.error).__name__}: {record.error}",
        classes=("state-error",),
    )


def _heat(values: Mapping[str, float], unit: Callable[[float], str], css: str) -> Overlay:
    top = max(values.values(), default=0.0) or 1.0

    def overlay(node: DrawNode) -> Style | None:
        value = values.get(node.name)
        if value is None:
            return None
        share = value / top
        # white -> orange -> red, in 10 steps so colours stay stable across runs
        step = min(9, int(share * 10))
        shade = ("#ffffff", "#fff3e0", "#ffe0b2", "#ffcc80", "#ffb74d",
                 "#ffa726", "#ff9800", "#fb8c00", "#f57c00", "#e65100")[step]  # fmt: skip
        return Style(fill=shade, tooltip=unit(value), classes=(f"{css}-{step}",))

    return overlay


def time_heat(records: Iterable[Any]) -> Overlay:
    """Fill nodes from white to orange by the time they took."""
    values = {r.name: r.time_s for r in records if r.op not in ("placeholder", "output")}
    return _heat(values, lambda s: f"time: {s * 1e3:.3f} ms", "heat-time")


def bytes_heat(records: Iterable[Any]) -> Overlay:
    """Fill nodes from white to orange by the bytes of their outputs."""
    values = {r.name: float(sum(max(s.nbytes, 0) for s in r.outputs)) for r in records}
    return _heat(values, lambda b: f"output bytes: {int(b):,}", "heat-bytes")


def flops_heat(source: Any) -> Overlay:
    """Fill nodes from white to red by their FLOPs, with the count as a badge; a collapsed
    module's box by its total. ``source``: a ShapeReport, a Recording (counted on a fake
    re-run) or a ``{node: flops}`` mapping.

    Example:
        >>> import torch, fxviz
        >>> rep = fxviz.shapes(torch.nn.Sequential(torch.nn.Linear(8, 4)), torch.ones(2, 8))
        >>> "128 FLOPs" in fxviz.to_dot(rep, overlay=fxviz.flops_heat(rep)).source
        True
    """
    from fxviz._shapes._flops import human_flops, module_totals, recording_flops

    records: Iterable[Any] = ()
    if isinstance(getattr(source, "flops", None), dict):  # a ShapeReport
        flops, records = source.flops, source.recording.values()
    elif hasattr(source, "graph_module"):  # a Recording
        flops, records = recording_flops(source), source.values()
    else:
        flops = dict(source)
    modules = module_totals(flops, {r.name: r.module for r in records})
    node_heat = _heat({k: float(v) for k, v in flops.items() if v}, human_flops, "heat-flops")
    box_heat = _heat({k: float(v) for k, v in modules.items() if v}, human_flops, "heat-flops")

    def overlay(node: DrawNode) -> Style | None:
        style = (box_heat if node.kind == "module" else node_heat)(node)
        if style is None:
            return None
        return dataclasses.replace(style, badge=style.tooltip)

    return overlay
