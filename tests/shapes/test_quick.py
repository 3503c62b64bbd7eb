"""The shapes a drawing gets before anything runs: a meta pass, a fake one where the meta
device cannot run an op, none where neither can."""

from __future__ import annotations

import torch
from torch import nn

import fxviz
from fxviz._shapes._quick import drawn_shapes
from fxviz.examples import TwoLayerNet


def cpu_zeros_like(x: torch.Tensor) -> torch.Tensor:
    """Makes a CPU tensor inside one node: a meta pass gets a real tensor out of it (and
    stops), a fake pass a fake one (FakeTensorMode fakes what is made inside)."""
    return torch.zeros(x.shape, device="cpu")


torch.fx.wrap("cpu_zeros_like")


class Net(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (cpu_zeros_like(x) + x).relu()


def test_a_meta_pass_gives_the_shapes_of_a_fake_one():
    gm = fxviz.trace(TwoLayerNet())
    x = torch.randn(4, 1000)
    report = drawn_shapes(gm, (x,))
    fake = fxviz.shapes(gm, x, mode="fake")
    assert report.mode == "meta"
    assert [(n, r.shape, r.dtype) for n, r in report.items()] == [
        (n, r.shape, r.dtype) for n, r in fake.items()
    ]


def test_an_op_the_meta_device_cannot_run_falls_back_to_a_fake_pass():
    gm = fxviz.trace(Net())
    report = drawn_shapes(gm, (torch.randn(2, 3),))
    assert report.mode == "fake"
    assert report["relu"].shape == (2, 3)


def test_a_graph_no_pass_gets_through_is_drawn_without_shapes():
    gm = fxviz.trace(lambda x: torch.nonzero(x).float().sum())  # its shape needs the data
    assert drawn_shapes(gm, (torch.tensor([0.0, 1.0]),)) is gm


def test_the_debugger_widget_labels_nodes_before_they_run():
    app = fxviz.debug(TwoLayerNet(), torch.randn(4, 1000))
    assert app.debugger.position == 0
    assert "4×10 f32" in app.dot  # linear2, which has not run
    app.selected = "linear2"
    assert dict(app.inspector["fields"])["expected output"] == "4×10 f32"
    app.handle({"type": "continue"})
    assert "expected output" not in dict(app.inspector["fields"])
