"""Shared fixtures: tiny real models and their inputs."""

from __future__ import annotations

import pytest
import torch

from fxviz.examples import TwoLayerNet, two_layer_net_inputs


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def two_layer_net() -> TwoLayerNet:
    return TwoLayerNet(d_in=20, hidden=8, d_out=4).eval()


@pytest.fixture
def x20() -> torch.Tensor:
    return two_layer_net_inputs(batch=5, d_in=20)
