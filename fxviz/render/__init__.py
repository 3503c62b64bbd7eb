"""Drawing graphs: the drawing model, DOT built with the ``graphviz`` package, diffs.

Overlay rules are public in :mod:`fxviz.overlays`; ``fxviz.render.errors`` and
``fxviz.render.nonfinite_values`` are deprecated names of two of them.
"""

from typing import Any

from fxviz.errors import RenderError, warn_deprecated

# The sources of the types below this layer (higher layers register theirs on import).
from fxviz.render import _joint_draw, _sources  # noqa: F401
from fxviz.render._api import Drawing, View, draw, to_dot, to_svg
from fxviz.render._diff import GraphDiff, diff
from fxviz.render._grad_overlays import grad_norm_heat, grad_ratio, nonfinite_grads
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import (
    Overlay,
    Style,
    bytes_heat,
    debugger_state,
    flops_heat,
    highlight_errors,
    highlight_nonfinite,
    time_heat,
)
from fxviz.render._source import Source, register, source_of

# Old name -> (its successor, the object): importable, with an FxvizDeprecationWarning.
_DEPRECATED = {
    "errors": ("fxviz.overlays.highlight_errors", highlight_errors),
    "nonfinite_values": ("fxviz.overlays.highlight_nonfinite", highlight_nonfinite),
}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, value = _DEPRECATED[name]
        warn_deprecated(f"fxviz.render.{name}", new)
        return value
    raise AttributeError(f"module 'fxviz.render' has no attribute {name!r}")


__all__ = [
    "DrawEdge",
    "DrawGraph",
    "DrawNode",
    "Drawing",
    "GraphDiff",
    "Overlay",
    "RenderError",
    "Source",
    "Style",
    "View",
    "bytes_heat",
    "debugger_state",
    "diff",
    "draw",
    "flops_heat",
    "grad_norm_heat",
    "grad_ratio",
    "highlight_errors",
    "highlight_nonfinite",
    "nonfinite_grads",
    "register",
    "source_of",
    "time_heat",
    "to_dot",
    "to_svg",
]
