"""Reports of graphs with parameter fetches: parameters folded into their users, and the
replay steps over the fetches (leading ones of an exported graph, and mid-graph ones)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz._nodes import is_bookkeeping

pytestmark = pytest.mark.browser

CURRENT = "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent"
STATUS = "document.querySelector('.fxviz-status')?.textContent"


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin1 = nn.Linear(6, 5)
        self.scale = nn.Parameter(torch.full((5,), 2.0))
        self.lin2 = nn.Linear(5, 2)

    def forward(self, x):
        return self.lin2(torch.relu(self.lin1(x)) * self.scale)


ROWS = "[...document.querySelectorAll('.fxviz-table tbody tr td:first-child')]"


def _rows(page) -> list[str]:
    """The names in the table's first column, as shown (rows wait for the page's state)."""
    return page.evaluate(f"{ROWS}.filter((td) => td.offsetParent).map((td) => td.textContent)")


def _open(browser, path):
    page = browser.new_page()
    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    return page


def _drawn(page, name):
    return page.locator(".fxviz-graph g.node").filter(has=page.locator(f"title:text-is('{name}')"))


def test_replay_steps_over_parameter_fetches(browser, tmp_path):
    x = torch.randn(3, 6)
    # an exported graph: every fetch comes first
    rec = fxviz.record(fxviz.trace(Scaled().eval(), x, method="export"), x)
    nodes = list(rec.graph_module.graph.nodes)
    fetches = [n.name for n in nodes if n.op == "get_attr"]
    given = next(n.name for n in nodes if n.op == "placeholder")
    ops = [  # the model's own (torch.export's guard check is bookkeeping: never drawn)
        n.name for n in nodes if n.op not in ("get_attr", "placeholder") and not is_bookkeeping(n)
    ]
    start = ops[0]  # past the fetches and the input
    assert nodes[0].op == "get_attr"
    fxviz.report(rec, tmp_path / "exported.html")
    page = _open(browser, tmp_path / "exported.html")
    try:
        assert "Scaled (torch.export)" in page.locator("header").inner_text()
        drawn = page.locator(".fxviz-graph g.node title").all_inner_texts()
        assert not set(fetches) & set(drawn)  # folded into their users
        label = _drawn(page, "linear").locator("text", has_text="weight 5×6")
        assert label.is_visible()
        page.wait_for_function(f"{CURRENT} === {start!r}")  # the start: past fetches, input
        page.wait_for_function(f"{ROWS}.length === 1")
        assert _rows(page) == [given]  # the table lists what ran of the model: the input
        page.locator("button[data-action=step]").click()
        page.wait_for_function(f"{CURRENT} === {ops[1]!r}")
        page.wait_for_function(f"{ROWS}.length === 2")
        assert _rows(page) == [given, start]  # not the fetches run before it
        page.locator("button[data-action=back]").click()
        page.wait_for_function(f"{CURRENT} === {start!r}")
        assert f"stopped at {start!r}" in page.evaluate(STATUS)
        # the scrubber never spends a position on a fetch or the input: its first is the start
        timeline = page.locator(".fxviz-timeline")
        assert timeline.get_attribute("max") == str(len(ops))  # each op (output too), the end
        timeline.fill("1")
        page.wait_for_function(f"{CURRENT} === {ops[1]!r}")
        timeline.fill("0")
        page.wait_for_function(f"{CURRENT} === {start!r}")
        page.locator("button[data-action=continue]").click()
        page.wait_for_function(f"({STATUS}).startsWith('finished')")
        # the model's own nodes in order, as many as the header counts; no fetch row
        assert _rows(page) == [given, *ops]
        assert f"{len(ops) + 1} nodes" in page.locator("header").inner_text()
    finally:
        page.close()

    # a traced graph fetches the parameter in the middle: one step goes over it
    rec = fxviz.record(Scaled().eval(), x)
    assert [n.op for n in rec.graph_module.graph.nodes][3] == "get_attr"
    fxviz.report(rec, tmp_path / "traced.html")
    page = _open(browser, tmp_path / "traced.html")
    try:
        step = page.locator("button[data-action=step]")
        page.wait_for_function(f"{CURRENT} === 'lin1'")  # the input x is given
        for expected in ("relu", "mul", "lin2"):
            step.click()
            page.wait_for_function(f"{CURRENT} === {expected!r}")
        page.locator("button[data-action=back]").click()
        page.wait_for_function(f"{CURRENT} === 'mul'")
        page.locator("button[data-action=back]").click()
        page.wait_for_function(f"{CURRENT} === 'relu'")  # back over the fetch too
    finally:
        page.close()
