"""fxviz.to_dot: labels, ids, clusters, collapsing, overlays and escaping, on real graphs."""

from __future__ import annotations

import re
import subprocess

import pytest
import torch
from torch import nn

import fxviz
from fxviz.examples import TwoLayerNet
from tests.conftest import HOSTILE_NAMES, make_hostile_graph


class Block(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class Stack(nn.Module):
    def __init__(self, layers: int = 3, d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(layers))
        self.register_buffer("scale", torch.ones(d))
        self.head = nn.Linear(d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h) * self.scale
        return self.head(h)


def _valid(dot_source: str) -> str:
    """Lay the DOT out with the real ``dot``; return the SVG."""
    done = subprocess.run(
        ["dot", "-Tsvg"], input=dot_source, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _node_ids(source: str) -> set[str]:
    return set(re.findall(r"^\t+([A-Za-z_][A-Za-z0-9_]*) \[", source, re.M))


def test_ids_are_fx_names_and_output_is_deterministic():
    gm = fxviz.trace(TwoLayerNet())
    first = fxviz.to_dot(gm).source
    assert first == fxviz.to_dot(fxviz.trace(TwoLayerNet())).source
    assert {"x", "linear1", "clamp", "linear2", "output"} <= _node_ids(first)
    assert "\tx -> linear1" in first
    assert "Linear(1000→100)" in first
    assert ".clamp()" in first


def test_recorded_shapes_label_nodes_and_edges():
    rec = fxviz.record(TwoLayerNet(), torch.randn(64, 1000))
    source = fxviz.to_dot(rec).source
    assert "64×100 f32" in source
    assert re.search(r"linear1 -> clamp \[label=\"64×100\"\]", source)
    shapes = fxviz.to_dot(fxviz.shapes(TwoLayerNet(), fxviz.spec(8, 1000), mode="meta")).source
    assert "8×10 f32" in shapes


def test_stable_colours_per_target():
    rec = fxviz.record(lambda x: torch.relu(torch.relu(x) + 1), torch.randn(3))
    source = fxviz.to_dot(rec).source
    colours = dict(re.findall(r'^\t(relu(?:_1)?) \[.*?fillcolor="(#[0-9a-f]+)"', source, re.M))
    assert colours["relu"] == colours["relu_1"]


def test_module_clusters_and_collapsing():
    gm = fxviz.trace(Stack())
    full = fxviz.to_dot(gm).source
    assert "cluster_m_layers__0" in full
    assert "layers.0 · Block" in full
    collapsed = fxviz.to_dot(gm, depth=2).source
    ids = _node_ids(collapsed)
    assert "layers_0_norm" not in ids
    assert "module__layers__0" in ids
    assert "module__layers__0 -> module__layers__1" not in collapsed  # mul in between
    assert re.search(r"module__layers__0 -> mul\b", collapsed)
    assert "5 nodes" in collapsed
    opened = fxviz.to_dot(gm, depth=2, expand=["layers.1"]).source
    assert "module__layers__1" not in _node_ids(opened)
    assert "layers_1_norm" in _node_ids(opened)
    with pytest.raises(ValueError, match="depth must be >= 1"):
        fxviz.to_dot(gm, depth=0)


def test_big_groups_are_split_into_parts():
    class Wide(nn.Module):
        def forward(self, x):
            for _ in range(260):
                x = torch.relu(x) + 1
            return x

    source = fxviz.to_dot(fxviz.trace(Wide())).source
    # 520 nodes at the top level, which is not a cluster: nothing to split, all drawn
    assert "_part" not in source
    assert {"relu", *(f"relu_{i}" for i in range(1, 260))} <= _node_ids(source)
    # a module with more than 500 direct nodes is a cluster, split into parts
    traced = torch.fx.symbolic_trace(nn.Sequential(Wide()))
    split = fxviz.to_dot(traced).source
    assert "_part0" in split
    assert "_part1" in split
    assert "(part 1/2)" in split


def test_widely_used_inputs_become_stubs():
    def f(x, mask):
        for _ in range(8):
            x = torch.relu(x) * mask
        return x

    gm = fxviz.trace(f)
    source = fxviz.to_dot(gm).source
    assert "mask__to__mul_7" in source
    assert "\tmask -> " not in source
    none = fxviz.to_dot(gm, stub_fanout=0).source
    assert "\tmask -> mul_7" in none


def test_overlays_in_order_and_builtins():
    rec = fxviz.record(lambda x: torch.log(x) * 2, torch.tensor([1.0, -1.0]))
    source = fxviz.to_dot(rec).source
    assert "⚠ NaN 1" in source
    assert "nonfinite" in source

    def mark_mul(node):
        return (
            fxviz.overlays.Style(fill="#123456", badge="mine", classes=("custom",))
            if node.name == "mul"
            else None
        )

    def later(node):
        return fxviz.overlays.Style(fill="#abcdef") if node.name == "mul" else None

    styled = fxviz.to_dot(rec, overlay=[mark_mul, later]).source
    line = next(line for line in styled.splitlines() if line.startswith("\tmul ["))
    assert 'fillcolor="#abcdef"' in line  # the later rule wins
    assert "mine" in line
    assert "custom" in line
    heat = fxviz.to_dot(
        rec, overlay=[fxviz.overlays.time_heat(rec), fxviz.overlays.bytes_heat(rec)]
    ).source
    assert "heat-time-" in heat
    assert "heat-bytes-" in heat


def test_debugger_states_and_errors():
    dbg = fxviz.Debugger(TwoLayerNet(), torch.randn(2, 1000))
    dbg.break_at("linear2")
    dbg.step()  # linear1: the input is given
    source = fxviz.to_dot(dbg).source
    assert re.search(r"\tclamp \[.*state-current", source)
    assert re.search(r"\tlinear2 \[.*state-pending state-breakpoint", source)
    assert re.search(r"\tx \[.*state-done", source)
    bad = fxviz.Debugger(TwoLayerNet(), torch.randn(2, 999))
    bad.continue_()
    failing = fxviz.to_dot(bad).source
    assert re.search(r"\tlinear1 \[.*state-error", failing)
    assert "✖ RuntimeError" in failing


def test_exported_program_tells_parameters_buffers_and_inputs_apart():
    model = Stack(layers=1)
    program = torch.export.export(model, (torch.randn(2, 4),))
    source = fxviz.to_dot(program, params="show").source
    assert "kind-parameter" in source
    assert "kind-buffer" in source
    assert "kind-placeholder" in source
    assert "layers.0.ff.0.weight" in source
    assert "aten.linear.default" in source
    folded = fxviz.to_dot(program).source  # the default folds them into their users
    assert "kind-parameter" not in folded
    assert "kind-placeholder" in folded
    assert "layers.0.ff.0.weight" in folded  # in the user's tooltip


def test_unknown_objects_are_refused_clearly():
    with pytest.raises(fxviz.RenderError, match="cannot draw an object of type int"):
        fxviz.to_dot(3)


HOSTILE = HOSTILE_NAMES
_hostile_graph = make_hostile_graph  # shared with other tests (tests/conftest.py)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_escaped(name):
    rec = fxviz.record(_hostile_graph(name), torch.randn(2))
    source = fxviz.to_dot(rec).source
    label = next(line for line in source.splitlines() if "torch.relu<BR/>" in line)
    assert "<script>" not in label.split("tooltip=")[0]  # HTML labels are escaped
    tooltip = label.split("tooltip=")[1]
    bare = tooltip.replace("\\n", "").replace('\\"', "")  # line breaks and quoted quotes
    assert "\\" not in bare  # Graphviz would expand \\N even if doubled


@pytest.mark.dot
@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_lay_out_and_stay_escaped_in_svg(name):
    svg = _valid(fxviz.to_dot(fxviz.record(_hostile_graph(name), torch.randn(2))).source)
    assert "<script>" not in svg
    assert "<svg" in svg
    if "\\" in name:
        assert "back⧵lslash ⧵N ⧵G" in svg.replace("&#160;", " ")  # not expanded by Graphviz


@pytest.mark.dot
def test_module_names_from_add_module_are_escaped():
    model = nn.Sequential()
    model.add_module("<img src=x onerror=alert(1)>", nn.Linear(3, 3))
    model.add_module("ok", nn.ReLU())
    gm = fxviz.trace(model)
    svg = _valid(fxviz.to_dot(gm).source) + _valid(fxviz.to_dot(gm, depth=1).source)
    assert "<img" not in svg


@pytest.mark.dot
def test_every_view_of_the_test_graphs_lays_out():
    gm = fxviz.trace(Stack())
    rec = fxviz.record(gm, torch.randn(2, 4))
    for source in (
        fxviz.to_dot(gm).source,
        fxviz.to_dot(rec, depth=1).source,
        fxviz.to_dot(rec, depth=2, expand=["layers.2"], rankdir="LR").source,
        fxviz.to_dot(torch.export.export(Stack(), (torch.randn(2, 4),))).source,
    ):
        assert "<svg" in _valid(source)


@pytest.mark.dot
def test_to_svg_uses_dot():
    svg = fxviz.to_svg(fxviz.trace(TwoLayerNet()))
    assert svg.lstrip().startswith(("<?xml", "<!--", "<svg"))
    assert "<title>linear1</title>" in svg


def test_to_svg_without_dot_says_the_widget_needs_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(fxviz.RenderError, match="need no 'dot' at all"):
        fxviz.to_svg(fxviz.trace(TwoLayerNet()))


class Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu(self.bn1(self.conv1(x)))
        return self.relu(x + self.bn2(self.conv2(h)))


def resnet_like() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 7, stride=2, padding=3),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        *[Residual(8) for _ in range(4)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    ).eval()


@pytest.mark.dot
def test_resnet_style_cnn_draws_with_shapes_and_collapses():
    model = resnet_like()
    rec = fxviz.record(model, torch.randn(2, 3, 32, 32))
    full = fxviz.to_dot(rec).source
    assert "Conv2d(3→8, k=7×7, s=2×2)" in full
    assert "2×8×16×16 f32" in full
    collapsed = fxviz.to_dot(rec, depth=1).source
    assert collapsed.count("class=fx-module") + collapsed.count('class="fx-module') == 4
    for source in (
        full,
        collapsed,
        fxviz.to_dot(torch.export.export(model, (torch.randn(2, 3, 32, 32),))).source,
    ):
        assert "<svg" in _valid(source)
