"""What to call a drawn model: its own class and how it was captured, not "GraphModule"."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from fxviz._torch_compat import has_plain_codegen

__all__ = ["capture_name", "model_title"]


def model_title(obj: Any) -> str:
    """``"TinyNet (torch.export)"``, ``"TinyNet (symbolic_trace)"``, ``"TinyNet (dynamo)"``,
    ``"TinyNet (one real run)"``: the model's class, read from the graph's module stack where
    capture renamed it, and the capture that made the graph (``meta["fxviz_method"]``).

    Example:
        >>> import torch, fxviz
        >>> model_title(fxviz.trace(torch.nn.Linear(2, 2), torch.ones(1, 2), method="export"))
        'Linear (torch.export)'
        >>> model_title(fxviz.trace(torch.nn.Sequential(torch.nn.ReLU())))
        'Sequential (symbolic_trace)'
        >>> model_title(fxviz.trace(torch.nn.ReLU(), torch.ones(2), method="real"))
        'ReLU (one real run)'
        >>> model_title(fxviz.trace(torch.nn.ReLU(), torch.ones(2), method="dynamo"))
        'ReLU (dynamo)'
    """
    rank = getattr(obj, "rank", None)  # a recording made in a torch.distributed job
    if isinstance(rank, int):
        return f"{_plain_title(obj)} · rank {rank} of {getattr(obj, 'world_size', '?')}"
    return _plain_title(obj)


def _plain_title(obj: Any) -> str:
    gm = getattr(obj, "graph_module", obj)
    if isinstance(obj, torch.export.ExportedProgram):
        return f"{_root_class(obj.graph) or 'ExportedProgram'} (torch.export)"
    if not isinstance(gm, torch.fx.GraphModule):
        return type(gm).__name__
    graph: torch.fx.Graph = gm.graph
    root = _root_class(graph)
    method = gm.meta.get("fxviz_method")
    if method in _CAPTURED:  # fxviz.trace says how; one run's capture is "Captured<Model>"
        name = type(gm).__name__.removeprefix("Captured")
        if name == "GraphModule" and method == "symbolic":
            return name  # symbolic_trace of a function: no model to name
        return f"{root or name} ({_CAPTURED[method]})"
    if not has_plain_codegen(graph):
        return f"{root or type(gm).__name__} (torch.export)"
    if type(gm).__name__ != "GraphModule" and not _dynamo_stack(graph):
        return f"{type(gm).__name__} (symbolic_trace)"
    return root or type(gm).__name__


_CAPTURED = {
    "symbolic": "symbolic_trace",
    "export": "torch.export",
    "dynamo": "dynamo",
    "real": "one real run",
}


def capture_name(method: str) -> str:
    """What a title calls a capture method (``"symbolic"`` -> ``"symbolic_trace"``): one
    word for it on every panel.

    >>> capture_name("real"), capture_name("joint")
    ('one real run', 'joint')
    """
    return _CAPTURED.get(method, method)


def _stacks(graph: torch.fx.Graph, limit: int = 100) -> list[dict]:
    """The first ``limit`` non-empty ``nn_module_stack`` entries: every node in a module
    carries the same outer entries, so a title never needs all 100,000 of a big graph."""
    found = []
    for node in graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            found.append(stack)
            if len(found) >= limit:
                break
    return found


def _root_class(graph: torch.fx.Graph) -> str | None:
    """The class of the module at path ``""`` in any node's ``nn_module_stack``."""
    for stack in _stacks(graph):
        for path, kind in stack.values():
            if path == "":
                name = kind.__name__ if isinstance(kind, type) else str(kind)
                return name.rsplit(".", 1)[-1]
    return None


def _dynamo_stack(graph: torch.fx.Graph) -> bool:
    return any(str(key).startswith("L__self__") for stack in _stacks(graph) for key in stack)
