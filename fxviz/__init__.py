"""fxviz: a visual debugger for PyTorch computation graphs.

Run a ``torch.fx`` graph node by node, remember everything it produced, and step,
search and compare it.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(3, 4))
    >>> rec["linear"].shape
    (3, 2)
"""

from fxviz.capture import trace
from fxviz.errors import (
    DebuggerError,
    FxvizError,
    FxvizWarning,
    InputError,
    NodeError,
    RecordingInterrupted,
    TraceError,
    UnknownNodeError,
)
from fxviz.record import (
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
from fxviz.render import (
    GraphDiff,
    RenderError,
    Style,
    bytes_heat,
    debugger_state,
    diff,
    nonfinite_values,
    time_heat,
    to_dot,
    to_svg,
)
from fxviz.report import report
from fxviz.shapes import (
    ShapeError,
    ShapeReport,
    SpecError,
    TensorSpec,
    shapes,
    shapes_diff,
    spec,
)

__version__ = "0.1.0"

_WIDGETS = ("DebuggerApp", "GraphView", "debug", "show")


def __getattr__(name: str) -> object:
    """Widgets load on first use, so ``import fxviz`` stays fast and works headless."""
    if name in _WIDGETS:
        from fxviz import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module 'fxviz' has no attribute {name!r}")


def _register_notebook_display() -> None:
    """In IPython, ``display(dbg)`` shows the debugger app (a static table elsewhere)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def app_bundle(dbg: Debugger, include: object = None, exclude: object = None) -> object:
        try:
            from fxviz.widgets import DebuggerApp

            return DebuggerApp(dbg)._repr_mimebundle_(include=include, exclude=exclude)
        except Exception:
            return {"text/html": dbg._repr_html_()}

    shell.display_formatter.mimebundle_formatter.for_type(Debugger, app_bundle)


_register_notebook_display()

__all__ = [
    "Debugger",
    "DebuggerApp",
    "DebuggerError",
    "FxvizError",
    "FxvizWarning",
    "GraphDiff",
    "GraphView",
    "InputError",
    "NodeError",
    "NodeRecord",
    "Recording",
    "RecordingInterpreter",
    "RecordingInterrupted",
    "RecordingMixin",
    "RenderError",
    "ShapeError",
    "ShapeReport",
    "SpecError",
    "Style",
    "TensorSpec",
    "TensorSummary",
    "TraceError",
    "UnknownNodeError",
    "__version__",
    "bytes_heat",
    "debug",
    "debugger_state",
    "diff",
    "dtype_changed",
    "nonfinite",
    "nonfinite_values",
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
]
