"""Draw once, one data contract: the widget and the report read the same payload, the
report's replay is the Debugger's own states, and every view of a graph comes from one
drawing model."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import fxviz
from fxviz._report._html import _data
from fxviz.render import _api
from fxviz.render._collapse import cluster_path
from fxviz.render._payload import PAYLOAD_VERSION, debugger_states, replay_payload


class _Block(nn.Module):
    """A module with more direct children than one DOT cluster holds (500): split frames."""

    def forward(self, x):
        for _ in range(520):
            x = x + 1
        return x


class _Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Block()

    def forward(self, x):
        return self.block(x).relu()


def test_widget_and_report_are_fed_the_same_payload(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    view = fxviz.show(rec)
    data = _data(rec, 64)
    assert data["payload_version"] == PAYLOAD_VERSION
    assert (view.dot, view.units, view.rows) == (data["dot"], data["units"], data["rows"])


def test_a_redraw_reuses_the_drawing_model(monkeypatch, two_layer_net, x20):
    made: list[object] = []
    real_draw = _api.draw
    monkeypatch.setattr(_api, "draw", lambda obj, **kw: made.append(obj) or real_draw(obj, **kw))
    view = fxviz.show(fxviz.record(two_layer_net, x20))
    view.depth = 1
    view.collapsed = ["linear1"]
    assert len(made) == 1  # three views, one drawing model
    _data(fxviz.record(two_layer_net, x20), 8)
    assert len(made) == 2  # the report draws once too (it used to draw twice)


def test_replay_states_are_the_debuggers_at_every_position():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    with torch.no_grad():
        model[0].weight[0, 0] = float("inf")  # a NaN/Inf from the first layer on
    x = torch.ones(2, 3)
    replay = replay_payload(fxviz.record(model, x))
    dbg = fxviz.Debugger(model, x)
    states: dict[str, list[str]] = {}
    assert replay["start"] == dbg.position == 1  # both start past the input
    for position, step in enumerate(replay["steps"]):
        states.update(step["states"])
        if position < replay["start"]:
            continue
        if position > replay["start"]:
            dbg.step()
        assert step["status"].format(reason=dbg.stop_reason) == dbg.status
        assert states == debugger_states(dbg)
        ran = dbg.recording.records()[-1] if position else None
        assert step["nonfinite"] == bool(ran is not None and fxviz.has_nonfinite(ran))
    assert dbg.done
    assert len(replay["steps"]) == len(replay["order"]) + 1
    assert [s["nonfinite"] for s in replay["steps"]][:3] == [False, False, True]


def test_replay_of_a_failed_run_stops_at_the_failing_node():
    try:
        fxviz.record(nn.Sequential(nn.ReLU(), nn.Linear(4, 2)), torch.ones(1, 5))
    except fxviz.NodeError as e:
        replay = replay_payload(e.recording)
    last = replay["steps"][-1]
    assert last["error"]
    assert "RuntimeError" in last["status"]
    assert last["states"]["_1"] == ["error"]
    assert len(replay["steps"]) == len(replay["order"])  # up to, not past, the failure


def test_a_split_cluster_is_turned_back_into_its_module():
    drawing = _api.Drawing(fxviz.trace(_Wide()))  # to_dot's drawing: wide levels not grouped
    parts = set(re.findall(r"cluster_m_block_part\d+", drawing.view(depth=None).dot))
    assert parts == {"cluster_m_block_part0", "cluster_m_block_part1"}
    assert cluster_path(drawing.graph, "cluster_m_block_part1") == "block"


def test_the_widget_groups_a_wide_module_and_double_clicking_its_frame_collapses_it():
    view = fxviz.GraphView(fxviz.trace(_Wide()))  # 520 nodes side by side: ~100 groups
    assert "cluster_m_block_part" not in view.dot
    groups = {view.units[f"add_{i}"] for i in range(1, 520)}
    assert 80 <= len(groups) <= 100
    assert "module__block" not in groups
    view.handle({"type": "collapse_cluster", "cluster": "cluster_m_block"})
    assert view.collapsed == ["block"]
    assert {view.units[f"add_{i}"] for i in range(1, 520)} == {"module__block"}
    view.handle({"type": "toggle_module", "unit": "module__block"})  # and opens again
    assert {view.units[f"add_{i}"] for i in range(1, 520)} == groups


def test_dot_ids_and_units_come_from_one_folding():
    drawing = _api.Drawing(fxviz.trace(_Wide()))
    view = drawing.view(depth=1)
    drawn = set(re.findall(r"^\t+(\w+) \[", view.dot, flags=re.MULTILINE))
    assert set(view.units.values()) <= drawn  # every unit the browser is told of is drawn
    assert view.units["relu"] == "relu"
    assert view.units["add"] == "module__block"


def test_diff_of_complex_outputs_sees_the_imaginary_part():
    before = fxviz.trace(lambda z: z * 2, torch.ones(3, dtype=torch.complex64))
    after = fxviz.trace(lambda z: z * 2 + 1j, torch.ones(3, dtype=torch.complex64))
    z = torch.ones(3, dtype=torch.complex64)
    d = fxviz.diff(before, after, z)
    assert d.first_divergence is not None
    assert max(p.max_abs_error or 0.0 for p in d.pairs) == pytest.approx(1.0)
