"""Notebook widgets (anywidget): the graph view and the debugger app.

The only part of fxviz that imports anywidget/ipywidgets.
"""

from __future__ import annotations

from typing import Any, Literal

from fxviz.widgets._app import DebuggerApp
from fxviz.widgets._graph_view import GraphView

__all__ = ["DebuggerApp", "GraphView", "debug", "show"]


def debug(
    gm_or_module: Any,
    *inputs: Any,
    depth: int | None = None,
    params: Literal["fold", "show"] = "fold",
    **options: Any,
) -> DebuggerApp:
    """A debugger app for ``gm_or_module`` on ``inputs``: step, inspect, break on NaN.

    Given an incident of :func:`fxviz.watch` (``fxviz.debug(incident)``, or
    ``fxviz.debug(incident, model)`` for a loaded one), the step is replayed and the
    debugger opens just after its first non-finite node.

    ``options`` go to :class:`fxviz.Debugger` (``interpreter``, ``keep``, ``stats``,
    ``method``).

    Examples:
        >>> import torch, fxviz
        >>> app = fxviz.debug(torch.nn.Linear(4, 2), torch.ones(1, 4))
        >>> app.handle({"type": "continue"})
        >>> app.status
        'finished — 3/3 nodes · breakpoints: none'
    """
    from fxviz._record import Debugger
    from fxviz._training import Incident

    if isinstance(gm_or_module, Incident):  # a training run's bad step, replayed
        return DebuggerApp(gm_or_module.debugger(*inputs), depth=depth, params=params)
    return DebuggerApp(Debugger(gm_or_module, *inputs, **options), depth=depth, params=params)


def show(
    obj: Any, *, depth: int | None = None, params: Literal["fold", "show"] = "fold"
) -> GraphView:
    """The right view for a GraphModule, Recording, ShapeReport, GraphDiff, Debugger,
    ExportedProgram or TorchScript object. ``params``: as for :func:`fxviz.to_dot`.

    Examples:
        >>> import torch, fxviz
        >>> view = fxviz.show(fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4)))
        >>> type(view).__name__, [row["name"] for row in view.rows]
        ('GraphView', ['input_1', 'linear', 'output'])
    """
    from fxviz._ranks import RankComparison
    from fxviz._record import Debugger

    if isinstance(obj, Debugger):
        return DebuggerApp(obj, depth=depth, params=params)
    if isinstance(obj, RankComparison):  # a rank selector above the graph
        from fxviz.widgets._ranks import RankView

        return RankView(obj)  # type: ignore[return-value]
    return GraphView(obj, depth=depth, params=params)
