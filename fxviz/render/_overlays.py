"""Applying overlays to drawn nodes; the rules themselves are public in :mod:`fxviz.overlays`.

A failing overlay never blanks the graph: it is left out, with one
:class:`fxviz.FxvizWarning` naming it and the node it failed on.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from fxviz.errors import FxvizWarning, first_line
from fxviz.overlays import STATE_STYLES, Overlay, Style, highlight_errors, highlight_nonfinite
from fxviz.render._model import DrawNode

__all__ = [
    "STATE_STYLES",
    "Marks",
    "Overlay",
    "Style",
    "apply_overlays",
    "box_marks",
    "default_overlays",
    "guarded",
]


def default_overlays() -> list[Overlay]:
    """What every drawing of a recorded run shows: errors, then NaN/Inf outputs."""
    return [highlight_errors(), highlight_nonfinite()]


class _Guarded:
    """An overlay that, on its first failure, warns once and is left out from then on."""

    def __init__(self, overlay: Overlay) -> None:
        self.overlay = overlay
        self.failed = False

    def __call__(self, node: DrawNode) -> Style | None:
        if self.failed:
            return None
        try:
            style = self.overlay(node)
            if style is not None and not isinstance(style, Style):
                raise TypeError(f"returned {type(style).__name__}, not fxviz.overlays.Style")
        except Exception as e:
            self.failed = True
            name = getattr(self.overlay, "__name__", repr(self.overlay))
            warnings.warn(
                f"overlay {name!r} failed on node {node.name!r} ({type(e).__name__}: "
                f"{first_line(e)}) and was left out; the graph is drawn without it",
                FxvizWarning,
                stacklevel=2,
            )
            return None
        return style


def guarded(overlays: Iterable[Overlay]) -> list[Overlay]:
    """Each overlay wrapped so that one failure leaves it out instead of blanking the graph."""
    return [o if isinstance(o, _Guarded) else _Guarded(o) for o in overlays]


def apply_overlays(node: DrawNode, overlays: Sequence[Overlay]) -> tuple[Style, list[str]]:
    """Merge the styles of every overlay for ``node``; returns the style and its badges."""
    merged: dict[str, Any] = {}
    badges: list[str] = []
    tooltips: list[str] = []
    classes: list[str] = []
    for overlay in guarded(overlays):
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


@dataclasses.dataclass(frozen=True)
class Marks:
    """What the overlays of the nodes inside a collapsed box show on the box: their CSS
    classes, and ``alarm`` when one of them raised or held NaN/Inf (a red outline).
    Marks of disjoint node sets combine with ``|``, so a module's are its parts'."""

    classes: frozenset[str] = frozenset()
    alarm: bool = False

    def __or__(self, other: Marks) -> Marks:
        if not other.classes and not other.alarm:
            return self
        return Marks(self.classes | other.classes, self.alarm or other.alarm)


_NO_MARKS = Marks()
_ALARMS = ("state-error", "nonfinite")


def box_marks(nodes: Iterable[DrawNode], overlays: Sequence[Overlay]) -> Marks:
    """The :class:`Marks` that ``overlays`` leave on ``nodes`` (none: no overlay is called).

    >>> from fxviz.render._model import DrawNode
    >>> from fxviz.overlays import Style
    >>> node = DrawNode("a", "a", "call_function", "relu")
    >>> box_marks([node], [lambda n: Style(classes=("nonfinite",))])
    Marks(classes=frozenset({'nonfinite'}), alarm=True)
    """
    if not overlays:
        return _NO_MARKS
    classes = {c for n in nodes for c in apply_overlays(n, overlays)[0].classes}
    if not classes:
        return _NO_MARKS
    return Marks(frozenset(classes), any(c in classes for c in _ALARMS))
