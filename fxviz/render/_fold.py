"""Parameters where they belong: parameter/buffer fetches folded into the nodes using them,
and each call of a reused module as its own group."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

import torch
import torch.fx

from fxviz._nodes import fetched_tensor
from fxviz._nodes import is_parameter_fetch as fetches_tensor
from fxviz.render._collapse import real_path

__all__ = [
    "FOLDED_KINDS",
    "ModuleStacks",
    "Params",
    "call_paths",
    "fetched_tensor",
    "is_parameter_fetch",
    "real_path",
]

Params = Literal["fold", "show"]
FOLDED_KINDS = ("parameter", "buffer", "constant")


def is_parameter_fetch(
    gm: torch.nn.Module, node: torch.fx.Node, kinds: Mapping[str, str] | None = None
) -> bool:
    """Whether ``node`` only fetches a parameter, buffer or tensor constant: a ``get_attr``
    of a tensor, or a lifted placeholder of an exported program (``kinds`` says which).

    Example:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Linear(2, 2), torch.ones(1, 2), method="export")
        >>> [n.name for n in gm.graph.nodes if is_parameter_fetch(gm, n)]
        ['weight', 'bias']
    """
    if kinds and kinds.get(node.name) in FOLDED_KINDS:
        return True
    return fetches_tensor(gm, node)


def foldable(node: torch.fx.Node) -> bool:
    """A fetch is folded into its users unless the graph returns it (an unused one, such
    as the second name of a tied weight, is not drawn at all)."""
    return all(u.op != "output" for u in node.users)


@dataclasses.dataclass
class ModuleStacks:
    """What a graph's ``nn_module_stack`` entries say, read in one pass (see
    :func:`call_paths`): ``paths``, ``{node name: module path}``, and ``types``,
    ``{module path: class name}`` (a traced GraphModule replaces container modules with
    plain ``nn.Module`` objects, so their classes live only there)."""

    paths: dict[str, str]
    types: dict[str, str]


def call_paths(graph: torch.fx.Graph) -> ModuleStacks:
    """``{node name: module path}`` where a module's second and later calls get their own
    path (``pool``, ``pool@2``; inside them ``blk@2.0``), read from ``nn_module_stack``,
    whose keys ``symbolic_trace`` and ``torch.export`` number per call (``pool@1``); and
    each module's class name, from the same entries.

    Nodes outside any module are left out.

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.ReLU()))
        >>> stacks = call_paths(fxviz.trace(model).graph)
        >>> stacks.paths, stacks.types
        ({'_0_0': '0.0'}, {'0': 'Sequential', '0.0': 'ReLU'})
    """
    calls: dict[tuple[str, str], list[str]] = {}  # (drawn parent, path) -> call keys in order
    steps: dict[tuple[str, str, Any, Any], tuple[str, str]] = {}  # made once, never changes
    found: dict[str, str] = {}
    types: dict[str, str] = {}
    for node in graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if not stack:
            continue
        drawn, parent = "", ""
        for key, entry in stack.items():
            known = steps.get((drawn, parent, key, entry[0]))
            if known is not None:  # most nodes: the steps of a node before them
                drawn, parent = known
                continue
            # a step never met: the first node in this module call (each module's first
            # node among them, which is where its class name is read)
            if isinstance(entry[0], str) and entry[0] and entry[0] not in types:
                kind = entry[1]
                types[entry[0]] = (
                    kind.__name__ if isinstance(kind, type) else str(kind).rsplit(".", 1)[-1]
                )
            path = entry[0] if isinstance(entry[0], str) else str(entry[0])
            if not path:
                continue
            keys = calls.setdefault((drawn, path), [])
            if key not in keys:
                keys.append(key)
            number = keys.index(key) + 1
            rest = path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path
            step = rest if number == 1 else f"{rest}@{number}"
            made = f"{drawn}.{step}" if drawn and rest != path else step
            steps[drawn, parent, key, entry[0]] = (made, path)
            drawn, parent = made, path
        if drawn:
            found[node.name] = drawn
    return ModuleStacks(found, types)
