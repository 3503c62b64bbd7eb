"""Telemetry calls Dynamo captures are recorded but never drawn, stepped on or counted."""

from __future__ import annotations

import torch

import fxviz
from fxviz.render import Drawing
from fxviz.render._payload import graph_payload, replay_payload

USAGE = "_log_api_usage_once"  # one graph: its nodes keep their own names


class Logged(torch.nn.Module):
    """Calls torch's telemetry hook as many library modules do (Hugging Face included)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._C._log_api_usage_once("fxviz.test")
        return self.proj(x).relu()


def _capture() -> torch.fx.GraphModule:
    gm = fxviz.trace(Logged(), torch.ones(2, 4), method="dynamo")
    assert USAGE in [n.name for n in gm.graph.nodes]  # Dynamo did capture it
    return gm


def test_telemetry_call_is_recorded_but_not_drawn_nor_in_the_legend():
    gm = _capture()
    drawing = Drawing(gm)
    names = [n.name for n in drawing.graph.nodes]
    assert USAGE not in names
    assert "linear" in names
    payload = graph_payload(drawing, drawing.view(), None)
    assert "log_api_usage" not in payload["dot"]  # neither a node nor a legend entry
    recording = fxviz.record(gm, torch.ones(2, 4))
    assert USAGE in [r.name for r in recording.records()]  # still recorded
    replay = replay_payload(recording)
    assert USAGE in replay["skip"]
    assert USAGE in replay["order"]


def test_debugger_steps_over_the_telemetry_call_and_the_title_says_dynamo():
    gm = _capture()
    dbg = fxviz.Debugger(gm, torch.ones(2, 4))
    visited = []
    while not dbg.done:
        visited.append(dbg.current.name)
        dbg.step()
    assert USAGE not in visited
    assert "linear" in visited
    assert USAGE in [r.name for r in dbg.recording.records()]
    title = Drawing(gm).graph.name
    assert title == "Logged (dynamo)", title  # never "(symbolic_trace)" for a Dynamo capture
