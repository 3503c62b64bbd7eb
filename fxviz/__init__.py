"""fxviz: a visual debugger for PyTorch computation graphs.

Run a ``torch.fx`` graph node by node, remember everything it produced, and step,
search and compare it.

    >>> import torch, fxviz
    >>> rec = fxviz.record(torch.nn.Linear(4, 2), torch.ones(3, 4))
    >>> rec["linear"].shape
    (3, 2)

The facade is lazy: ``import fxviz`` imports neither torch nor the widgets; each public
name loads its module on first use (so ``fxviz --help`` answers at once). Overlays live in
one namespace, :mod:`fxviz.overlays`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fxviz._display import register_notebook_display as _register_notebook_display
from fxviz._version import __version__
from fxviz._wiring import wire as _wire

_wire()  # what lower layers call by name (fxviz._providers), each imported on first use

# The public names, grouped, with the module that defines them (loaded on first use).
# __all__ and the TYPE_CHECKING imports list the same names: tests/architecture/
# test_facade.py checks that the three agree, and that the API reference shows each one.
_PUBLIC: dict[str, tuple[str, ...]] = {
    "fxviz.capture": ("trace", "Capture", "GraphBreak", "JointGraph"),  # a model -> graphs
    "fxviz._record": ("record", "Recording", "NodeRecord", "TensorSummary",  # run, keep
                      "Debugger", "has_nonfinite", "dtype_changed", "RecordingMixin",
                      "JointRecording"),
    "fxviz._shapes": ("shapes", "ShapeReport", "spec", "TensorSpec"),
    "fxviz.render": ("to_dot", "to_svg", "GraphDiff"),  # draw
    "fxviz._compare": ("compare", "Comparison", "compare_dtype", "compare_pass", "diff",
                       "shapes_diff"),  # one engine: what changed, how values differ
    "fxviz.widgets": ("show", "debug", "GraphView", "DebuggerApp"),  # the notebook
    "fxviz._report": ("report",),  # one offline HTML file
    "fxviz._saved": ("save",),  # one .fxrec file
    "fxviz._training": ("watch", "load"),  # training runs; load: .fxrec and .fxinc files
    "fxviz._ranks": ("compare_ranks",),  # runs of several processes, rank by rank
    "fxviz.errors": ("FxvizError", "NodeError", "InputError", "TraceError", "ShapeError",
                     "SpecError", "RenderError", "TargetError", "PlacementError",
                     "UnknownNodeError", "RecordingFileError", "DebuggerError",
                     "RecordingInterrupted", "FxvizWarning", "FxvizDeprecationWarning",
                     "DrawingWarning", "NonFiniteStep"),
}  # fmt: skip
_LAZY: dict[str, str] = {name: module for module, names in _PUBLIC.items() for name in names}
_SUBMODULES = ("overlays",)  # imported on first use: fxviz.overlays.highlight_nonfinite()


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use and cache the name here."""
    if name in _SUBMODULES:
        return importlib.import_module(f"fxviz.{name}")
    module = _LAZY.get(name)
    if module is None:
        from fxviz._deprecated import old_name  # fxviz.nonfinite... work, with a warning

        return old_name(name)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(globals()))


_register_notebook_display()

__all__ = [
    "Capture",
    "Comparison",
    "Debugger",
    "DebuggerApp",
    "DebuggerError",
    "DrawingWarning",
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
    "RecordingInterrupted",
    "RecordingMixin",
    "RenderError",
    "ShapeError",
    "ShapeReport",
    "SpecError",
    "TargetError",
    "TensorSpec",
    "TensorSummary",
    "TraceError",
    "UnknownNodeError",
    "__version__",
    "compare",
    "compare_dtype",
    "compare_pass",
    "compare_ranks",
    "debug",
    "diff",
    "dtype_changed",
    "has_nonfinite",
    "load",
    "overlays",
    "record",
    "report",
    "save",
    "shapes",
    "shapes_diff",
    "show",
    "spec",
    "to_dot",
    "to_svg",
    "trace",
    "watch",
]  # fmt: skip

if TYPE_CHECKING:  # static checkers and IDEs see the real objects (the names of _PUBLIC)
    from fxviz import overlays
    from fxviz._compare import (
        Comparison,
        compare,
        compare_dtype,
        compare_pass,
        diff,
        shapes_diff,
    )
    from fxviz._ranks import compare_ranks
    from fxviz._record import (
        Debugger,
        JointRecording,
        NodeRecord,
        Recording,
        RecordingMixin,
        TensorSummary,
        dtype_changed,
        has_nonfinite,
        record,
    )
    from fxviz._report import report
    from fxviz._saved import save
    from fxviz._shapes import ShapeReport, TensorSpec, shapes, spec
    from fxviz._training import load, watch
    from fxviz.capture import Capture, GraphBreak, JointGraph, trace
    from fxviz.errors import (
        DebuggerError,
        DrawingWarning,
        FxvizDeprecationWarning,
        FxvizError,
        FxvizWarning,
        InputError,
        NodeError,
        NonFiniteStep,
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
    from fxviz.render import GraphDiff, to_dot, to_svg
    from fxviz.widgets import DebuggerApp, GraphView, debug, show
