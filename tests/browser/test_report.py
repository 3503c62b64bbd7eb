"""The HTML report opens offline in Chromium and replays the recorded run."""

from __future__ import annotations

import json
import re

import pytest
import torch

import fxviz
from fxviz.examples import TwoLayerNet
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


@pytest.fixture
def offline(browser):
    """A page with the network off; every request other than file:// is recorded."""
    requests: list[str] = []
    browser.set_offline(True)
    page = browser.new_page()
    page.on(
        "request",
        lambda r: None if r.url.startswith(("file:", "blob:", "data:")) else requests.append(r.url),
    )
    yield page, requests
    page.close()
    browser.set_offline(False)


def test_replay_report_offline(offline, tmp_path):
    page, requests = offline
    torch.manual_seed(0)
    rec = fxviz.record(TwoLayerNet(), torch.randn(64, 1000))
    path = tmp_path / "run.html"
    fxviz.report(rec, path, title="TwoLayerNet run")
    text = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", text)
    assert "@import" not in text

    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    assert page.locator("header h1").inner_text() == "TwoLayerNet run"
    assert "torch 2." in page.locator("header").inner_text()
    assert "model: TwoLayerNet (symbolic_trace) · 5 nodes" in page.locator("header").inner_text()
    current = "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent"
    page.wait_for_function(f"{current} === 'x'")
    page.locator("button[data-action=step]").click()
    page.locator("button[data-action=step]").click()
    page.wait_for_function(f"{current} === 'clamp'")
    page.locator(".fxviz-graph g.node").filter(has=page.locator("title:text-is('linear1')")).click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    inspector = page.locator(".fxviz-inspector").inner_text()
    assert "float32 64×100" in inspector  # the recorded output
    assert "mean" in inspector
    page.locator("button[data-action=back]").click()
    page.wait_for_function(f"{current} === 'linear1'")
    page.locator(".fxviz-timeline").fill("5")  # the timeline: to the end
    page.wait_for_function(
        "document.querySelector('.fxviz-status')?.textContent.startsWith('finished')"
    )
    assert requests == []
    screenshot(page, page.locator("body"), "report.png")


def test_report_of_a_failed_run_and_hostile_names(offline, tmp_path):
    page, requests = offline
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.relu, (x,))
    node.name = "<img src=x onerror=alert(1)>"
    graph.output(graph.call_method("view", (node, 3, 3)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    dbg = fxviz.Debugger(gm, torch.randn(4))
    dbg.continue_()
    path = tmp_path / "failed.html"
    fxviz.report(dbg, path)
    assert "<img src=x" not in path.read_text()
    alerts: list[str] = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    page.locator("button[data-action=continue]").click()
    # the page shows the Debugger's own status line for the failing node
    page.wait_for_function(
        f"document.querySelector('.fxviz-status')?.textContent.startsWith({json.dumps(dbg.status)})"
    )
    assert page.locator(".fxviz-graph g.fxviz-error").count() == 1
    assert alerts == []
    assert requests == []
