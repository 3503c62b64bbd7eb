"""The shapes a drawing gets before anything runs: a meta pass, a fake one where the meta
device cannot run an op, none where neither can."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz._shapes._propagate import propagate
from fxviz._shapes._quick import drawn_shapes
from fxviz.errors import PlacementError
from fxviz.examples import TwoLayerNet


def cpu_zeros_like(x: torch.Tensor) -> torch.Tensor:
    """Makes a CPU tensor inside one node: a meta pass gets a real tensor out of it (and
    stops), a fake pass a fake one (FakeTensorMode fakes what is made inside)."""
    return torch.zeros(x.shape, device="cpu")


def ones_like_by_default(x: torch.Tensor) -> torch.Tensor:
    """Makes a tensor on the default device inside one node: a meta pass needs the meta
    device to be the default for it (``with torch.device("meta")``)."""
    return torch.ones(x.shape)


torch.fx.wrap("cpu_zeros_like")
torch.fx.wrap("ones_like_by_default")


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


def test_factories_on_the_default_device_run_on_the_meta_device():
    in_graph = fxviz.trace(lambda x: x + torch.arange(x.shape[-1]))  # the graph's own call
    assert drawn_shapes(in_graph, (torch.ones(2, 3),))["add"].shape == (2, 3)
    inside = fxviz.trace(lambda x: ones_like_by_default(x) * x)  # a call inside a node
    with pytest.raises(PlacementError, match="ones_like_by_default"):
        propagate(inside, (torch.ones(2, 3),), "meta", suggest=False, default_meta=False)
    report = drawn_shapes(inside, (torch.ones(2, 3),))
    assert report.mode == "meta"
    assert report["mul"].shape == (2, 3)


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
    assert app.debugger.position == 1  # the input is given
    assert "4×10 f32" in app.dot  # linear2, which has not run
    app.selected = "linear2"
    assert dict(app.inspector["fields"])["expected output"] == "4×10 f32"
    app.handle({"type": "continue"})
    assert "expected output" not in dict(app.inspector["fields"])
