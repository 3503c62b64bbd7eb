"""Shared fixtures: tiny real models and their inputs, and the hostile graph (node names
that try to break DOT, SVG and HTML)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

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


# Names a user's graph may carry that break naive DOT/SVG/HTML writers.
HOSTILE_NAMES = [
    'say "hi"',
    "{braces}; [brackets]",
    "<script>alert(1)</script>",
    "back\\lslash \\N \\G",
    "new\nline",
    "x" * 300,
    "ünïcödé ✓ 日本",
    "colon:port",
]


def make_hostile_graph(name: str) -> torch.fx.GraphModule:
    """x -> relu (named ``name``) -> neg -> output."""
    graph = torch.fx.Graph()
    node = graph.call_function(torch.relu, (graph.placeholder("x"),))
    node.name = name
    graph.output(graph.call_method("neg", (node,)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.fixture
def hostile_graph() -> torch.fx.GraphModule:
    """The hostile graph with a script tag for a name (see :func:`make_hostile_graph`)."""
    return make_hostile_graph("<script>alert(1)</script>")


# marker -> (is the tool there?, what to install)
_NEEDS = {
    "dot": (lambda: shutil.which("dot") is not None, "Graphviz 'dot' (apt-get install graphviz)"),
    "browser": (
        lambda: Path(shutil.which("chromium") or "/usr/bin/chromium").exists(),
        "/usr/bin/chromium (apt-get install chromium)",
    ),
}


def pytest_collection_modifyitems(config, items):
    """Tests marked ``dot`` or ``browser`` need those tools: skipped (visibly) where one is
    missing, and an error under CI, which installs them. Tests marked ``exhaustive``
    (thousands of generated examples; the default run covers the same checks with fewer)
    run only when selected: ``pytest -m exhaustive`` or ``make test-slow``; so do the
    conformance matrix's cells beyond its fast core (``matrix_full``). Tests marked
    ``slow`` run by default (``-m "not slow"`` leaves them out)."""
    for marker in ("exhaustive", "matrix_full"):
        if marker not in (config.getoption("markexpr", "") or ""):
            skip = pytest.mark.skip(
                reason=f"{marker}: run with pytest -m {marker} (make test-slow)"
            )
            for item in items:
                if marker in item.keywords:
                    item.add_marker(skip)
    for marker, (present, install) in _NEEDS.items():
        if present():
            continue
        if os.environ.get("CI"):
            raise pytest.UsageError(f"CI must install {install} for the @{marker} tests")
        skip = pytest.mark.skip(reason=f"needs {install}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(params=["compiled", "interpreted"])
def recording_engine(request: pytest.FixtureRequest) -> Any:
    """Runs a test once on each engine of ``fxviz.record``: the generated code and the
    recording interpreter (``fxviz._record._engine.ENGINE``, the engine ``record`` uses
    when no ``engine=`` is passed). Tests under ``tests/record`` use it automatically;
    others ask for it with ``pytest.mark.usefixtures("recording_engine")``."""
    from fxviz._record import _engine

    saved = _engine.ENGINE
    _engine.ENGINE = request.param
    yield request.param
    _engine.ENGINE = saved
