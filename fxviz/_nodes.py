"""Readable facts about one ``torch.fx.Node``: its target as text, module path, inputs.

>>> import torch, torch.fx
>>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
>>> [target_text(n) for n in gm.graph.nodes]
['x', 'torch.relu', 'operator.add', 'output']
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from fxviz._torch_compat import OpOverload, OpOverloadPacket, qualified_name

__all__ = [
    "fetched_tensor",
    "is_bookkeeping",
    "is_parameter_fetch",
    "is_stepped_over",
    "module_path",
    "source_line",
    "target_text",
]


def target_text(node: torch.fx.Node) -> str:
    """What the node calls, as a person would write it.

    ``call_function`` gives the qualified function (``torch.relu``, ``aten.linear.default``),
    ``call_method`` the method name (``view``), ``call_module``/``get_attr`` the attribute
    path (``layers.0.lin``), ``placeholder`` the argument name.
    """
    target = node.target
    if isinstance(target, str):
        return target
    if isinstance(target, (OpOverload, OpOverloadPacket)):
        return str(target)
    return qualified_name(target)


def module_path(node: torch.fx.Node) -> str:
    """Dotted path of the innermost module the node belongs to; ``""`` at top level.

    Read from ``node.meta["nn_module_stack"]`` (filled by ``symbolic_trace`` and
    ``torch.export``); a ``call_module`` node belongs to the module it calls.
    """
    stack = node.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1][0]
        return path if isinstance(path, str) else str(path)
    if node.op == "call_module":
        return str(node.target)
    return ""


def source_line(node: torch.fx.Node) -> str:
    """The user's source line that produced the node (last frame of ``stack_trace``), or ``""``."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{lines[i]}: {code}".strip(": ")
    return ""


def fetched_tensor(root: torch.nn.Module, node: torch.fx.Node) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node fetches (parameter, buffer or constant), else ``None``."""
    if node.op != "get_attr":
        return None
    value: Any = root
    try:
        for part in str(node.target).split("."):
            value = getattr(value, part)
    except AttributeError:
        return None
    return value if isinstance(value, torch.Tensor) else None


def is_parameter_fetch(root: torch.nn.Module, node: torch.fx.Node) -> bool:
    """Whether ``node`` only fetches a parameter, buffer or tensor constant (a ``get_attr``
    of a tensor): drawings fold it into its users and the Debugger steps over it."""
    return fetched_tensor(root, node) is not None


# Calls torch makes for its own telemetry and bookkeeping, which Dynamo captures as nodes
# whose result nothing uses: recorded like any node, never drawn nor counted as a step.
_BOOKKEEPING = tuple(
    f
    for f in (
        getattr(torch._C, "_log_api_usage_once", None),
        getattr(torch._C, "_log_api_usage_metadata", None),
    )
    if f is not None
)


_GUARDS = "_guards_fn"  # torch.export's check of its guards, in the exported module


def is_bookkeeping(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a telemetry call nothing uses (``torch._C._log_api_usage_once``),
    or the guard check ``torch.export`` puts before a graph's work (``_guards_fn``, called
    with every input): drawings hide it and the Debugger steps over it, as over a
    parameter fetch.

    >>> g = torch.fx.Graph()
    >>> n = g.call_function(torch._C._log_api_usage_once, ("fxviz",))
    >>> is_bookkeeping(n), is_bookkeeping(g.placeholder("x"))
    (True, False)
    >>> is_bookkeeping(g.call_module("_guards_fn", (g.placeholder("y"),)))
    True
    """
    if node.op == "call_module" and node.target == _GUARDS:
        return not getattr(node, "users", ())
    if node.op != "call_function" or node.target not in _BOOKKEEPING:
        return False
    return not getattr(node, "users", ())  # a saved graph's nodes keep no users: telemetry


def is_stepped_over(root: torch.nn.Module, node: torch.fx.Node) -> bool:
    """Whether stepping goes over ``node``, which is no step a person takes: an input (a
    run starts with its inputs given), a parameter fetch or a telemetry call. Such nodes
    still run and are recorded; the report's scrubber never stops on them. (Inputs are
    drawn, and counted as run from the start; fetches and telemetry calls are neither.)

    >>> gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    >>> [n.name for n in gm.graph.nodes if is_stepped_over(gm, n)]
    ['input_1', 'weight', 'bias']
    """
    return node.op == "placeholder" or is_parameter_fetch(root, node) or is_bookkeeping(node)
