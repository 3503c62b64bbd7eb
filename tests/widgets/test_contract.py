"""One contract from Python to the page: what both front ends read, said once in Python."""

from __future__ import annotations

import re
from pathlib import Path

import anywidget
import torch

import fxviz
from fxviz.render._dot import KIND_LABELS
from fxviz.render._payload import TABLE_ROWS, TOOLBAR_ACTIONS, page_contract, replay_payload

ROOT = Path(__file__).resolve().parents[2]


def _nan_model() -> torch.nn.Module:
    class NaN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return torch.relu(torch.log(self.lin(x) - 100.0))

    return NaN()


def test_every_toolbar_action_is_answered_by_the_debugger_app():
    app = fxviz.debug(torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.ones(1, 4))
    assert set(app.actions()) == {action[0] for action in TOOLBAR_ACTIONS}
    assert [a["type"] for a in app.contract["actions"]] == [a[0] for a in TOOLBAR_ACTIONS]
    assert app.contract["limits"]["table_rows"] == TABLE_ROWS


def test_toggles_are_pressed_as_the_debugger_holds_them():
    app = fxviz.debug(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()), torch.ones(1, 4))
    assert app.pressed == []
    app.handle({"type": "break_nan"})
    assert app.pressed == ["break_nan"]
    app.selected = "_1"
    app.handle({"type": "toggle_breakpoint"})
    assert app.pressed == ["break_nan", "toggle_breakpoint"]
    app.selected = "_0"
    assert app.pressed == ["break_nan"]
    app.handle({"type": "break_nan"})
    assert app.pressed == []


def test_the_js_restates_no_kind_label_action_or_limit():
    js = "\n".join(p.read_text() for p in (ROOT / "js").glob("*.js"))
    for label in ("module call", "collapsed module", "next to run", "already ran"):
        assert label in {*KIND_LABELS.values(), *(t for _, t in page_contract()["states"])}
        assert f'"{label}"' not in js, label
    table = (ROOT / "js" / "table.js").read_text() + (ROOT / "js" / "widget.js").read_text()
    assert not re.search(r"\b1000\b", table)  # the table's limit is the contract's
    assert "step one node" not in js
    assert "break on NaN" not in js


def test_the_browser_is_sent_only_traits_it_reads():
    names = (ROOT / "js" / "names.js").read_text()
    read = set(re.findall(r'^\s+\w+: "(\w+)",$', names, re.M))
    base = set(anywidget.AnyWidget().keys)  # ipywidgets' own (layout, tooltip...)
    view = fxviz.GraphView(fxviz.trace(torch.nn.Linear(4, 2)))
    app = fxviz.debug(torch.nn.Linear(4, 2), torch.ones(1, 4))
    synced = {k for k in [*view.keys, *app.keys] if not k.startswith("_")} - base
    assert synced <= read, synced - read
    assert {"depth", "expanded", "collapsed"}.isdisjoint(synced)


def test_the_report_replay_moves_over_parameter_fetches_as_the_debugger_does():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.ones(1, 4)
    gm = torch.export.export(model, (x,)).module()
    dbg = fxviz.Debugger(gm, x)
    replay = replay_payload(fxviz.record(gm, x))
    assert replay["skip"], "the exported graph fetches its parameters"
    position = replay["start"]
    assert position == dbg.position
    for _ in range(len(replay["order"]) + 2):  # every step, past the end too
        dbg.step() if not dbg.done else None
        position = replay["steps"][position]["moves"]["step"]
        assert position == dbg.position
    for _ in range(3):
        dbg.back()
        position = replay["steps"][position]["moves"]["back"]
        assert position == dbg.position
    assert set(replay["positions"]).isdisjoint(
        {replay["order"].index(n) for n in replay["skip"]} - {len(replay["steps"]) - 1}
    )


def test_the_replay_stops_continue_where_the_debugger_does_on_a_nan():
    model, x = _nan_model(), torch.ones(1, 3)
    dbg = fxviz.Debugger(model, x)
    dbg.break_when(fxviz.has_nonfinite)
    dbg.continue_()
    replay = replay_payload(fxviz.record(model, x))
    stops = [p for p, step in enumerate(replay["steps"]) if step["nonfinite"]]
    assert stops
    assert stops[0] == dbg.position
    assert replay["steps"][-1]["stop"] == "end"


def test_the_linked_state_is_in_the_legend_only_where_passes_are_linked():
    """Every state the legend lists can be shown: "the same step in the other pass" only
    for a joint graph (forward and backward), never for a plain recording."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    x = torch.ones(2, 3)
    plain = fxviz.show(fxviz.record(model, x)).contract["states"]
    joint = fxviz.show(fxviz.trace(model, x, method="joint")).contract["states"]
    assert "linked" not in [state for state, _ in plain]
    assert ["linked", "the same step in the other pass"] in joint
    assert [s for s in joint if s[0] != "linked"] == plain
