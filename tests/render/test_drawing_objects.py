"""A drawn node costs what Python's cycle collector has to walk: after a 100,000-node
drawing is made, every collection walks all of its objects, so a node is one object (its
label, tooltip and colour made when first read) and an edge one more."""

from __future__ import annotations

import gc
import threading

import pytest
import torch
from torch import nn

import fxviz
from fxviz.render import draw
from fxviz.render._model import deferred_node


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


def _fields(title: str) -> dict:
    return {"title": title, "lines": [], "color_key": "", "out_label": "", "align": (),
            "folded": (), "tooltip": title}  # fmt: skip


def test_a_node_read_by_two_threads_while_its_fields_are_made_reads_whole():
    # JupyterLab runs the widget's messages in a thread of their own (a kernel subshell)
    # while a cell draws the same nodes: one thread reads a node another is filling
    started, go_on = threading.Event(), threading.Event()

    def fill(of: str) -> dict:
        if not started.is_set():  # the first fill waits, half done, for the other read
            started.set()
            go_on.wait(10)
        return _fields(of.upper())

    node = deferred_node("a", "a", "call_function", "", None, fill, "relu")
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(node.title))
    reader.start()
    assert started.wait(10)
    assert (node.title, node.tooltip) == ("RELU", "RELU")  # meanwhile, in this thread
    go_on.set()
    reader.join()
    assert first == ["RELU"]
    assert node.lines == []


def test_a_node_whose_fields_failed_to_be_made_makes_them_when_read_again():
    calls: list[str] = []

    def fill(of: str) -> dict:
        calls.append(of)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the user stopped the cell mid-draw
        return _fields(of.upper())

    node = deferred_node("a", "a", "call_function", "", None, fill, "relu")
    with pytest.raises(KeyboardInterrupt):
        node.title
    assert (node.title, node.tooltip, calls) == ("RELU", "RELU", ["relu", "relu"])
