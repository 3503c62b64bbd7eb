"""The offline report's table: the model's own nodes in run order, as many as the header
and the status count, never a row for a parameter fetch folded into its user."""

from __future__ import annotations

import torch
from torch import nn

import fxviz
from fxviz._nodes import is_bookkeeping
from fxviz._report._html import _data


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 5)
        self.scale = nn.Parameter(torch.full((5,), 2.0))

    def forward(self, x):
        return torch.relu(self.lin(x)) * self.scale


def test_rows_are_the_drawn_nodes_in_order_and_grow_with_the_replay():
    x = torch.randn(3, 6)
    rec = fxviz.record(fxviz.trace(Scaled().eval(), x, method="export"), x)
    nodes = list(rec.graph_module.graph.nodes)
    fetches = {n.name for n in nodes if n.op == "get_attr" or is_bookkeeping(n)}
    assert fetches, "the exported graph fetches its parameters first"
    data = _data(rec, 8)
    names = [row["name"] for row in data["rows"]]
    assert names == [n.name for n in nodes if n.name not in fetches]  # in order, no fetch
    assert len(names) == len(data["inspectors"])  # the header's count
    replay = data["replay"]
    start, end = replay["steps"][replay["start"]], replay["steps"][-1]
    assert start["rows"] == 1  # only the input has run at the start...
    assert end["rows"] == len(names)  # ...and every row at the end
    assert f"{len(names)}/{len(names)} nodes" in end["status"]
    counts = [step["rows"] for step in replay["steps"]]
    assert counts == sorted(counts)  # one more row per node of the model run, never fewer
