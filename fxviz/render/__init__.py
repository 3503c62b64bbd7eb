"""Drawing graphs: the drawing model, DOT built with the ``graphviz`` package, diffs.

Overlays live in :mod:`fxviz.overlays` only; their names here are deprecated.
"""

import importlib
from typing import Any

from fxviz.errors import RenderError, warn_deprecated

# The sources of the types below this layer (higher layers register theirs on import).
from fxviz.render import _joint_draw, _sources  # noqa: F401
from fxviz.render._api import Drawing, View, draw, to_dot, to_svg
from fxviz.render._diff import GraphDiff, diff
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import Overlay, Style
from fxviz.render._source import Source, register, source_of

# Overlays that live in fxviz.overlays now.
_MOVED = ("bytes_heat", "debugger_state", "flops_heat", "grad_norm_heat", "grad_ratio",
          "highlight_errors", "highlight_nonfinite", "time_heat")  # fmt: skip

# Old name -> (its successor, the name in fxviz.overlays, called when the old name was an
# overlay itself rather than a function making one): importable, with a warning.
_DEPRECATED = {
    "errors": ("fxviz.overlays.highlight_errors()", "highlight_errors", True),
    "nonfinite_values": ("fxviz.overlays.highlight_nonfinite()", "highlight_nonfinite", True),
    "nonfinite_grads": (
        "fxviz.overlays.highlight_nonfinite_grads()",
        "highlight_nonfinite_grads",
        True,
    ),
    **{name: (f"fxviz.overlays.{name}", name, False) for name in _MOVED},
}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, attr, made = _DEPRECATED[name]
        warn_deprecated(f"fxviz.render.{name}", new)
        value = getattr(importlib.import_module("fxviz.overlays"), attr)
        return value() if made else value
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
    "diff",
    "draw",
    "register",
    "source_of",
    "to_dot",
    "to_svg",
]
