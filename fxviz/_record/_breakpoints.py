"""Breakpoints: what stops ``Debugger.continue_``, and checks that one can ever fire."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from fxviz._nodes import target_text
from fxviz._record._records import NodeRecord
from fxviz.errors import DebuggerError

__all__ = ["OPS", "Breakpoint", "call_predicate", "never_matches", "target_matcher"]

OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")


@dataclasses.dataclass(frozen=True)
class Breakpoint:
    """Stops ``continue_`` before a matching node runs (``before``) or after a node whose
    record satisfies ``after``."""

    description: str
    before: Callable[[torch.fx.Node], bool] | None = None
    after: Callable[[NodeRecord], bool] | None = None


def never_matches(nodes: list[torch.fx.Node], description: str, op: str | None, target: Any) -> str:
    """``no node in this graph has target='relux'; targets there: 'torch.relu', ...``"""
    nodes = [n for n in nodes if op is None or n.op == op]
    targets = list(dict.fromkeys(target_text(n) for n in nodes))
    shorts = {t.rsplit(".", 1)[-1]: t for t in targets}
    wanted = target if isinstance(target, str) else getattr(target, "__name__", str(target))
    close = difflib.get_close_matches(wanted, targets, n=3) or [
        shorts[m] for m in difflib.get_close_matches(wanted, list(shorts), n=3)
    ]
    hint = (
        f"; did you mean {', '.join(map(repr, close))}?"
        if close
        else f"; targets there: {', '.join(map(repr, targets[:12]))}"
        if targets
        else ""
    )
    return f"no node in this graph matches break_on({description}), so it would never stop{hint}"


def target_matcher(target: Any, root: torch.nn.Module) -> Callable[[torch.fx.Node], bool]:
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        modules = dict(root.named_modules())
        return lambda n: n.op == "call_module" and isinstance(modules.get(str(n.target)), target)
    if isinstance(target, str):
        short = target.rsplit(".", 1)[-1]

        def matches_text(n: torch.fx.Node) -> bool:
            text = target_text(n)
            if text == target or n.target == target:
                return True
            parts = text.split(".")
            return short in parts and (target == short or text.endswith(target))

        return matches_text
    return lambda n: n.target is target or n.target == target


def call_predicate(bp: Breakpoint, record: NodeRecord) -> bool:
    try:
        return bool(bp.after(record))  # type: ignore[misc]
    except Exception as e:
        raise DebuggerError(
            f"breakpoint predicate {bp.description!r} raised {type(e).__name__}: {e} "
            f"on node {record.name!r}; the node ran and is recorded. Fix or clear_breakpoints()."
        ) from e
