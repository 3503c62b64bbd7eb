"""What a Debugger shows of where it is: the cursor, its status line, values so far."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import torch
import torch.fx

from fxviz._record._breakpoints import Breakpoint
from fxviz._record._recorder import Recorder
from fxviz._record._records import NodeRecord, Recording
from fxviz.errors import DebuggerError, first_line

__all__ = ["DebuggerState", "node_count", "node_state", "status_line"]


class DebuggerState:
    """Mixed into :class:`fxviz.Debugger`: its read-only state."""

    _pos: int
    _nodes: list[torch.fx.Node]
    _recorder: Recorder
    _output: Any
    _interp: Any
    _reason: str
    _options: dict[str, Any]
    _breakpoints: list[Breakpoint]
    _fetches: set[int]
    _uncounted: frozenset[int]
    skip_fetches: bool

    def _node(self, name: str) -> torch.fx.Node:
        raise NotImplementedError

    def _ran(self, name: str) -> NodeRecord:
        raise NotImplementedError

    @property
    def current(self) -> torch.fx.Node | None:
        """The next node to run (or the node that raised); ``None`` when the graph is done."""
        return self._nodes[self._pos] if self._pos < len(self._nodes) else None

    @property
    def done(self) -> bool:
        """Whether the output node has run."""
        return self._pos >= len(self._nodes)

    @property
    def error(self) -> BaseException | None:
        """The exception raised by the current node (post-mortem), else ``None``."""
        recorder = self._recorder
        if self._pos < len(recorder.entries):
            return recorder.entries[self._pos].error
        return None

    @property
    def output(self) -> Any:
        """What the graph returned, once done (identical to ``gm(*inputs)``), else ``None``."""
        return self._output if self.done else None

    @property
    def recording(self) -> Recording:
        """Everything recorded up to the cursor (the failing node included)."""
        upto = self._pos + (1 if self.error is not None else 0)
        return self._recorder.recording(upto=upto)

    @property
    def interpreter(self) -> torch.fx.Interpreter:
        """The recording interpreter that runs the nodes."""
        return self._interp

    @property
    def position(self) -> int:
        """How many nodes have run up to the cursor."""
        return self._pos

    @property
    def stop_reason(self) -> str:
        """Why the debugger last stopped: ``start``, ``step``, ``back``, ``breakpoint``,
        a predicate's name, ``error``, ``end`` or ``interrupted``."""
        return self._reason

    @property
    def status(self) -> str:
        """One line: where it stopped and why, e.g. ``stopped at 'linear2' (breakpoint) — 3/5 nodes``."""
        names = [n.name for n in self._nodes]
        return status_line(names, self._pos, self._reason, self.error, self.skipped)

    @property
    def skipped(self) -> frozenset[int]:
        """Indices of the nodes that stepping goes over and :attr:`status` never counts
        (parameter fetches, telemetry calls; the inputs, stepped over too, count as run
        from the start). Empty with ``skip_fetches=False``."""
        return self._uncounted if self.skip_fetches else frozenset()

    def node_states(self) -> dict[str, list[str]]:
        """Each node's states for drawing: ``done``, ``current``, ``pending``, ``error``,
        and ``breakpoint`` where one is set."""
        states: dict[str, list[str]] = {}
        error = self.error is not None
        for i, node in enumerate(self._nodes):
            state = node_state(i, self._pos, error)
            if any(bp.before is not None and bp.before(node) for bp in self._breakpoints):
                state.append("breakpoint")
            states[node.name] = state
        return states

    def value(self, name: str) -> Any:
        """The value node ``name`` produced, as it was when it ran."""
        record = self._ran(name)
        if not record.kept:
            keep = self._options["keep"]
            raise DebuggerError(
                f"the value of {name!r} was not kept (keep={keep!r}); its statistics are in "
                f"dbg.recording[{name!r}]. Use keep='all' or a larger byte budget to keep values."
            )
        return record.value

    def inputs(self, name: str | None = None) -> dict[str, Any]:
        """Values of the inputs of node ``name`` (default: the current node), by input name."""
        node = self.current if name is None else self._node(name)
        if node is None:
            raise DebuggerError("the graph is done: name a node, e.g. dbg.inputs('output')")
        return {n.name: self.value(n.name) for n in node.all_input_nodes}


def node_state(index: int, position: int, failed_here: bool) -> list[str]:
    """The drawing state of node ``index`` when ``position`` nodes have run:
    ``done``, ``current`` (or ``error`` when the node at the cursor raised), ``pending``.

    >>> node_state(0, 1, False), node_state(1, 1, True), node_state(2, 1, False)
    (['done'], ['error'], ['pending'])
    """
    if index < position:
        return ["done"]
    if index == position:
        return ["error" if failed_here else "current"]
    return ["pending"]


def status_line(
    names: list[str],
    position: int,
    reason: str,
    error: BaseException | None,
    skip: Collection[int] = (),
) -> str:
    """The debugger's one-line status (:attr:`Debugger.status`) for a cursor position.
    The count is of the model's own nodes: ``skip`` (the indices of parameter fetches
    and telemetry calls, which stepping goes over) are never counted.

    >>> status_line(["x", "relu", "output"], 1, "step", None)
    "stopped at 'relu' (step) — 1/3 nodes"
    >>> status_line(["x", "w", "linear", "output"], 2, "step", None, skip={1})
    "stopped at 'linear' (step) — 1/3 nodes"
    """
    count = node_count(len(names), position, skip)
    if position >= len(names):
        return f"finished — {count}"
    name = names[position]
    if error is not None:
        return f"stopped at {name!r} ({type(error).__name__}: {first_line(error)}) — {count}"
    return f"stopped at {name!r} ({reason}) — {count}"


def node_count(total: int, position: int, skip: Collection[int] = ()) -> str:
    """``"ran/total nodes"`` when ``position`` nodes have run, ``skip`` left out of both.

    >>> node_count(5, 3, skip={0, 1}), node_count(5, 5)
    ('1/3 nodes', '5/5 nodes')
    """
    ran = position - sum(1 for i in skip if i < position)
    return f"{ran}/{total - len(skip)} nodes"
