"""Trace one real run: every op that ran on these inputs, branches and loop counts included.

``make_fx`` with real tensors follows the Python the model actually executes (an ``if`` on
a tensor takes the branch it took, a loop over ``.tolist()`` runs as many times as it
ran), so the result is one graph of exactly what happened. Module hooks stamp each node
with the module it ran in (``nn_module_stack``), as symbolic tracing does.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.fx

from fxviz._capture._inputs import flatten_inputs
from fxviz._capture._segments import tensors_in
from fxviz._capture._state import restored_state
from fxviz._capture._stitch import Capture, GraphBreak, GraphCall, stitch

__all__ = ["capture_real", "tensors_in"]


def capture_real(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Capture:
    """One graph of the aten ops ``model(*args, **kwargs)`` ran (with real values)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils import _pytree as pytree  # private, stable since torch 1.13

    names, leaves = flatten_inputs(model, args, kwargs)
    arg_leaves, spec = pytree.tree_flatten((args, kwargs), is_leaf=lambda v: v is None)
    result: dict[str, Any] = {}
    stamps = _ModuleStamps(model)

    def run(*flat: Any) -> list[torch.Tensor]:
        call_args, call_kwargs = pytree.tree_unflatten(list(flat), spec)
        with stamps:
            output = model(*call_args, **call_kwargs)
        result["output"] = output
        outs = tensors_in(output)
        result["outputs"] = outs
        return outs

    with warnings.catch_warnings(), restored_state(model, inputs=leaves) as state:
        warnings.simplefilter("ignore")
        gm = make_fx(
            run,
            tracing_mode="real",
            pre_dispatch=True,
            record_stack_traces=True,
            _error_on_data_dependent_ops=False,
        )(*arg_leaves)
        writes = state.writes()
    stamps.apply(gm.graph)
    # No dead-code elimination: an op whose result went to Python (.item(), .tolist())
    # ran all the same.
    call = GraphCall(0, list(arg_leaves), result["outputs"])
    return stitch(
        model,
        names,
        leaves,
        [gm],
        [call],
        result["output"],
        method="real",
        breaks=lambda k: GraphBreak(k, "the model returned"),
        writes=writes,
    )


class _ModuleStamps:
    """Notes, while tracing, which module each new node was made in."""

    def __init__(self, model: Any) -> None:
        self.paths = (
            {id(m): (p, type(m)) for p, m in model.named_modules()}
            if isinstance(model, torch.nn.Module)
            else {}
        )
        self.stack: list[tuple[str, type]] = []
        self.spans: list[tuple[int, tuple[tuple[str, type], ...]]] = []  # (node count, stack)
        self._handles: list[Any] = []

    def _graph_size(self) -> int:
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        mode = get_proxy_mode()
        return len(mode.tracer.graph.nodes) if mode is not None else -1

    def _enter(self, module: torch.nn.Module, *_: Any) -> None:
        entry = self.paths.get(id(module))
        if entry is not None and entry[0]:
            self.spans.append((self._graph_size(), tuple(self.stack)))
            self.stack.append(entry)

    def _exit(self, module: torch.nn.Module, *_: Any) -> None:
        entry = self.paths.get(id(module))
        if entry is not None and entry[0] and self.stack:
            self.spans.append((self._graph_size(), tuple(self.stack)))
            self.stack.pop()

    def __enter__(self) -> None:
        from torch.nn.modules import module as nn_module

        self._handles = [
            nn_module.register_module_forward_pre_hook(self._enter),
            nn_module.register_module_forward_hook(self._exit),
        ]

    def __exit__(self, *_: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self.spans.append((10**12, tuple(self.stack)))

    def apply(self, graph: torch.fx.Graph) -> None:
        """Give each node the module stack it was made under."""
        nodes = list(graph.nodes)
        start = 0
        for end, stack in self.spans:
            if end < 0:
                continue
            for node in nodes[start:end]:
                if stack and node.op not in ("placeholder", "output"):
                    node.meta["nn_module_stack"] = {
                        f"{path}@{i}": (path, kind) for i, (path, kind) in enumerate(stack)
                    }
            start = max(start, end)
