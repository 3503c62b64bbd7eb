"""The debugger app: a GraphView with a stepping toolbar, an inspector, a table and status."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import traitlets

from fxviz._record import Debugger, has_nonfinite
from fxviz.errors import FxvizError, first_line
from fxviz.render._fold import Params
from fxviz.render._inspect import inspector_data
from fxviz.render._payload import (
    BREAKPOINTS_SUFFIX,
    TABLE_ROWS,
    breakpoint_names,
    debugger_states,
    node_rows_page,
    nonfinite_status,
)
from fxviz.widgets._graph_view import GraphView, one_at_a_time

__all__ = ["DebuggerApp"]


class DebuggerApp(GraphView):
    """Step a :class:`fxviz.Debugger` in the notebook: ``fxviz.debug(model, x)``.

    Toolbar actions travel as messages (the types of
    :data:`fxviz.render._payload.TOOLBAR_ACTIONS`: ``step``, ``back``, ``step10``,
    ``continue``, ``restart``, ``run_to_selected``, ``toggle_breakpoint``, ``break_nan``);
    the graph is laid out once and node states change as CSS classes. Keys: ``n`` step,
    ``b`` back, ``c`` continue, ``r`` restart, ``/`` search. ``pressed``: the toggles
    that are on (``break_nan``; ``toggle_breakpoint`` when the selection has one).
    Where JupyterLab runs widget messages on a kernel subshell (ipykernel 7), the
    toolbar's actions run beside your cells, out of reach of the kernel's interrupt:
    ``app.debugger.interrupt()`` in a cell stops a long ``continue``.

    Examples:
        >>> import torch, fxviz
        >>> app = fxviz.debug(torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.ones(1, 4))
        >>> app.handle({"type": "step"})
        >>> app.status
        "stopped at 'output' (step) — 2/3 nodes · breakpoints: none"
    """

    pressed = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(
        self,
        debugger: Debugger,
        *,
        depth: int | None = None,
        params: Params = "fold",
        **kwargs: Any,
    ) -> None:
        self.debugger = debugger
        self._fx_nodes: dict[str, Any] | None = None
        with torch_logs_kept() as logged:  # torch's own shape-pass log, never above the widget
            drawn = _labelled(debugger)
        super().__init__(drawn, depth=depth, params=params, mode="debugger", **kwargs)
        self.torch_log = [r.getMessage() for r in logged]  # kept for whoever asks
        if drawn is debugger.graph_module and logged and not self.error:
            self.error = _no_shapes_note(logged)
        self._refresh()

    @one_at_a_time
    def handle(self, content: dict[str, Any]) -> None:
        """Act on one toolbar message; debugger errors go to the status line."""
        actions = self.actions()
        kind = content.get("type")
        if kind not in actions:
            super().handle(content)
            return
        try:
            actions[kind]()
            self.error = ""
        except FxvizError as e:
            self.error = first_line(e)
        except KeyboardInterrupt:
            self.error = "interrupted"
        self._refresh()

    def actions(self) -> dict[str, Any]:
        """What each toolbar message type does (one for each of ``TOOLBAR_ACTIONS``)."""
        dbg = self.debugger
        return {
            "step": lambda: dbg.step(),
            "step10": lambda: dbg.step(10),
            "back": lambda: dbg.back(),
            "continue": dbg.continue_,
            "restart": dbg.restart,
            "run_to_selected": lambda: dbg.run_to(self._require_selection()),
            "toggle_breakpoint": lambda: dbg.toggle_breakpoint(self._require_selection()),
            "break_nan": self._toggle_nan_breakpoint,
        }

    def _toggle_nan_breakpoint(self) -> None:
        if has_nonfinite.__name__ in self.debugger.breakpoints:
            self.debugger.remove_breakpoint(has_nonfinite.__name__)
        else:
            self.debugger.break_when(has_nonfinite)

    def _require_selection(self) -> str:
        if not self.selected:
            raise FxvizError("select a node first (click it in the graph or the table)")
        return self.selected

    def _refresh(self) -> None:
        with self.hold_sync():  # states, status, table and inspector travel together
            self._publish()

    def _publish(self) -> None:
        dbg = self.debugger
        recording = dbg.recording
        self.node_states = debugger_states(dbg)
        status = dbg.status
        if dbg.stop_reason == has_nonfinite.__name__ and dbg.position:  # name the node that made it
            status = nonfinite_status([n.name for n in dbg.graph.nodes], dbg.position, dbg.skipped)
        breakpoints = breakpoint_names(dbg.breakpoints)
        self.status = status + BREAKPOINTS_SUFFIX.format(breakpoints=breakpoints)
        self._show_rows(*node_rows_page(self._drawing, recording.records(), limit=TABLE_ROWS))
        self._press()
        if self.selected:
            self._show(self.selected)
        elif (culprit := _stopped_after(dbg)) is not None:
            self._show(culprit)  # after a NaN/Inf (or other predicate) break: the node that did it
        elif dbg.current is not None:
            self._show(dbg.current.name)
        elif self.inspector.get("name"):  # finished: the node inspected last, as it is now
            self._show(self.inspector["name"])

    @one_at_a_time
    def _on_select(self, change: Any) -> None:
        self._show(change["new"])
        self._press()

    def _press(self) -> None:
        """Which toggles look pressed: what the debugger holds, never the page's guess."""
        held = self.debugger.breakpoints
        pressed = ["break_nan"] if has_nonfinite.__name__ in held else []
        if self.selected and f"at {self.selected}" in held:
            pressed.append("toggle_breakpoint")
        self.pressed = pressed

    def _show(self, name: str) -> None:
        recording = self.debugger.recording
        if self._fx_nodes is None:  # made once: a pass over every node at each step is not
            self._fx_nodes = {n.name: n for n in self.debugger.graph.nodes}
        node = self._fx_nodes.get(name)
        record = recording.get(name, None)
        if node is None:
            self.inspector = {}
            return
        drawn = self._node(name)
        data = inspector_data(name, node, record, folded=drawn.folded if drawn else ())
        if record is None and drawn is not None and drawn.lines and drawn.out_label:
            data["fields"].append(["expected output", drawn.lines[0]])  # from a shape pass
        self.inspector = data

    def __repr__(self) -> str:
        return f"<fxviz.DebuggerApp: {self.debugger.status}>"


@contextlib.contextmanager
def torch_logs_kept() -> Iterator[list[logging.LogRecord]]:
    """Keep what torch logs (``torch.*`` loggers) while fxviz works on the user's behalf
    in a list instead of printing it: a fake-tensor pass that fails logs a 19-line
    traceback (``failed while attempting to run meta for aten.mm.default``) that is only
    fxviz trying the cheapest way to label shapes.

    >>> import logging
    >>> with torch_logs_kept() as kept:
    ...     logging.getLogger("torch._subclasses.fake_tensor").error("failed to run meta")
    >>> [r.getMessage() for r in kept]
    ['failed to run meta']
    """
    kept: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    keep = _Keep()
    names = [
        "torch",
        *(n for n in list(logging.Logger.manager.loggerDict) if n.startswith("torch.")),
    ]
    saved = []
    for name in names:
        logger = logging.getLogger(name)
        if name == "torch" or logger.handlers or not logger.propagate:
            saved.append((logger, logger.handlers[:], logger.propagate))
            logger.handlers = [keep]
            logger.propagate = False
    try:
        yield kept
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate


def _no_shapes_note(logged: list[logging.LogRecord]) -> str:
    """One line for a graph drawn without shapes because torch's shape pass failed."""
    reason = ""
    for record in logged:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            text = str(error).splitlines()[0].rstrip(".") if str(error) else type(error).__name__
            reason = f" ({text})"
    return (
        "Output shapes are not shown: working them out before running failed"
        f"{reason}. Step or continue to see which node fails and why."
    )


# Stop reasons that name where the cursor is, not a node that just ran.
_CURSOR_REASONS = {"start", "step", "back", "breakpoint", "error", "end", "interrupted"}


def _stopped_after(debugger: Debugger) -> str | None:
    """The node whose output stopped the run (a ``break_when`` predicate such as
    ``has_nonfinite`` fired after it ran), else ``None``."""
    reason = debugger.stop_reason
    if reason in _CURSOR_REASONS or reason.startswith("run_to") or debugger.position == 0:
        return None
    return list(debugger.graph.nodes)[debugger.position - 1].name


def _labelled(debugger: Debugger) -> Any:
    """What to draw: the graph with every node's output shape, had as cheaply as it can be
    (from the graph's own metadata, else a meta-device pass, else a fake one)."""
    from fxviz._shapes._quick import drawn_shapes

    return drawn_shapes(debugger.graph_module, debugger._inputs)
