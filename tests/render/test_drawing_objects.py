"""A drawn node costs what Python's cycle collector has to walk: after a 100,000-node
drawing is made, every collection walks all of its objects, so a node is one object (its
label, tooltip and colour made when first read) and an edge one more."""

from __future__ import annotations

import gc

import torch
from torch import nn

import fxviz
from fxviz.render import draw


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.n = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.n(x + torch.relu(self.a(x)) * 2)


def test_a_drawn_node_is_one_object_for_the_cycle_collector():
    gm = fxviz.trace(nn.Sequential(*[Block() for _ in range(300)]))
    gc.collect()
    before = len(gc.get_objects())
    drawing = draw(gm)
    gc.collect()
    made = len(gc.get_objects()) - before
    assert len(drawing.nodes) > 1500
    # a node and its edges: 2 objects a node and a few per graph (a partial or a closure
    # a node for its deferred fields would be 3 more)
    assert made <= 2.2 * len(drawing.nodes) + 200, made
    names = [n.title for n in drawing.nodes[:5]]  # labels are still made when read
    assert names[:2] == ["input", "Linear(4→4)"], names
