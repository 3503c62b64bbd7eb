"""The autocast and inference-mode regions a graph opens with nodes of its own, left
open where a run stopped inside one.

A Dynamo graph keeps ``with torch.autocast(...)`` and ``with torch.inference_mode()``
as a pair of nodes: ``_enter_autocast(...)`` and ``_exit_autocast(entered)``. A run that
fails between them, or a Debugger paused there, would leave the caller's thread in the
region (its next ``nn.Linear`` in bfloat16, its tensors without gradients):
:func:`close_open_regions` leaves them, and :func:`reopen` enters them again where a
Debugger goes on. (A symbolic trace's grad-mode changes are single
``_set_grad_enabled`` nodes: the callers keep the grad mode apart themselves.)

    >>> import torch, torch.fx
    >>> g = torch.fx.Graph()
    >>> x = g.placeholder("x")
    >>> on = g.call_function(torch.amp.autocast_mode._enter_autocast,
    ...                      ("cpu", torch.bfloat16, True, None))
    >>> env = {x: torch.ones(1), on: torch.amp.autocast_mode._enter_autocast(
    ...     "cpu", torch.bfloat16, True, None)}
    >>> torch.is_autocast_enabled("cpu")
    True
    >>> [n.name for n, _ in close_open_regions(env)], torch.is_autocast_enabled("cpu")
    (['_enter_autocast'], False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.node import map_arg

from fxviz._torch_compat import REGION_EXITS

__all__ = ["close_open_regions", "leave_stopped_run", "open_regions", "region_entries", "reopen"]


def region_entries(nodes: Iterable[torch.fx.Node]) -> list[torch.fx.Node]:
    """The nodes among ``nodes`` that enter a region, in their order."""
    return [n for n in nodes if n.op == "call_function" and n.target in REGION_EXITS]


def open_regions(
    env: Mapping[torch.fx.Node, Any], entries: Iterable[torch.fx.Node] | None = None
) -> list[tuple[torch.fx.Node, Any]]:
    """The region-entering nodes that ran (in ``env``, with a value) and whose exit has
    not, in the order they ran, each with what it returned (``entries``: the graph's
    :func:`region_entries`, when known: then ``env`` is not read through)."""
    found = []
    for node in region_entries(env) if entries is None else entries:
        value = env.get(node)
        leave = REGION_EXITS[node.target]  # type: ignore[index]  (an enter function)
        if value is not None and not any(u.target is leave and u in env for u in node.users):
            found.append((node, value))
    return found


def close_open_regions(
    env: Mapping[torch.fx.Node, Any], entries: Iterable[torch.fx.Node] | None = None
) -> list[tuple[torch.fx.Node, Any]]:
    """Leave the regions open in ``env`` (innermost first); returns them (see
    :func:`open_regions`)."""
    regions = open_regions(env, entries)
    for node, value in reversed(regions):
        REGION_EXITS[node.target](value)  # type: ignore[index]  (an enter function)
    return regions


def leave_stopped_run(grad: bool, env: Mapping[torch.fx.Node, Any]) -> None:
    """A run stopped (failed, interrupted) at a node: the caller's grad mode ``grad`` back
    (a ``no_grad`` region's ``_set_grad_enabled`` nodes changed it) and the regions it
    left open in ``env`` left."""
    torch.set_grad_enabled(grad)
    close_open_regions(env)


def reopen(regions: list[tuple[torch.fx.Node, Any]], env: dict[torch.fx.Node, Any]) -> None:
    """Enter again the regions :func:`close_open_regions` left (outermost first): each
    node's value in ``env`` becomes its new entry, which its exit node will leave."""
    for node, _ in regions:
        args, kwargs = map_arg((node.args, node.kwargs), env.__getitem__)
        env[node] = node.target(*args, **kwargs)  # type: ignore[operator]
