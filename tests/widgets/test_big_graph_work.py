"""Opening one module of a big graph costs what that module shows, not the graph's size."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.render._model import DrawNode


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.n = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x)) * 2 + 1
        return self.n(x + torch.tanh(self.b(h)) - 0.5)


class Model(nn.Module):
    """A trunk of ``n`` blocks and a head of one: the head is what is opened."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(*[Block() for _ in range(n)])
        self.head = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts reads of every drawn node's ``module``, ``name`` and ``record``: any pass
    over all the nodes (folding, a units map, a scan for a name, overlays marking a box)
    reads one of them per node."""
    count = {"reads": 0}

    def counted(field: str) -> property:
        def get(self: DrawNode) -> object:
            count["reads"] += 1
            return self.__dict__[field]

        def put(self: DrawNode, value: object) -> None:
            self.__dict__[field] = value

        return property(get, put)

    for field in ("module", "name", "record"):
        monkeypatch.setattr(DrawNode, field, counted(field), raising=False)
    return count


def _open_head(
    n: int, reads: dict[str, int], recorded: bool = False
) -> tuple[int, int, fxviz.GraphView]:
    """(nodes read, tree nodes touched) while the head opens, in a graph of ``n`` blocks
    (``recorded``: of a recording of it, drawn with its overlays: errors, NaN/Inf)."""
    gm = fxviz.trace(Model(n))
    view = fxviz.show(fxviz.record(gm, torch.randn(2, 4)) if recorded else gm, depth=1)
    view.handle({"type": "painted"})  # the units are the browser's from now on
    tree = view._drawing.tree
    reads["reads"], touched = 0, tree.touched
    view.handle({"type": "toggle_module", "unit": "module__head"})
    return reads["reads"], tree.touched - touched, view


def test_opening_a_module_reads_the_same_nodes_whatever_the_graph_size(reads):
    small_reads, small_touched, small = _open_head(20, reads)
    big_reads, big_touched, big = _open_head(400, reads)
    assert len(big._draw.nodes) > 15 * len(small._draw.nodes)  # 3,600 nodes against 200
    assert small.expanded == big.expanded == ["head"]
    assert big.units["head_a"] == "head_a"  # the head's nodes are drawn themselves now
    assert big.units["trunk_0_a"] == "module__trunk"  # the trunk stays one box
    assert "head_a" in big.dot
    assert "trunk_0_a" not in big.dot
    assert big_reads == small_reads  # no node outside the head was looked at
    assert big_touched == small_touched
    assert big_reads <= 60  # the head's 9 nodes, a few times each: not the 3,600


def test_opening_a_module_of_a_recording_reads_no_node_outside_it(reads):
    # a recording's overlays mark each box with what its nodes show (an error, NaN
    # inside): worked out once per module, not over every node of every box at each view
    small_reads, _, small = _open_head(20, reads, recorded=True)
    big_reads, _, big = _open_head(400, reads, recorded=True)
    assert isinstance(big._obj, fxviz.Recording)
    assert len(big._draw.nodes) > 15 * len(small._draw.nodes)
    assert big.units["head_a"] == "head_a"
    assert big_reads == small_reads  # no node outside the head was looked at
    assert big_reads <= 80  # the head's 9 nodes, a few times each: not the 3,600


def test_a_recording_box_holding_a_nan_is_still_marked_after_another_module_opens():
    model = Model(6)
    with torch.no_grad():
        model.trunk[3].b.weight.fill_(float("nan"))  # NaN from trunk.3 on, head included
    view = fxviz.show(fxviz.record(model, torch.randn(2, 4)), depth=2)
    view.expand("head")
    box = next(
        line for line in view.dot.splitlines() if line.lstrip().startswith("module__trunk__4 ")
    )
    assert "nonfinite" in box
    assert 'color="#c00000"' in box
    clean = next(
        line for line in view.dot.splitlines() if line.lstrip().startswith("module__trunk__1 ")
    )
    assert "nonfinite" not in clean
    assert "#c00000" not in clean


def test_units_after_opening_and_closing_agree_with_a_view_drawn_from_scratch():
    gm = fxviz.trace(Model(30))
    view = fxviz.show(gm, depth=1)
    view.handle({"type": "painted"})
    sent: list[dict] = []
    # the state updates the page gets (not custom messages, such as peeks_stale)
    view.comm.send = lambda data=None, buffers=None, **_: (  # type: ignore[method-assign]
        sent.append(data["state"]) if "state" in data else None
    )
    view.expand("trunk")
    view.expand("trunk.3")
    view.collapse("trunk.3")
    view.expand("head")
    fresh = fxviz.show(gm, depth=1)
    fresh.expanded, fresh.collapsed = list(view.expanded), list(view.collapsed)
    assert view.units == fresh.units  # moved in place, module by module: the same map
    assert view.dot == fresh.dot
    browser = dict(view._units_sent)  # what the page pieces together: whole map + delta
    browser.update(sent[-1].get("units_delta", view.units_delta))
    assert browser == view.units


def test_the_module_tree_draws_what_folding_every_node_draws():
    drawing = fxviz.show(fxviz.trace(Model(12)), depth=1)._drawing
    states = [
        {"depth": 1},
        {"depth": 2},
        {"depth": None},
        {"depth": 1, "expand": ["trunk", "trunk.4"]},
        {"depth": 2, "collapse": ["trunk.2", "head.n"]},
        {"depth": None, "collapse": ["trunk"]},
    ]
    for state in states:
        whole = drawing.view(legend=False, **state)
        shown = drawing.shown_view(legend=False, **state)
        assert shown.dot == whole.dot, state
        assert shown.boxes == whole.boxes, state
        units = drawing.tree.units(
            state["depth"],
            frozenset(state.get("expand", ())),
            frozenset(state.get("collapse", ())),
        )
        assert units == whole.units, state


def test_opening_a_module_makes_statements_only_for_what_it_adds(monkeypatch):
    # the other 199 trunk boxes stay as they were: their statements are kept, not made again
    import fxviz.render._dot as dot

    made = {"labels": 0}
    real = dot.html_label

    def counted(*args, **kwargs):
        made["labels"] += 1
        return real(*args, **kwargs)

    view = fxviz.show(fxviz.trace(Model(200)), depth=2)
    assert view.dot.count("fx-module") >= 200  # the trunk's blocks are boxes
    monkeypatch.setattr(dot, "html_label", counted)
    view.expand("trunk.5")
    assert view.expanded == ["trunk.5"]
    assert "trunk_5_a" in view.dot
    assert view.dot.count("fx-module") >= 199  # still drawn, from the kept statements
    assert made["labels"] <= 20  # the opened block's few nodes, not 199 boxes again


def test_a_box_drawn_without_overlays_reads_none_of_its_nodes():
    # a bare graph's drawing has no overlays: nothing can mark its boxes, so opening a
    # 50,000-node graph need not walk every module under its hundred boxes for marks
    gm = fxviz.trace(Model(50))
    view = fxviz.show(gm, depth=1)
    tree = view._drawing.tree
    assert view._drawing.defaults == []  # what the widget draws a GraphModule with
    touched = tree.touched
    assert not tree.marks("trunk", view._drawing.defaults).classes
    assert tree.touched == touched  # none of the trunk's 450 nodes
