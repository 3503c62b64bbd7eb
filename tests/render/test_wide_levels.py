"""Opening a big graph walks modules, not nodes: the opening depth and the parameter
counts give what the per-node definitions give, on real and on generated graphs, and a
grouped graph's first and opened views are those of folding every node."""

from __future__ import annotations

import collections
import random

import pytest
import torch
from torch import nn

import fxviz
from fxviz.render import Drawing
from fxviz.render._collapse import group_wide, opening_depth, unit_path
from fxviz.render._model import DrawGraph, DrawNode
from fxviz.render._shown import ModuleTree


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.n = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.n(x + torch.relu(self.a(x)) * 2)


class Wide(nn.Module):
    """400 blocks side by side (a level over 300 wide), loose nodes between them, and a
    shared block called twice (``shared``, ``shared@2``)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(400))
        self.shared = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.shared(x)
        for i, block in enumerate(self.blocks):
            x = block(x) if i % 3 else torch.tanh(block(x)) - 1
        return self.shared(x)


def _opening_depth_each_node(draw: DrawGraph, limit: int = 300) -> int | None:
    if len(draw.nodes) <= limit:
        return None
    for depth in (4, 3, 2):
        units = {unit_path(n.module, depth, frozenset()) for n in draw.nodes}
        loose = sum(unit_path(n.module, depth, frozenset()) is None for n in draw.nodes)
        if len(units - {None}) + loose <= limit:
            return depth
    return 1


def _generated(seed: int) -> DrawGraph:
    """Nodes in random modules of random widths (some 800 wide), some loose, some names
    repeated (as a joint graph's two passes repeat them)."""
    rng = random.Random(seed)
    modules, nodes = [""], []
    for i in range(rng.choice([50, 400, 3000])):
        if rng.random() < 0.5:
            module = rng.choice(modules)
        else:
            parent = rng.choice(modules)
            module = f"{parent}.{rng.randrange(rng.choice([3, 50, 800]))}".lstrip(".")
            modules.append(module)
        name = f"n{i}" if rng.random() > 0.01 else "n0"
        nodes.append(DrawNode(name, name, "call_function", "f", module=module))
    return DrawGraph("g", nodes, [], {m: "M" for m in modules if m}, {m: 1 for m in modules if m})


@pytest.mark.parametrize("seed", range(40))
def test_the_opening_depth_counted_per_module_is_the_per_node_one(seed):
    draw = _generated(seed)
    for limit, groups in ((300, 100), (20, 7)):
        grouped = group_wide(draw, limit, groups)
        for graph in (draw, grouped):
            assert opening_depth(graph, limit) == _opening_depth_each_node(graph, limit)
            tree = ModuleTree(graph)  # the widget reads it off its module tree
            assert tree.opening_depth(limit) == _opening_depth_each_node(graph, limit)


def test_a_wide_real_graph_opens_as_the_per_node_definitions_say():
    gm = fxviz.trace(Wide())
    drawing = Drawing(gm, group=True)
    plain = Drawing(gm).graph
    assert len({n.module.split(".")[0] for n in drawing.graph.nodes}) < 300  # grouped
    assert any("@2" in n.module for n in drawing.graph.nodes)  # the second call kept apart
    assert drawing.opening_depth == _opening_depth_each_node(drawing.graph)
    expected = collections.Counter()
    for qualified, p in gm.named_parameters():
        parts = qualified.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            expected[".".join(parts[:i])] += p.numel()
    assert {k: v for k, v in plain.params.items() if "@" not in k} == dict(expected)
    # the first, collapsed view and an opened one: the module tree's DOT and units are
    # those of folding every node
    first = drawing.shown_view(depth=drawing.opening_depth, legend=False)
    group = next(iter(first.boxes.values()))
    for state in ({"depth": drawing.opening_depth}, {"depth": 1, "expand": [group]}):
        whole = drawing.view(legend=False, **state)
        shown = drawing.shown_view(legend=False, **state)
        assert shown.dot == whole.dot
        units = drawing.tree.units(state["depth"], frozenset(state.get("expand", ())), frozenset())
        assert units == whole.units


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_grouping_in_place_moves_the_nodes_a_grouped_copy_holds(seed):
    for limit, groups in ((300, 100), (20, 7)):
        copied = group_wide(_generated(seed), limit, groups)
        draw = _generated(seed)
        moved = group_wide(draw, limit, groups, in_place=True)
        assert moved is draw
        assert [n.module for n in moved.nodes] == [n.module for n in copied.nodes]
        assert (moved.modules, moved.params) == (copied.modules, copied.params)


def test_a_drawing_of_a_drawing_model_leaves_the_callers_model_as_it_was():
    nodes = [DrawNode(f"n{i}", f"n{i}", "call_function", "f", module=f"m{i}") for i in range(900)]
    draw = DrawGraph("g", nodes, [], {f"m{i}": "M" for i in range(900)})  # 900 side by side
    before = [n.module for n in draw.nodes], dict(draw.modules)
    drawing = Drawing(draw, group=True)
    assert [n.module for n in drawing.graph.nodes] != before[0]  # grouped
    assert ([n.module for n in draw.nodes], draw.modules) == before
