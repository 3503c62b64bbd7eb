"""Drawing graphs: DOT built with the ``graphviz`` package, overlays, diffs."""

from fxviz.render._api import RenderError, to_dot, to_svg
from fxviz.render._diff import GraphDiff, diff
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import (
    Overlay,
    Style,
    bytes_heat,
    debugger_state,
    errors,
    flops_heat,
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
    "errors",
    "flops_heat",
    "nonfinite_values",
    "time_heat",
    "to_dot",
    "to_svg",
]
