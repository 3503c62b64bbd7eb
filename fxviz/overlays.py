"""Overlays: small rules that restyle drawn nodes, applied in order (later rules win).

An overlay is a function ``(node) -> Style | None``. ``node`` is the drawn node
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

One convention for the built-ins: every function here *makes* an overlay, so always call
it and pass what it returns. What it reads comes first (the recording: a
:class:`fxviz.Recording`, a :class:`fxviz.ShapeReport` or a :class:`fxviz.Debugger`),
parameters are keywords:

    >>> from fxviz.overlays import highlight_nonfinite, time_heat
    >>> dot = fxviz.to_dot(rec, overlay=[highlight_nonfinite(), time_heat(rec)])
    >>> "heat-time-" in dot.source
    True

Names: the predicate is :func:`fxviz.has_nonfinite`, the count ``record.nonfinite_count``,
the overlays ``highlight_nonfinite()`` (outputs) and ``highlight_nonfinite_grads()``
(gradients). An overlay that raises is left out with an :class:`fxviz.FxvizWarning`; the
graph is still drawn. This module imports neither torch nor the widgets.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from fxviz.errors import InputError, warn_deprecated

if TYPE_CHECKING:
    from fxviz.render._model import DrawNode

__all__ = [
    "STATE_STYLES",
    "Overlay",
    "Style",
    "bytes_heat",
    "debugger_state",
    "flops_heat",
    "grad_norm_heat",
    "grad_ratio",
    "highlight_errors",
    "highlight_nonfinite",
    "highlight_nonfinite_grads",
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

_Maker = TypeVar("_Maker", bound=Callable[[], Overlay])


def _is_drawn_node(value: object) -> bool:
    model = sys.modules.get("fxviz.render._model")  # a drawn node means it is loaded
    return model is not None and isinstance(value, model.DrawNode)


def _named(overlay: Overlay, name: str) -> Overlay:
    overlay.__name__ = overlay.__qualname__ = name
    return overlay


def _user_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warn_deprecated` that points at the first line outside
    fxviz (the user's ``to_dot`` call), where Python's filters show deprecations."""
    import inspect

    here = inspect.currentframe()
    level, frame = 2, here.f_back if here is not None else None  # 2: the caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("fxviz."):
        frame, level = frame.f_back, level + 1
    return level


def _old_uncalled_use(maker: _Maker) -> _Maker:
    """``overlay=highlight_errors`` (not called) was the old spelling: it still works,
    with an :class:`fxviz.FxvizDeprecationWarning`."""

    @functools.wraps(maker)
    def make(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and _is_drawn_node(args[0]):
            name = maker.__name__
            old, new = f"overlay=fxviz.overlays.{name}", f"overlay={name}() (call it)"
            warn_deprecated(old, new, stacklevel=_user_stacklevel())
            return maker()(args[0])
        return maker(*args, **kwargs)

    return make  # type: ignore[return-value]


def _records(source: Any, maker: str) -> list[Any]:
    """The records of a Recording, ShapeReport or Debugger (or an iterable of records)."""
    if _is_drawn_node(source) or source is None:
        raise InputError(
            f"{maker} makes an overlay from a recording: pass overlay={maker}(rec), "
            f"not {maker} itself (got {type(source).__name__})"
        )
    if not callable(getattr(source, "values", None)) and hasattr(source, "recording"):
        source = source.recording  # a Debugger
    values: Callable[[], Iterable[Any]] | None = getattr(source, "values", None)
    return list(values() if callable(values) else source)


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

    return _named(overlay, "debugger_state")


def _counts(summaries: Iterable[Any]) -> str:
    summaries = list(summaries)
    return ", ".join(
        f"{label} {n}"
        for label, n in (
            ("NaN", sum(s.nan or 0 for s in summaries)),
            ("+Inf", sum(s.posinf or 0 for s in summaries)),
            ("-Inf", sum(s.neginf or 0 for s in summaries)),
        )
        if n
    )


def _nonfinite_outputs(node: DrawNode) -> Style | None:
    record = node.record
    if record is None or not record.nonfinite_count:
        return None
    badge = "⚠ " + _counts(record.outputs)
    return Style(border="#d00000", penwidth=2.5, badge=badge, classes=("nonfinite",))


@_old_uncalled_use
def highlight_nonfinite() -> Overlay:
    """A red border and a badge (``⚠ NaN 2, +Inf 1``) on nodes whose output held NaN or Inf.

    >>> import torch, fxviz
    >>> rec = fxviz.record(lambda x: x / 0, torch.tensor([0.0, 1.0]))
    >>> "⚠ NaN 1, +Inf 1" in fxviz.to_dot(rec, overlay=highlight_nonfinite()).source
    True
    """
    return _named(_nonfinite_outputs, "highlight_nonfinite")


def _errors(node: DrawNode) -> Style | None:
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


@_old_uncalled_use
def highlight_errors() -> Overlay:
    """Nodes that raised, in red, with the exception's type.

    >>> import torch, fxviz
    >>> try:
    ...     fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 5))
    ... except fxviz.NodeError as e:
    ...     source = fxviz.to_dot(e.recording, overlay=highlight_errors()).source
    >>> "✖ RuntimeError" in source
    True
    """
    return _named(_errors, "highlight_errors")


def _nonfinite_grads(node: DrawNode) -> Style | None:
    record = node.record
    grad = None if record is None else getattr(record, "grad", None)
    if grad is None or not grad.nonfinite_count:
        return None
    badge = "∇ ⚠ " + _counts([grad])
    return Style(border="#d00000", penwidth=3.0, badge=badge, classes=("nonfinite-grad",))


def highlight_nonfinite_grads() -> Overlay:
    """A red border and a badge (``∇ ⚠ NaN 1``) on nodes whose gradient held NaN or Inf
    (a recording made with ``fxviz.record(..., backward=...)``).

    >>> import torch, fxviz
    >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
    >>> rec = fxviz.record(lambda x: x.sqrt().sum(), x, backward=True)  # sqrt'(0) = inf
    >>> "∇ ⚠ +Inf 1" in fxviz.to_dot(rec, overlay=highlight_nonfinite_grads()).source
    True
    """
    return _named(_nonfinite_grads, "highlight_nonfinite_grads")


_SHADES = ("#ffffff", "#fff3e0", "#ffe0b2", "#ffcc80", "#ffb74d",
           "#ffa726", "#ff9800", "#fb8c00", "#f57c00", "#e65100")  # fmt: skip
_BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6",
          "#4292c6", "#2171b5", "#08519c", "#08306b", "#041f4a")  # fmt: skip


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


def time_heat(source: Any) -> Overlay:
    """Fill nodes from white to orange by the time they took.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4))
    >>> "heat-time-" in fxviz.to_dot(rec, overlay=time_heat(rec)).source
    True
    """
    records = _records(source, "time_heat")
    values = {r.name: r.time_s for r in records if r.op not in ("placeholder", "output")}
    return _named(_heat(values, lambda s: f"time: {s * 1e3:.3f} ms", "heat-time"), "time_heat")


def bytes_heat(source: Any) -> Overlay:
    """Fill nodes from white to orange by the bytes of their outputs.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(8, 4))  # the input is biggest
    >>> "heat-bytes-9" in fxviz.to_dot(rec, overlay=bytes_heat(rec)).source
    True
    """
    records = _records(source, "bytes_heat")
    values = {r.name: float(sum(max(s.nbytes, 0) for s in r.outputs)) for r in records}
    heat = _heat(values, lambda b: f"output bytes: {int(b):,}", "heat-bytes")
    return _named(heat, "bytes_heat")


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
        if _is_drawn_node(source):
            _records(source, "flops_heat")  # raises: says how to call it
        flops = dict(source)
    modules = module_totals(flops, {r.name: r.module for r in records})
    node_heat = _heat({k: float(v) for k, v in flops.items() if v}, human_flops, "heat-flops")
    box_heat = _heat({k: float(v) for k, v in modules.items() if v}, human_flops, "heat-flops")

    def overlay(node: DrawNode) -> Style | None:
        style = (box_heat if node.kind == "module" else node_heat)(node)
        if style is None:
            return None
        return dataclasses.replace(style, badge=style.tooltip)

    return _named(overlay, "flops_heat")


def grad_norm_heat(source: Any) -> Overlay:
    """Fill nodes from white to dark blue by the norm of their output's gradient, on a
    log scale (gradients span many orders of magnitude).

    Example:
        >>> import torch, fxviz
        >>> rec = fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3), backward=True)
        >>> "gradient norm: 1.414" in fxviz.to_dot(rec, overlay=grad_norm_heat(rec)).source
        True
    """
    from fxviz._record._grads import summary_norm

    norms = {r.name: summary_norm(r.grad) for r in _records(source, "grad_norm_heat")}
    logs = {n: math.log10(v) for n, v in norms.items() if v}
    low, high = min(logs.values(), default=0.0), max(logs.values(), default=0.0)
    span = (high - low) or 1.0

    def overlay(node: DrawNode) -> Style | None:
        norm = norms.get(node.name)
        if norm is None:
            return None
        step = 0 if norm == 0 else min(9, int((logs[node.name] - low) / span * 10))
        return Style(
            fill=_BLUES[step], tooltip=f"gradient norm: {norm:.4g}", classes=(f"heat-grad-{step}",)
        )

    return _named(overlay, "grad_norm_heat")


def grad_ratio(vanishing: float = 1e-4, exploding: float = 1e2) -> Overlay:
    """Badge every node with ``‖∂loss/∂out‖ / ‖out‖``; ratios under ``vanishing`` are
    marked as vanishing (blue), over ``exploding`` as exploding (red).

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Linear(3, 2)
        >>> _ = torch.nn.init.ones_(model.weight), torch.nn.init.zeros_(model.bias)
        >>> rec = fxviz.record(model, torch.ones(1, 3), backward=True)  # out [3, 3], grad [1, 1]
        >>> "∇/x 0.33" in fxviz.to_dot(rec, overlay=grad_ratio()).source
        True
    """
    from fxviz._record._grads import summary_norm

    def overlay(node: DrawNode) -> Style | None:
        record = node.record
        if record is None or record.grad is None or not record.outputs:
            return None
        grad, out = summary_norm(record.grad), summary_norm(record.outputs[0])
        if grad is None or not out:
            return None
        ratio = grad / out
        text = f"∇/x {ratio:.2g}"
        if ratio < vanishing:
            return Style(
                border="#1c7ed6", penwidth=2.5, badge=f"{text} vanishing",
                classes=("grad-vanishing",),
            )  # fmt: skip
        if ratio > exploding:
            return Style(
                border="#e03131", penwidth=2.5, badge=f"{text} exploding",
                classes=("grad-exploding",),
            )  # fmt: skip
        return Style(badge=text, classes=("grad-ratio",))

    return _named(overlay, "grad_ratio")
