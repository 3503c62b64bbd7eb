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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``dot`` need the Graphviz binary: skipped (visibly) where it is
    missing, and an error under CI, which installs it."""
    import os
    import shutil

    if shutil.which("dot") is not None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(
            "CI must install Graphviz (apt-get install graphviz) for @dot tests"
        )
    skip = pytest.mark.skip(reason="needs the Graphviz 'dot' binary (apt-get install graphviz)")
    for item in items:
        if "dot" in item.keywords:
            item.add_marker(skip)
