"""The Debugger's breakpoint commands: ``break_at``, ``break_on``, ``break_when``..."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from fxviz._record._breakpoints import OPS, Breakpoint, never_matches, target_matcher
from fxviz._record._records import NodeRecord
from fxviz.errors import FxvizWarning, UnknownNodeError

__all__ = ["BreakpointCommands"]


class BreakpointCommands:
    """Mixed into :class:`fxviz.Debugger`: setting, listing and removing breakpoints."""

    _breakpoints: list[Breakpoint]
    _nodes: list[torch.fx.Node]
    _options: dict[str, Any]
    graph_module: torch.fx.GraphModule

    def _node(self, name: str) -> torch.fx.Node:
        raise NotImplementedError

    def break_at(self, name: str) -> None:
        """Stop before node ``name`` runs."""
        node = self._node(name)
        self._breakpoints.append(Breakpoint(f"at {node.name}", before=lambda n: n is node))

    def break_on(self, op: str | None = None, target: Any = None) -> None:
        """Stop before any node with this ``op`` and/or ``target``.

        ``target`` may be the callable (``torch.relu``), a module class (``nn.Linear``), or
        text matched against the node's target (``"relu"`` matches ``torch.relu``,
        ``aten.relu.default`` and the method ``relu``).
        """
        if op is None and target is None:
            raise ValueError("break_on needs op=... and/or target=...")
        if op is not None and op not in OPS:
            close = difflib.get_close_matches(str(op), OPS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown op: {op!r} (must be one of {list(OPS)}){hint}")
        match_target = target_matcher(target, self.graph_module) if target is not None else None

        def before(node: torch.fx.Node) -> bool:
            return (op is None or node.op == op) and (match_target is None or match_target(node))

        parts = [f"op={op}" if op else "", f"target={target!r}" if target is not None else ""]
        description = " ".join(p for p in parts if p)
        if not any(before(n) for n in self._nodes):
            raise UnknownNodeError(never_matches(self._nodes, description, op, target))
        self._breakpoints.append(Breakpoint("on " + description, before=before))

    def break_when(self, predicate: Callable[[NodeRecord], bool]) -> None:
        """Stop after a node whose record satisfies ``predicate`` (e.g. ``fxviz.has_nonfinite``)."""
        if not callable(predicate):
            raise TypeError(f"break_when takes a function of a NodeRecord, not {predicate!r}")
        name = getattr(predicate, "__name__", repr(predicate))
        if self._options["stats"] is False and self._options["keep"] == "stats":
            warnings.warn(
                f"break_when({name}): with stats=False and keep='stats' a record has neither "
                "statistics nor a value, so predicates such as fxviz.has_nonfinite never fire",
                FxvizWarning,
                stacklevel=2,
            )
        self._breakpoints.append(Breakpoint(name, after=predicate))

    def toggle_breakpoint(self, name: str) -> bool:
        """Set a breakpoint at node ``name``, or remove it; returns whether one is set now."""
        node = self._node(name)
        description = f"at {node.name}"
        before = len(self._breakpoints)
        self._breakpoints = [b for b in self._breakpoints if b.description != description]
        if len(self._breakpoints) < before:
            return False
        self.break_at(node.name)
        return True

    def remove_breakpoint(self, description: str) -> None:
        """Remove the breakpoints listed as ``description`` in :attr:`breakpoints`."""
        self._breakpoints = [b for b in self._breakpoints if b.description != description]

    def clear_breakpoints(self) -> None:
        """Remove every breakpoint."""
        self._breakpoints.clear()

    @property
    def breakpoints(self) -> list[str]:
        """Descriptions of the breakpoints set, in order."""
        return [b.description for b in self._breakpoints]
