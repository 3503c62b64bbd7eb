"""Small example models used by the demo, the tutorials and the tests.

>>> import torch
>>> TwoLayerNet()(torch.randn(2, 1000)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch import nn

__all__ = [
    "ForkJoinNet",
    "NegSigmSwapInterpreter",
    "NegSigmSwapXformer",
    "TwoLayerNet",
    "neg_sigmoid",
    "two_layer_net_inputs",
]


class TwoLayerNet(nn.Module):
    """The two-layer network of the ``torch.fx`` ShapeProp example."""

    def __init__(self, d_in: int = 1000, hidden: int = 100, d_out: int = 10) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_in, hidden)
        self.linear2 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h_relu = self.linear1(x).clamp(min=0)
        return self.linear2(h_relu)


def two_layer_net_inputs(batch: int = 64, d_in: int = 1000, seed: int = 0) -> torch.Tensor:
    """A reproducible input batch for :class:`TwoLayerNet`."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, d_in, generator=generator)


def neg_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The function of the ``torch.fx`` Interpreter/Transformer docs: ``sigmoid(x).neg()``."""
    return torch.sigmoid(x).neg()


class _NegSigmSwap:
    """The docs' swap of ``torch.sigmoid`` and ``neg``, written correctly: the hooks take
    ``(target, args, kwargs)`` and pass those on. The same hooks serve an Interpreter (which
    runs the graph) and a Transformer (which writes a new one)."""

    def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if target is torch.sigmoid:
            return torch.neg(*args, **kwargs)
        return super().call_function(target, args, kwargs)  # type: ignore[misc]

    def call_method(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if target == "neg":
            call_self, *args_tail = args
            return call_self.sigmoid(*args_tail, **kwargs)
        return super().call_method(target, args, kwargs)  # type: ignore[misc]


class NegSigmSwapInterpreter(_NegSigmSwap, torch.fx.Interpreter):
    """The docs' Interpreter that swaps ``torch.sigmoid`` and ``neg`` while running.

    >>> gm = torch.fx.symbolic_trace(neg_sigmoid)
    >>> x = torch.randn(3, 4)
    >>> torch.equal(NegSigmSwapInterpreter(gm).run(x), torch.neg(x).sigmoid())
    True
    """


class NegSigmSwapXformer(_NegSigmSwap, torch.fx.Transformer):
    """The docs' Transformer that swaps ``torch.sigmoid`` and ``neg`` in a new graph.

    >>> gm = NegSigmSwapXformer(torch.fx.symbolic_trace(neg_sigmoid)).transform()
    >>> x = torch.randn(3, 4)
    >>> torch.equal(gm(x), torch.neg(x).sigmoid())
    True
    """


def _scaled_branch(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2


class ForkJoinNet(nn.Module):
    """A TorchScript-friendly model with ``torch.jit.fork``/``wait``, an ``if`` and a loop.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     scripted = torch.jit.script(ForkJoinNet())
    >>> scripted(torch.ones(2, 4)).shape
    torch.Size([2, 4])
    """

    def __init__(self, width: int = 4, repeats: int = 2) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.scale = 0.5
        self.repeats = repeats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(_scaled_branch, x)
        y = self.lin(x).relu()
        if bool(y.sum() > 0):
            y = y + 1
        for _ in range(self.repeats):
            y = y * self.scale
        return y + torch.jit.wait(future)
