"""Drawing graphs: DOT built with the ``graphviz`` package, overlays, diffs."""

from fxviz.render._api import RenderError, draw, to_dot, to_svg
from fxviz.render._diff import GraphDiff, diff
from fxviz.render._grad_overlays import grad_norm_heat, grad_ratio, nonfinite_grads
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import (
    Overlay,
    Style,
    bytes_heat,
    debugger_state,
    errors,
    nonfinite_values,
    time_heat,
)

__all__ = [
    "DrawEdge",
    "DrawGraph",
    "DrawNode",
    "GraphDiff",
    "Overlay",
    "RenderError",
    "Style",
    "bytes_heat",
    "debugger_state",
    "diff",
    "draw",
    "errors",
    "grad_norm_heat",
    "grad_ratio",
    "nonfinite_grads",
    "nonfinite_values",
    "time_heat",
    "to_dot",
    "to_svg",
]
