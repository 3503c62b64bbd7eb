"""fxviz: a visual debugger for PyTorch computation graphs.

Run a ``torch.fx`` graph node by node, remember everything it produced, and step,
search and compare it.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(3, 4))
    >>> rec["linear"].shape
    (3, 2)

The facade is lazy: ``import fxviz`` imports neither torch nor the widgets; each public
name loads its module on first use (so ``fxviz --help`` answers at once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fxviz.errors import (
    DebuggerError,
    FxvizDeprecationWarning,
    FxvizError,
    FxvizWarning,
    InputError,
    NodeError,
    PlacementError,
    RecordingFileError,
    RecordingInterrupted,
    RenderError,
    ShapeError,
    SpecError,
    TargetError,
    TraceError,
    UnknownNodeError,
)
from fxviz.errors import (
    warn_deprecated as _warn_deprecated,
)

__version__ = "0.1.0"

# Public name -> the private module that defines it (loaded on first attribute access).
_LAZY: dict[str, str] = {
    "trace": "fxviz.capture",
    "Capture": "fxviz.capture",
    "GraphBreak": "fxviz.capture",
    "JointGraph": "fxviz._joint",
    "JointRecording": "fxviz._joint",
    "Debugger": "fxviz._record",
    "NodeRecord": "fxviz._record",
    "Recording": "fxviz._record",
    "RecordingInterpreter": "fxviz._record",
    "RecordingMixin": "fxviz._record",
    "TensorSummary": "fxviz._record",
    "dtype_changed": "fxviz._record",
    "nonfinite": "fxviz._record",
    "record": "fxviz._record",
    "recording_class": "fxviz._record",
    "GraphDiff": "fxviz.render",
    "Style": "fxviz.overlays",
    "bytes_heat": "fxviz.overlays",
    "debugger_state": "fxviz.overlays",
    "flops_heat": "fxviz.overlays",
    "diff": "fxviz.render",
    "grad_norm_heat": "fxviz.render",
    "grad_ratio": "fxviz.render",
    "nonfinite_grads": "fxviz.render",
    "time_heat": "fxviz.overlays",
    "to_dot": "fxviz.render",
    "to_svg": "fxviz.render",
    "highlight_errors": "fxviz.overlays",
    "highlight_nonfinite": "fxviz.overlays",
    "report": "fxviz._report",
    "load": "fxviz._training",  # fxviz._saved's load, with incident files registered
    "Comparison": "fxviz._compare",
    "compare": "fxviz._compare",
    "compare_dtype": "fxviz._compare",
    "compare_pass": "fxviz._compare",
    "ShapeReport": "fxviz._shapes",
    "TensorSpec": "fxviz._shapes",
    "shapes": "fxviz._shapes",
    "shapes_diff": "fxviz._shapes",
    "spec": "fxviz._shapes",
    "DebuggerApp": "fxviz.widgets",
    "GraphView": "fxviz.widgets",
    "debug": "fxviz.widgets",
    "show": "fxviz.widgets",
    "watch": "fxviz._training",
    "NonFiniteStep": "fxviz.errors",
}

# Public submodules, imported on first attribute access (``fxviz.overlays.Style``).
_SUBMODULES = ("overlays",)

# Old name -> (its successor, the module and name it loads): importable, with an
# FxvizDeprecationWarning.
_DEPRECATED: dict[str, tuple[str, str, str]] = {
    "nonfinite_values": (
        "fxviz.highlight_nonfinite",
        "fxviz.overlays",
        "highlight_nonfinite",
    ),
}

if TYPE_CHECKING:  # static checkers and IDEs see the real objects
    from fxviz import overlays
    from fxviz._compare import Comparison, compare, compare_dtype, compare_pass
    from fxviz._joint import JointGraph, JointRecording
    from fxviz._record import (
        Debugger,
        NodeRecord,
        Recording,
        RecordingInterpreter,
        RecordingMixin,
        TensorSummary,
        dtype_changed,
        nonfinite,
        record,
        recording_class,
    )
    from fxviz._report import report
    from fxviz._saved import load
    from fxviz._shapes import (
        ShapeReport,
        TensorSpec,
        shapes,
        shapes_diff,
        spec,
    )
    from fxviz._training import watch
    from fxviz.capture import Capture, GraphBreak, trace
    from fxviz.errors import NonFiniteStep
    from fxviz.overlays import (
        Style,
        bytes_heat,
        debugger_state,
        flops_heat,
        highlight_errors,
        highlight_nonfinite,
        time_heat,
    )
    from fxviz.render import (
        GraphDiff,
        diff,
        grad_norm_heat,
        grad_ratio,
        nonfinite_grads,
        to_dot,
        to_svg,
    )
    from fxviz.widgets import DebuggerApp, GraphView, debug, show


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use and cache the name here."""
    if name in _SUBMODULES:
        return importlib.import_module(f"fxviz.{name}")
    if name in _DEPRECATED:
        new, where, attr = _DEPRECATED[name]
        _warn_deprecated(f"fxviz.{name}", new)
        return getattr(importlib.import_module(where), attr)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fxviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


def _register_notebook_display() -> None:
    """In IPython, ``display(dbg)`` shows the debugger app (a static table elsewhere).

    Registered by type name, so nothing is imported until a Debugger is displayed.
    """
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def app_bundle(dbg: Any, include: object = None, exclude: object = None) -> object:
        try:
            from fxviz.widgets import DebuggerApp

            app: Any = DebuggerApp(dbg)
            return app._repr_mimebundle_(include=include, exclude=exclude)
        except Exception:
            return {"text/html": dbg._repr_html_()}

    shell.display_formatter.mimebundle_formatter.for_type_by_name(
        "fxviz._record._debugger", "Debugger", app_bundle
    )


_register_notebook_display()

__all__ = [
    "Capture",
    "Comparison",
    "Debugger",
    "DebuggerApp",
    "DebuggerError",
    "FxvizDeprecationWarning",
    "FxvizError",
    "FxvizWarning",
    "GraphBreak",
    "GraphDiff",
    "GraphView",
    "InputError",
    "JointGraph",
    "JointRecording",
    "NodeError",
    "NodeRecord",
    "NonFiniteStep",
    "PlacementError",
    "Recording",
    "RecordingFileError",
    "RecordingInterpreter",
    "RecordingInterrupted",
    "RecordingMixin",
    "RenderError",
    "ShapeError",
    "ShapeReport",
    "SpecError",
    "Style",
    "TargetError",
    "TensorSpec",
    "TensorSummary",
    "TraceError",
    "UnknownNodeError",
    "__version__",
    "bytes_heat",
    "compare",
    "compare_dtype",
    "compare_pass",
    "debug",
    "debugger_state",
    "diff",
    "dtype_changed",
    "flops_heat",
    "grad_norm_heat",
    "grad_ratio",
    "highlight_errors",
    "highlight_nonfinite",
    "load",
    "nonfinite",
    "nonfinite_grads",
    "overlays",
    "record",
    "recording_class",
    "report",
    "shapes",
    "shapes_diff",
    "show",
    "spec",
    "time_heat",
    "to_dot",
    "to_svg",
    "trace",
    "watch",
]
