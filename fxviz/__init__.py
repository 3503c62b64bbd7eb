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

__all__ = [
    "Debugger",
    "DebuggerError",
    "FxvizError",
    "FxvizWarning",
    "GraphDiff",
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
    "debugger_state",
    "diff",
    "dtype_changed",
    "nonfinite",
    "nonfinite_values",
    "record",
    "recording_class",
    "shapes",
    "shapes_diff",
    "spec",
    "time_heat",
    "to_dot",
    "to_svg",
    "trace",
]
