"""A call written as ``model(*args, **kwargs)`` as the positional inputs a graph takes."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from fxviz._capture._stitch import Capture
from fxviz._torch_compat import has_plain_codegen
from fxviz.errors import InputError

__all__ = ["bind_inputs"]


def bind_inputs(gm: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple:
    """The positional inputs of ``gm`` for a call written as ``model(*args, **kwargs)``.

    A captured graph (:class:`fxviz.Capture`) flattens them as it was captured; a plain
    GraphModule fills its placeholders by name.

    >>> import torch, torch.fx
    >>> gm = torch.fx.symbolic_trace(lambda x, y=None: x if y is None else x + y)
    >>> [t.tolist() for t in bind_inputs(gm, (), {"y": torch.ones(1), "x": torch.zeros(1)})]
    [[0.0], [1.0]]
    """
    if isinstance(gm, Capture):
        return tuple(gm.flat_inputs(args, kwargs))
    if not kwargs:
        return tuple(args)
    graph: torch.fx.Graph = gm.graph  # type: ignore[assignment]
    if not has_plain_codegen(graph):
        raise InputError(
            "this exported graph takes positional inputs only; capture it with its keyword "
            "inputs instead: fxviz.trace(model, *args, **kwargs)"
        )
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    names = [str(n.target).lstrip("*") for n in placeholders]
    unknown = [k for k in kwargs if k not in names[len(args) :]]
    if unknown:
        raise InputError(
            f"unknown keyword input(s) {', '.join(map(repr, unknown))}: the graph takes "
            f"({', '.join(names)}) and {len(args)} were given positionally"
        )
    values = list(args)
    for node, name in zip(placeholders[len(args) :], names[len(args) :], strict=True):
        if name in kwargs:
            values.append(kwargs[name])
        elif node.args:
            values.append(node.args[0])
        else:
            raise InputError(f"missing input {name!r}: the graph takes ({', '.join(names)})")
    return tuple(values)
