"""Small example models used by the demo, the tutorials and the tests.

>>> import torch
>>> TwoLayerNet()(torch.randn(2, 1000)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["TwoLayerNet", "two_layer_net_inputs"]


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
