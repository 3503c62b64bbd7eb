"""Old public names of the facade: each still works, with an FxvizDeprecationWarning."""

from __future__ import annotations

import importlib
from typing import Any

from fxviz.errors import warn_deprecated

__all__ = ["DEPRECATED", "old_name"]

# Old name -> (what to use instead, the module and name it still loads, whether the old
# name was an overlay itself and so gets one made): works, with FxvizDeprecationWarning.
DEPRECATED: dict[str, tuple[str, str, str, bool]] = {
    "nonfinite": ("fxviz.has_nonfinite", "fxviz._record", "has_nonfinite", False),
    "RecordingInterpreter": (
        "fxviz.record(gm, *inputs), or class R(fxviz.RecordingMixin, torch.fx.Interpreter)",
        "fxviz._record", "RecordingInterpreter", False,
    ),
    "recording_class": (
        "fxviz.record(gm, *inputs, interpreter=cls), or class R(fxviz.RecordingMixin, cls)",
        "fxviz._record", "recording_class", False,
    ),
    "nonfinite_values": (
        "fxviz.overlays.highlight_nonfinite()", "fxviz.overlays", "highlight_nonfinite", True
    ),
    "nonfinite_grads": (
        "fxviz.overlays.highlight_nonfinite_grads()",
        "fxviz.overlays", "highlight_nonfinite_grads", True,
    ),
    **{
        name: (f"fxviz.overlays.{name}", "fxviz.overlays", name, False)
        for name in ("Style", "bytes_heat", "debugger_state", "flops_heat", "grad_norm_heat",
                     "grad_ratio", "highlight_errors", "highlight_nonfinite", "time_heat")
    },
}  # fmt: skip


def old_name(name: str) -> Any:
    """``fxviz.<name>`` for an old name (with a warning), else ``AttributeError``."""
    if name not in DEPRECATED:
        raise AttributeError(f"module 'fxviz' has no attribute {name!r}")
    new, where, attr, made = DEPRECATED[name]
    warn_deprecated(f"fxviz.{name}", new, stacklevel=4)
    value = getattr(importlib.import_module(where), attr)
    return value() if made else value
