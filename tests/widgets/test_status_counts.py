"""One node count everywhere: parameter fetches never count as steps, the inputs count as
run from the start (status, replay, header)."""

from __future__ import annotations

import re

import torch

import fxviz
from fxviz.render import Drawing
from fxviz.render._payload import replay_payload


def _capture() -> tuple[torch.fx.GraphModule, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.ones(1, 3)
    return fxviz.trace(model, x, method="dynamo"), x  # Dynamo fetches each weight and bias


def test_status_counts_the_models_nodes_and_never_jumps_over_fetches():
    gm, x = _capture()
    fetches = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(fetches) == 4
    drawn = len(Drawing(gm).graph.nodes)
    assert drawn == len(gm.graph.nodes) - 4
    dbg = fxviz.Debugger(gm, x)
    assert dbg.status.endswith(f"— 1/{drawn} nodes"), dbg.status  # the input is given
    counts = []
    while not dbg.done:
        dbg.step()
        counts.append(int(re.search(r"(\d+)/\d+ nodes", dbg.status).group(1)))
    assert counts == list(range(2, drawn + 1))  # one a step: 1 → 2 → 3, never 1 → 4
    assert dbg.status == f"finished — {drawn}/{drawn} nodes"
    replay = replay_payload(fxviz.record(gm, x))
    last = replay["steps"][replay["positions"][-1]]["status"]
    assert last == f"finished — {drawn}/{drawn} nodes"
    first = replay["steps"][replay["positions"][0]]["status"]
    dbg.restart()
    assert first.format(reason="start") == dbg.status  # the scrubber starts where dbg does


def test_report_header_gives_one_node_count():
    gm, x = _capture()
    page = fxviz.report(fxviz.record(gm, x))
    header = page[page.index("<header>") : page.index("</header>")]
    counts = set(re.findall(r"(\d+) nodes", header))
    drawn = len(Drawing(gm).graph.nodes)
    assert counts == {str(drawn)}, header  # the recording's summary no longer says 10
