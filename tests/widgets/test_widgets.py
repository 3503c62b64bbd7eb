"""Widgets at the Python level: traits and message handlers on real models (the browser
side is tested in tests/browser)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.examples import TwoLayerNet


@pytest.fixture
def app():
    return fxviz.debug(TwoLayerNet(), torch.randn(4, 1000))


def test_graph_view_traits_and_unknown_kwargs():
    view = fxviz.GraphView(fxviz.trace(TwoLayerNet()))
    assert view.dot.startswith("digraph")
    assert view.units["linear1"] == "linear1"
    assert [r["name"] for r in view.rows] == ["x", "linear1", "clamp", "linear2", "output"]
    assert view.depth is None
    with pytest.raises(TypeError, match="unexpected keyword arguments: colour"):
        fxviz.GraphView(fxviz.trace(TwoLayerNet()), colour="red")


def test_selecting_a_node_fills_the_inspector():
    rec = fxviz.record(TwoLayerNet(), torch.randn(4, 1000))
    view = fxviz.show(rec)
    view.selected = "clamp"
    fields = dict(view.inspector["fields"])
    assert fields["output"] == "float32 4×100 on cpu"
    assert fields["input linear1"] == "float32 4×100"
    assert sum(view.inspector["histogram"]["counts"]) == 400
    assert view.inspector["preview"].startswith("[")


def test_stepping_through_messages_moves_the_states(app):
    assert app.node_states["x"] == ["done"]  # the input is given: the start is past it
    assert app.node_states["linear1"] == ["current"]
    assert app.status.startswith("stopped at 'linear1' (start) — 1/5 nodes")
    app.handle({"type": "step"})
    assert app.node_states["linear1"] == ["done"]
    assert app.node_states["clamp"] == ["current"]
    assert app.status.startswith("stopped at 'clamp' (step) — 2/5 nodes")
    app.handle({"type": "step10"})
    assert app.debugger.done
    app.handle({"type": "back"})
    assert app.node_states["output"] == ["current"]
    app.handle({"type": "continue"})
    app.handle({"type": "continue"})  # past the end: said in the widget, not raised
    assert "already finished" in app.error


def test_the_inspected_node_is_shown_as_it_is_after_the_run_finishes(app):
    app.handle({"type": "step"})  # the inspector follows the cursor: clamp, not run yet
    assert app.inspector["name"] == "clamp"
    assert ["state", "not run yet"] in app.inspector["fields"]
    app.handle({"type": "continue"})  # no cursor any more: clamp again, as it ran
    assert app.status.startswith("finished")
    assert app.inspector["name"] == "clamp"
    assert dict(app.inspector["fields"])["output"] == "float32 4×100 on cpu"
    assert ["state", "not run yet"] not in app.inspector["fields"]


def test_breakpoints_run_to_and_nan_from_the_toolbar():
    def f(x):
        y = x * 2
        z = torch.log(y)
        return z + 1

    app = fxviz.debug(f, torch.tensor([1.0, -1.0]))
    app.handle({"type": "run_to_selected"})
    assert "select a node first" in app.error
    app.selected = "add"
    app.handle({"type": "toggle_breakpoint"})
    assert "breakpoint" in app.node_states["add"]
    app.handle({"type": "toggle_breakpoint"})
    assert "breakpoint" not in app.node_states["add"]
    app.handle({"type": "break_nan"})
    app.handle({"type": "continue"})
    assert app.debugger.stop_reason == "has_nonfinite"
    assert "nonfinite" in app.node_states["log"]
    app.handle({"type": "restart"})
    app.selected = "add"
    app.handle({"type": "run_to_selected"})
    assert app.debugger.current.name == "add"


def test_errors_show_in_the_inspector(app):
    bad = fxviz.debug(TwoLayerNet(), torch.randn(2, 999))
    bad.handle({"type": "continue"})
    assert bad.node_states["linear1"] == ["error"]
    bad.selected = "linear1"
    assert bad.inspector["error"].startswith("RuntimeError: mat1 and mat2")


def test_big_graphs_open_collapsed_and_modules_toggle():
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU()) for _ in range(100)]
    )
    view = fxviz.show(fxviz.trace(model))
    assert view.depth == 1
    assert view.units["_0_0"] == "module__0"
    view.handle({"type": "toggle_module", "unit": "module__3"})
    assert view.expanded == ["3"]
    assert view.units["_3_0"] == "_3_0"
    assert "\tmodule__3 [" not in view.dot
    view.handle({"type": "collapse_cluster", "cluster": "cluster_m_3"})
    assert view.units["_3_0"] == "module__3"
    view.handle({"type": "layout_failed", "message": "layout took longer than 30 s"})
    assert view.error.endswith("even with every module collapsed")
    full = fxviz.show(fxviz.trace(model), depth=None)
    full.depth = None
    full.handle({"type": "layout_failed", "message": "layout took longer than 30 s"})
    assert full.depth == 1
    assert "showing a collapsed view instead" in full.error


def test_peeking_at_a_module_gives_the_dot_its_toggle_shows_and_changes_nothing():
    """The page asks, while the pointer rests on a box, what opening it would show: the
    kernel answers with that DOT alone, and a click then shows exactly it."""
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU()) for _ in range(100)]
    )
    view = fxviz.show(fxviz.trace(model))
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # what reaches the page
    before = (view.dot, list(view.expanded), list(view.collapsed), dict(view.units))
    view.handle({"type": "peek_module", "unit": "module__3", "id": 7})
    assert (view.dot, view.expanded, view.collapsed, view.units) == before  # nothing changed
    (reply,) = sent
    assert (reply["type"], reply["id"], reply["unit"]) == ("peeked", 7, "module__3")
    assert reply["dot"] != view.dot
    assert "\tmodule__3 [" not in reply["dot"]  # the box is open in it
    view.handle({"type": "toggle_module", "unit": "module__3"})
    assert view.dot == reply["dot"]  # the click's echo is the DOT peeked: no new layout
    view.handle({"type": "collapse_cluster", "cluster": "cluster_m_3"})  # closed again
    view.handle({"type": "peek_module", "unit": "module__3", "id": 8})
    view.handle({"type": "toggle_module", "unit": "module__3"})
    (peeked,) = [m for m in sent if m.get("id") == 8]
    assert view.dot == peeked["dot"]  # a module closed before opens the same way
    view.handle({"type": "peek_module", "unit": "no_such_box", "id": 9})
    assert sent[-1] == {"type": "peeked", "id": 9, "unit": "no_such_box", "dot": None}


def test_a_view_change_that_leaves_the_dot_as_it_was_makes_the_pages_peeks_stale():
    """A module opened inside a closed one changes nothing drawn, but what opening the
    closed one shows: the page must not keep what it peeked at before."""
    model = nn.Sequential(
        *[
            nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 4))
            for _ in range(30)
        ]
    )
    view = fxviz.show(fxviz.trace(model), depth=1)
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # what reaches the page
    view.handle({"type": "peek_module", "unit": "module__3", "id": 1})
    shown = view.dot
    view.expanded = ["3.0"]  # inside module 3, which stays closed
    assert view.dot == shown
    assert sent[-1] == {"type": "peeks_stale"}
    view.handle({"type": "peek_module", "unit": "module__3", "id": 2})
    assert sent[-1]["dot"] != sent[0]["dot"]  # the peek kept before would be wrong now
    view.handle({"type": "toggle_module", "unit": "module__3"})
    assert view.dot == sent[-1]["dot"]


def test_show_picks_the_view():
    gm = fxviz.trace(TwoLayerNet())
    dbg = fxviz.Debugger(gm, torch.randn(2, 1000))
    assert isinstance(fxviz.show(dbg), fxviz.DebuggerApp)
    d = fxviz.diff(gm, gm)
    assert "diff-same" in fxviz.show(d).dot
    assert isinstance(fxviz.show(fxviz.shapes(gm, torch.randn(2, 1000))), fxviz.GraphView)


def _chain(n: int) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    for i in range(n):
        x = graph.call_function(torch.relu if i % 2 else torch.neg, (x,))
    graph.output(x)
    return torch.fx.GraphModule(nn.Module(), graph)


def test_a_flat_20000_node_chain_opens_in_groups_that_expand():
    view = fxviz.show(_chain(20_000))
    boxes = set(view.units.values())
    assert 50 <= len(boxes) <= 120  # Graphviz overflowed its stack on the 20k-node DOT
    assert view.dot.count("fx-module") == len(boxes)
    first = view.units["neg"]
    view.handle({"type": "toggle_module", "unit": first})
    drawn = [name for name, unit in view.units.items() if unit == name]
    assert "neg" in drawn
    assert 100 <= len(drawn) <= 400
    assert view.index == []  # megabytes: sent when search is first used, not at opening
    view.handle({"type": "index"})  # what the page sends then
    assert ["neg_1", "torch.neg", view._draw.nodes[2].module] in view.index  # search sees all
    assert len(view.index) == 20_002


def test_search_index_and_the_nan_culprit_in_the_inspector():
    def f(x):
        return torch.log(x * 2).mean()

    app = fxviz.debug(f, torch.tensor([1.0, -1.0]))
    app.handle({"type": "index"})
    assert [row[0] for row in app.index] == ["x", "mul", "log", "mean", "output"]
    app.handle({"type": "break_nan"})
    app.handle({"type": "continue"})
    assert app.debugger.current.name == "mean"
    assert app.inspector["name"] == "log"  # the node that produced the NaN, not the next one
    app.handle({"type": "step"})
    assert app.inspector["name"] == "output"


def test_the_static_legend_never_merges_with_a_node_named_like_it():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.relu, (x,))
    node.name = "_legend_call_function"
    graph.output(node)
    source = fxviz.to_dot(torch.fx.GraphModule(nn.Module(), graph)).source
    assert source.count("\t_legend_call_function [") == 1
    assert '"fxviz:legend:call_function" [label=function' in source


def _relu_mlp() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), torch.randn(2, 4)


@pytest.mark.parametrize("recorded", [False, True], ids=["graph", "recording"])
def test_selecting_a_joint_node_marks_the_nodes_linked_to_it(recorded):
    model, x = _relu_mlp()
    joint = fxviz.trace(model, x, method="joint")
    view = fxviz.show(joint.record(x) if recorded else joint)
    # a backward op: the forward node it differentiates is marked, nothing else
    assert joint.link("threshold_backward") == "relu"
    view.selected = "threshold_backward"  # what the browser sends for a unique name
    assert view.node_states == {"fw_relu": ["linked"]}
    assert view.inspector["name"] == "threshold_backward"
    # a forward node whose name is also a backward one (a saved tensor): the browser
    # sends the drawing id; every backward node that differentiates it is marked
    view.handle({"type": "unknown"})  # other messages leave the marks alone
    view.selected = "fw_relu"
    expected = sorted(f"bw_{b}" for b, f in joint.links.items() if f == "relu")
    assert "bw_threshold_backward" in expected
    assert "bw_relu" in expected
    assert sorted(view.node_states) == expected
    assert all(v == ["linked"] for v in view.node_states.values())
    assert view.inspector["name"] == "relu"
    view.selected = ""  # nothing selected: no marks left
    assert view.node_states == {}


def test_only_joint_views_mark_linked_nodes():
    view = fxviz.GraphView(fxviz.trace(TwoLayerNet()))
    view.selected = "clamp"
    assert view.node_states == {}


def test_opening_one_module_sends_only_the_units_that_moved():
    view = fxviz.show(_chain(20_000))
    assert (len(view.rows), view.rows_total) == (1000, 20_002)  # the rows the table shows
    sent: list[dict] = []
    # the state updates the page gets (not custom messages, such as peeks_stale)
    view.comm.send = lambda data=None, buffers=None, **_: (  # type: ignore[method-assign]
        sent.append(data["state"]) if "state" in data else None
    )
    opening = view.depth
    view.depth = None  # before the first paint: a new DOT, and still no units
    assert sent
    assert all("units" not in s and "units_delta" not in s for s in sent)
    view.depth = opening
    sent.clear()
    view.handle({"type": "painted"})  # the page shows its first view: the units, whole
    assert sent == [{"units": view.units, "units_delta": {}}]
    view.handle({"type": "painted"})  # once
    assert len(sent) == 1
    base = dict(view.units)
    view.handle({"type": "toggle_module", "unit": view.units["neg"]})
    (state,) = [s for s in sent if "dot" in s]  # one message: the new DOT with what moved
    assert "units" not in state
    moved = state["units_delta"]
    assert 100 <= len(moved) <= 400  # the opened group's nodes, not 20,000
    assert {**base, **moved} == view.units  # what the browser pieces together is the truth
    view.depth = None  # everything moves: the whole map again
    assert sent[-1]["units"] == view.units
    assert sent[-1]["units_delta"] == {}
