"""Notebook widgets (anywidget): the graph view and the debugger app.

The only part of fxviz that imports anywidget/ipywidgets.
"""

from __future__ import annotations

from typing import Any, Literal

from fxviz.widgets._app import DebuggerApp
from fxviz.widgets._graph_view import GraphView

__all__ = ["DebuggerApp", "GraphView", "debug", "show"]


def debug(
    model_or_gm: Any,
    *inputs: Any,
    depth: int | None = None,
    params: Literal["fold", "show"] = "fold",
    **options: Any,
) -> DebuggerApp:
    """A debugger app for ``model_or_gm`` on ``inputs``: step, inspect, break on NaN.

    ``options`` go to :class:`fxviz.Debugger` (``interpreter``, ``keep``, ``stats``).
    """
    from fxviz._record import Debugger

    return DebuggerApp(Debugger(model_or_gm, *inputs, **options), depth=depth, params=params)


def show(
    obj: Any, *, depth: int | None = None, params: Literal["fold", "show"] = "fold"
) -> GraphView:
    """The right view for a GraphModule, Recording, ShapeReport, GraphDiff, Debugger,
    ExportedProgram or TorchScript object. ``params``: as for :func:`fxviz.to_dot`."""
    from fxviz._record import Debugger

    if isinstance(obj, Debugger):
        return DebuggerApp(obj, depth=depth, params=params)
    return GraphView(obj, depth=depth, params=params)
