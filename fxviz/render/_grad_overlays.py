"""Overlays for recorded gradients: gradient norm, and gradient/activation norm ratio.

Both read ``node.record.grad`` (see ``fxviz.record(..., backward=...)``)::

    fxviz.to_svg(rec, overlay=[fxviz.grad_norm_heat(rec), fxviz.grad_ratio()])
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from fxviz._record._grads import summary_norm
from fxviz.render._model import DrawNode
from fxviz.render._overlays import Overlay, Style

__all__ = ["grad_norm_heat", "grad_ratio", "nonfinite_grads"]

_BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6",
          "#4292c6", "#2171b5", "#08519c", "#08306b", "#041f4a")  # fmt: skip


def grad_norm_heat(records: Iterable[Any]) -> Overlay:
    """Fill nodes from white to dark blue by the norm of their output's gradient, on a
    log scale (gradients span many orders of magnitude).

    Example:
        >>> import torch, fxviz
        >>> rec = fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3), backward=True)
        >>> from fxviz.render import draw
        >>> node = {n.name: n for n in draw(rec).nodes}["linear"]
        >>> fxviz.grad_norm_heat(rec.values())(node).tooltip
        'gradient norm: 1.414'
    """
    norms = {r.name: summary_norm(r.grad) for r in records}
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

    return overlay


def grad_ratio(vanishing: float = 1e-4, exploding: float = 1e2) -> Overlay:
    """Badge every node with ``‖∂loss/∂out‖ / ‖out‖``; ratios under ``vanishing`` are
    marked as vanishing (blue), over ``exploding`` as exploding (red).

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Linear(3, 2)
        >>> _ = torch.nn.init.ones_(model.weight), torch.nn.init.zeros_(model.bias)
        >>> rec = fxviz.record(model, torch.ones(1, 3), backward=True)  # out [3, 3], grad [1, 1]
        >>> from fxviz.render import draw
        >>> node = {n.name: n for n in draw(rec).nodes}["linear"]
        >>> fxviz.grad_ratio()(node).badge
        '∇/x 0.33'
    """

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

    return overlay


def nonfinite_grads(node: DrawNode) -> Style | None:
    """A red dashed-looking border and badge on nodes whose gradient held NaN or Inf."""
    record = node.record
    grad = None if record is None else getattr(record, "grad", None)
    if grad is None or not grad.nonfinite_count:
        return None
    parts = [f"{k} {n}" for k, n in (("NaN", grad.nan), ("+Inf", grad.posinf),
                                      ("-Inf", grad.neginf)) if n]  # fmt: skip
    return Style(
        border="#d00000", penwidth=3.0, badge="∇ ⚠ " + ", ".join(parts),
        classes=("nonfinite-grad",),
    )  # fmt: skip
