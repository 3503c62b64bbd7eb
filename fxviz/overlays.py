"""Overlays: small rules that restyle drawn nodes, applied in order (later rules win).

An overlay is any function ``(node) -> Style | None``. ``node`` is the drawn node
(``node.name``, ``node.kind``, ``node.module`` and ``node.record``, the node's
:class:`fxviz.NodeRecord` when the graph was recorded). Extend a view by writing one
more function, no subclassing:

    >>> import torch, fxviz
    >>> from fxviz.overlays import Style
    >>> def big(node):
    ...     rec = node.record
    ...     if rec is not None and rec.outputs and rec.outputs[0].numel > 4:
    ...         return Style(border="#c00", badge="big")
    ...     return None
    >>> rec = fxviz.record(torch.nn.Linear(4, 3), torch.ones(2, 4))
    >>> "big" in fxviz.to_dot(rec, overlay=big).source
    True

Names: predicates on a record are adjectives (:func:`fxviz.nonfinite`), counts end in
``_count`` (``record.nonfinite_count``), overlays say what they draw
(:func:`highlight_nonfinite`, :func:`highlight_errors`, :func:`time_heat`,
:func:`flops_heat`...).
An overlay that raises is left out with an :class:`fxviz.FxvizWarning`; the graph is
still drawn. This module imports neither torch nor the widgets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from fxviz.render._model import DrawNode

__all__ = [
    "STATE_STYLES",
    "Overlay",
    "Style",
    "bytes_heat",
    "debugger_state",
    "flops_heat",
    "highlight_errors",
    "highlight_nonfinite",
    "time_heat",
]


@dataclasses.dataclass(frozen=True)
class Style:
    """How an overlay wants a node drawn; ``None`` fields leave the node as it was.

    ``classes`` become CSS classes on the node's SVG group (the widget styles states with
    them); ``badge`` is an extra label line; ``tooltip`` an extra tooltip line.

    >>> Style(fill="#ffe0b2", badge="slow")
    Style(fill='#ffe0b2', border=None, penwidth=None, badge='slow', tooltip=None, classes=())
    """

    fill: str | None = None
    border: str | None = None
    penwidth: float | None = None
    badge: str | None = None
    tooltip: str | None = None
    classes: tuple[str, ...] = ()


Overlay: TypeAlias = "Callable[[DrawNode], Style | None]"

STATE_STYLES: dict[str, Style] = {
    "done": Style(fill="#e8e8e8", classes=("state-done",)),
    "current": Style(border="#1f6feb", penwidth=3.0, classes=("state-current",)),
    "pending": Style(classes=("state-pending",)),
    "error": Style(fill="#ffb3b3", border="#c00000", penwidth=2.5, classes=("state-error",)),
    "breakpoint": Style(
        border="#d12", penwidth=2.0, badge="● breakpoint", classes=("state-breakpoint",)
    ),
    "selected": Style(border="#8a2be2", penwidth=3.0, classes=("state-selected",)),
}


def debugger_state(states: Mapping[str, str | Iterable[str]]) -> Overlay:
    """Colour nodes by debugger state: ``done``, ``current``, ``pending``, ``error``,
    ``breakpoint``, ``selected`` (a node may have several, e.g. current and breakpoint).

    >>> import torch, fxviz
    >>> dbg = fxviz.Debugger(torch.nn.Linear(4, 2), torch.ones(1, 4))
    >>> _ = dbg.step()
    >>> dot = fxviz.to_dot(dbg.recording, overlay=debugger_state(dbg.node_states()))
    >>> "state-current" in dot.source
    True
    """

    def overlay(node: DrawNode) -> Style | None:
        state = states.get(node.name)
        if state is None:
            return None
        names = [state] if isinstance(state, str) else list(state)
        parts = [STATE_STYLES[s] for s in names if s in STATE_STYLES]
        if not parts:
            return None
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(
                {k: v for k, v in dataclasses.asdict(part).items() if v not in (None, ())}
            )
        merged["classes"] = tuple(c for part in parts for c in part.classes)
        return Style(**merged)

    return overlay


def highlight_nonfinite(node: DrawNode) -> Style | None:
    """A red border and a badge (``⚠ NaN 2, +Inf 1``) on nodes whose output held NaN or Inf.

    >>> import torch, fxviz
    >>> rec = fxviz.record(lambda x: x / 0, torch.tensor([0.0, 1.0]))
    >>> "⚠ NaN 1, +Inf 1" in fxviz.to_dot(rec, overlay=highlight_nonfinite).source
    True
    """
    record = node.record
    if record is None or not record.nonfinite_count:
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


def highlight_errors(node: DrawNode) -> Style | None:
    """Nodes that raised, in red, with the exception's type.

    >>> import torch, fxviz
    >>> try:
    ...     fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 5))
    ... except fxviz.NodeError as e:
    ...     source = fxviz.to_dot(e.recording, overlay=highlight_errors).source
    >>> "✖ RuntimeError" in source
    True
    """
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


_SHADES = ("#ffffff", "#fff3e0", "#ffe0b2", "#ffcc80", "#ffb74d",
           "#ffa726", "#ff9800", "#fb8c00", "#f57c00", "#e65100")  # fmt: skip


def _heat(values: Mapping[str, float], unit: Callable[[float], str], css: str) -> Overlay:
    top = max(values.values(), default=0.0) or 1.0

    def overlay(node: DrawNode) -> Style | None:
        value = values.get(node.name)
        if value is None:
            return None
        # white -> orange -> red, in 10 steps so colours stay stable across runs
        step = min(9, int(value / top * 10))
        return Style(fill=_SHADES[step], tooltip=unit(value), classes=(f"{css}-{step}",))

    return overlay


def time_heat(records: Iterable[Any]) -> Overlay:
    """Fill nodes from white to orange by the time they took.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4))
    >>> "heat-time-" in fxviz.to_dot(rec, overlay=time_heat(rec.values())).source
    True
    """
    values = {r.name: r.time_s for r in records if r.op not in ("placeholder", "output")}
    return _heat(values, lambda s: f"time: {s * 1e3:.3f} ms", "heat-time")


def bytes_heat(records: Iterable[Any]) -> Overlay:
    """Fill nodes from white to orange by the bytes of their outputs.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(8, 4))  # the input is biggest
    >>> "heat-bytes-9" in fxviz.to_dot(rec, overlay=bytes_heat(rec.values())).source
    True
    """
    values = {r.name: float(sum(max(s.nbytes, 0) for s in r.outputs)) for r in records}
    return _heat(values, lambda b: f"output bytes: {int(b):,}", "heat-bytes")


def flops_heat(source: Any) -> Overlay:
    """Fill nodes from white to red by their FLOPs, with the count as a badge; a collapsed
    module's box by its total. ``source``: a ShapeReport, a Recording (counted on a fake
    re-run) or a ``{node: flops}`` mapping.

    >>> import torch, fxviz
    >>> rep = fxviz.shapes(torch.nn.Sequential(torch.nn.Linear(8, 4)), torch.ones(2, 8))
    >>> "128 FLOPs" in fxviz.to_dot(rep, overlay=flops_heat(rep)).source
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
