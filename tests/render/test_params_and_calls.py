"""Parameters folded into their users, one group per module call, model-class titles, and
the Debugger/report replay stepping over parameter fetches."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn

import fxviz
from fxviz._nodes import is_bookkeeping
from fxviz._report._html import _data
from tests import hf_models


def _boxes(dot) -> list[str]:
    """Ids of the drawn nodes and module boxes (not the legend, not clusters)."""
    return [
        m.group(1)
        for m in re.finditer(r"^\t+(\w+) \[label=.*$", dot.source, re.M)
        if "fx-legend" not in m.group(0)
    ]


def _frames(source: str) -> dict[str, set[str]]:
    """``{cluster name: ids of the nodes inside it}`` from DOT text (nested ones too)."""
    frames: dict[str, set[str]] = {}
    open_frames: list[str] = []
    for line in source.splitlines():
        opened = re.match(r"\s*subgraph (\w+) \{", line)
        if opened:
            open_frames.append(opened.group(1))
            frames[opened.group(1)] = set()
        elif line.strip() == "}" and open_frames:
            open_frames.pop()
        else:
            node = re.match(r"\s+(\w+) \[", line)
            if node:
                for frame in open_frames:
                    frames[frame].add(node.group(1))
    return frames


@pytest.fixture(scope="module")
def encoder_program():
    layer = nn.TransformerEncoderLayer(32, 2, 64, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 32)
    return torch.export.export(encoder, (x,)), x


def test_exported_encoder_draws_at_depth_1_with_parameters_folded(encoder_program):
    program, _ = encoder_program
    gm = program.module()
    shown = _boxes(fxviz.to_dot(gm, depth=1, params="show"))
    folded = _boxes(fxviz.to_dot(gm, depth=1))
    assert len(shown) > 30  # one box per weight and bias
    assert len(folded) <= 20
    fetches = [n.name for n in gm.graph.nodes if n.op == "get_attr"]
    assert fetches
    assert not set(fetches) & set(folded)


def test_folded_parameters_show_in_their_users_label_and_tooltip():
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 8)
    gm = fxviz.trace(model, x, method="export")
    draw = fxviz.render._api.draw(gm)
    linear = next(n for n in draw.nodes if n.name == "linear")
    assert linear.folded == (("0.weight", "4×8 f32"), ("0.bias", "4 f32"))
    assert "+ weight 4×8 · bias 4" in linear.lines
    assert "0.weight: 4×8 f32" in linear.tooltip
    source = fxviz.to_dot(gm).source
    assert "weight 4×8" in source
    assert not any(e.src.endswith("weight") for e in draw.edges)
    # lifted parameters of the ExportedProgram itself fold the same way
    program = torch.export.export(model, (x,))
    lifted = fxviz.render._api.draw(program)
    assert {n.kind for n in lifted.nodes} == {"placeholder", "call_function", "output"}
    assert any("0.weight: 4×8" in n.tooltip for n in lifted.nodes)


def test_a_fetch_returned_by_the_graph_stays_drawn():
    class ReturnsWeight(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x), self.lin.weight

    gm = fxviz.trace(ReturnsWeight(), torch.ones(1, 2), method="export")
    names = [n.name for n in fxviz.render._api.draw(gm).nodes]
    assert "lin_weight" in names
    assert "lin_bias" not in names


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_hf_export_graphs_at_depth_1_are_not_parameter_walls(name):
    program, _ = hf_models.exported(name)
    gm = program.module()
    shown = _boxes(fxviz.to_dot(gm, depth=1, params="show"))
    folded = _boxes(fxviz.to_dot(gm, depth=1))
    fetches = {n.name for n in gm.graph.nodes if n.op == "get_attr"}
    assert len(fetches & set(shown)) > 10
    assert not fetches & set(folded)
    assert len(folded) <= 30


class SharedPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.blk = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        x = self.pool(self.c1(x))
        x = self.pool(self.c2(x))
        x = x.mean((2, 3))
        return self.blk(self.blk(x))


@pytest.mark.parametrize("method", ["symbolic", "export"])
def test_each_call_of_a_reused_module_is_its_own_group(method):
    x = torch.ones(1, 3, 8, 8)
    gm = fxviz.trace(SharedPool(), x, method=method)
    draw = fxviz.render._api.draw(gm)
    modules = {n.name: n.module for n in draw.nodes if n.module}
    pools = [m for m in modules.values() if m.split("@")[0] == "pool"]
    assert pools == ["pool", "pool@2"]
    assert sorted({m for m in modules.values() if m.startswith("blk")}) == [
        "blk.0",
        "blk.1",
        "blk@2.0",
        "blk@2.1",
    ]
    source = fxviz.to_dot(gm).source
    # the second call of blk is a frame of its own holding only its own two nodes
    frames = re.findall(r"subgraph (cluster_m_blk\w*) \{", source)
    assert len(frames) >= 2
    assert "blk (call 2) · Sequential" in source
    # no frame around both pool calls
    first_pool, second_pool = [n.name for n in draw.nodes if n.module.startswith("pool")]
    for frame, body in _frames(source).items():
        assert not (first_pool in body and second_pool in body), frame
    # collapsing by the module's own path collapses every call of it
    collapsed = fxviz.to_dot(gm, collapse=["blk"]).source
    assert "module__blk__call2" in collapsed
    assert "module__blk " in collapsed or "module__blk [" in collapsed


def test_titles_name_the_model_class_and_capture_method(encoder_program):
    program, x = encoder_program
    assert fxviz.render._api.draw(program).name == "TransformerEncoder (torch.export)"
    rec = fxviz.record(program, x)
    page = fxviz.report(rec)
    assert "<title>fxviz: TransformerEncoder (torch.export)</title>" in page
    assert "GraphModule" not in page.split("<body")[0]
    view = fxviz.show(rec)
    assert view._draw.name == "TransformerEncoder (torch.export)"
    sym = fxviz.record(SharedPool(), torch.ones(1, 3, 8, 8))
    assert fxviz.render._api.draw(sym).name == "SharedPool (symbolic_trace)"


def test_debugger_steps_over_parameter_fetches(encoder_program):
    program, x = encoder_program
    dbg = fxviz.Debugger(program, x)
    fetches = [n.name for n in dbg.graph.nodes if n.op == "get_attr"]
    first_op = next(  # torch.export's guard check is bookkeeping, stepped over too
        n
        for n in dbg.graph.nodes
        if n.op not in ("get_attr", "placeholder") and not is_bookkeeping(n)
    )
    nodes = list(dbg.graph.nodes)
    assert nodes[0].name in fetches  # an export graph starts with its fetches and input...
    assert dbg.current.name == first_op.name  # ...which the debugger has run already
    assert dbg.position == nodes.index(dbg.current)
    assert dbg.status.startswith(f"stopped at {first_op.name!r} (start) — 1/")  # the input
    assert all(dbg.recording[name].shape for name in fetches[:3])  # still recorded
    assert dbg.is_fetch(fetches[0])
    assert not dbg.is_fetch(first_op.name)
    dbg.step(3)
    assert dbg.current.name not in fetches
    ran = [n.name for n in nodes[: dbg.position] if n.name not in fetches]
    before = dbg.current.name
    dbg.back()
    assert dbg.current.name == ran[-1]
    dbg.step()
    assert dbg.current.name == before
    dbg.back(10_000)  # back to the start: past the input and fetches it never stops at
    assert dbg.current.name == first_op.name
    # a breakpoint on a fetch, by name, still stops there
    dbg.break_at(fetches[5])
    dbg.restart()
    assert dbg.current.name == fetches[5]
    dbg.step()  # runs it, then steps over the rest and the input
    assert dbg.current.name == first_op.name
    dbg.back()
    dbg.break_at(fetches[7])
    dbg.restart()
    dbg.remove_breakpoint(f"at {fetches[5]}")
    dbg.step()
    assert dbg.current.name == fetches[7]
    assert dbg.stop_reason == "breakpoint"
    # and the outputs are unchanged
    dbg.continue_()
    dbg.clear_breakpoints()
    while not dbg.done:
        dbg.continue_()
    torch.testing.assert_close(dbg.output, program.module()(x), rtol=0, atol=0)


def test_debugger_can_step_every_node():
    gm = fxviz.trace(nn.Linear(2, 2), torch.ones(1, 2), method="export")
    dbg = fxviz.Debugger(gm, torch.ones(1, 2), skip_fetches=False)
    assert dbg.current.op == "get_attr"
    dbg.step()
    assert dbg.position == 1


def test_report_replay_is_told_which_nodes_to_step_over(encoder_program):
    program, x = encoder_program
    rec = fxviz.record(program, x)
    data = _data(rec, 8)
    nodes = rec.graph_module.graph.nodes
    fetches = [n.name for n in nodes if n.op == "get_attr"]
    over = [n.name for n in nodes if n.op in ("get_attr", "placeholder") or is_bookkeeping(n)]
    assert data["replay"]["skip"] == over  # made in Python, with the replay's states
    # the page's start is where the Debugger starts: past the input and leading fetches
    dbg = fxviz.Debugger(program, x)
    start = data["replay"]["order"].index(dbg.current.name)
    assert dbg.current.op not in ("get_attr", "placeholder")
    assert set(data["replay"]["order"][:start]) <= set(over)
    assert data["replay"]["steps"][start]["status"].format(reason="start") == dbg.status
    assert data["replay"]["start"] == start  # the page opens there, and steps as told
    assert data["replay"]["steps"][start]["moves"]["step"] == (dbg.step(), dbg.position)[1]
    # a Debugger that steps every node gives a replay that does too
    every = fxviz.Debugger(program, x, skip_fetches=False)
    every.continue_()
    assert _data(every, 8)["replay"]["skip"] == []
    page = fxviz.report(rec)
    assert json.dumps(fetches[0]) in page


def test_the_inspector_lists_folded_parameters_with_shapes():
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
    gm = fxviz.trace(model, torch.ones(1, 8), method="export")
    view = fxviz.show(gm)
    view.selected = "linear"
    fields = dict(map(tuple, view.inspector["fields"]))
    assert fields["parameter 0.weight"] == "4×8 f32"
    assert fields["parameter 0.bias"] == "4 f32"
    rec = fxviz.record(gm, torch.ones(1, 8))
    recorded = fxviz.show(rec)
    recorded.selected = "linear"
    fields = dict(map(tuple, recorded.inspector["fields"]))
    assert fields["input _0_weight"] == "float32 4×8"  # the record lists every input


@pytest.mark.dot
def test_folded_export_graphs_lay_out_at_ordinary_widths(encoder_program):
    program, _ = encoder_program
    gm = program.module()

    def width(params):
        svg = fxviz.to_svg(gm, depth=1, params=params)
        return float(re.search(r'<svg width="([\d.]+)pt"', svg).group(1))

    shown, folded = width("show"), width("fold")
    assert shown > 3000  # a wall of parameter boxes side by side
    assert folded < 1000
