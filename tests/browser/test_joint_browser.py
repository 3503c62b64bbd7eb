"""A joint graph's two passes in the browser: the live widget marks the nodes linked to a
clicked node, and fxviz.report's page of both passes opens offline."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from tests.browser.conftest import open_and_run, screenshot, write_notebook

pytestmark = pytest.mark.browser

_MODEL = (
    "import torch, fxviz\nfrom torch import nn\ntorch.manual_seed(0)\n"
    "model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))\n"
    "x = torch.randn(2, 4)\n"
    "joint = fxviz.trace(model, x, method='joint')"
)
_PURPLE = "rgb(138, 43, 226)"  # the linked and selected outline (#8a2be2)


def _node(page, title: str):
    return page.locator(".fxviz-graph g.node").filter(has=page.locator(f"title:text-is('{title}')"))


def _outline(page, title: str) -> dict:
    return _node(page, title).evaluate(
        "g => { const s = getComputedStyle(g.querySelector('path, polygon, ellipse'));"
        " return {stroke: s.stroke, fill: s.fill, width: parseFloat(s.strokeWidth)}; }"
    )


def test_clicking_a_backward_node_marks_the_forward_node_it_differentiates(browser, lab):
    write_notebook(lab["root"], "joint.ipynb", [_MODEL, "fxviz.show(joint.record(x))"])
    page = open_and_run(browser, lab, "joint.ipynb")
    _node(page, "bw_threshold_backward").wait_for()
    before = _outline(page, "fw_relu")
    assert before["stroke"] != _PURPLE
    forward = page.locator(".fxviz-graph g.cluster").filter(has_text="forward (").bounding_box()
    backward = page.locator(".fxviz-graph g.cluster").filter(has_text="backward (").bounding_box()
    assert forward["x"] < backward["x"]  # forward first: on the left

    search = page.locator(".fxviz-search")  # search reaches the backward pass too
    search.fill("threshold_backward")
    page.wait_for_function(
        "document.querySelector('.fxviz-match-count')?.textContent === '1 match'"
    )
    search.press("Enter")  # selects it and brings it into view
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent"
        " === 'threshold_backward'"
    )
    page.wait_for_function(
        "[...document.querySelectorAll('.fxviz-graph g.fxviz-linked title')]"
        ".map(t => t.textContent).join() === 'fw_relu'"
    )
    after = _outline(page, "fw_relu")
    assert after["stroke"] == _PURPLE
    assert after["fill"] == "rgb(239, 227, 255)"
    assert after["width"] >= 3
    assert _outline(page, "fw_addmm")["stroke"] != _PURPLE  # only the linked node
    box = _node(page, "fw_relu").bounding_box()
    graph = page.locator(".fxviz-graph").bounding_box()
    assert box is not None
    assert graph is not None
    assert box["width"] > 10  # drawn, at a size a person can see
    chosen = _node(page, "bw_threshold_backward").bounding_box()  # the view stays on it:
    assert chosen is not None  # the partner is marked, never panned to (issue 24)
    assert graph["x"] <= chosen["x"] + chosen["width"] / 2 <= graph["x"] + graph["width"]

    # from the forward side: every backward node that differentiates relu
    page.locator(".fxviz-fit").first.click()  # the partner is off view: fit brings it back
    _node(page, "fw_relu").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'relu'"
        " && document.querySelectorAll('.fxviz-graph g.fxviz-linked').length > 1"
    )
    assert _outline(page, "bw_threshold_backward")["stroke"] == _PURPLE
    selected = _node(page, "fw_relu").evaluate(
        "g => ({cls: g.getAttribute('class'), filter: getComputedStyle(g).filter})"
    )
    assert "fxviz-selected" in selected["cls"]  # now the selected one: a purple glow
    assert "drop-shadow" in selected["filter"]
    screenshot(page, page.locator(".fxviz").first, "joint_linked.png")
    page.close()


def test_report_of_both_passes_renders_offline(offline, tmp_path):
    page, requests = offline
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = torch.randn(2, 4)
    path = tmp_path / "joint.html"
    fxviz.report(fxviz.trace(model, x, method="joint").record(x), path)

    page.goto(path.as_uri())
    _node(page, "bw_threshold_backward").wait_for()
    for cluster in ("forward", "backward"):
        frame = page.locator(".fxviz-graph g.cluster").filter(has_text=f"{cluster} (")
        assert frame.count() == 1
        box = frame.bounding_box()
        assert box is not None
        assert box["width"] > 50  # both passes drawn, visibly
        assert box["height"] > 50
    page.locator(".fxviz-fit").first.click()  # the report opens readable, on one pass
    _node(page, "fw_relu").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'relu'"
    )
    inspector = page.locator(".fxviz-inspector").inner_text()
    assert "threshold_backward" in inspector  # differentiated by
    assert "mean" in inspector  # the recorded statistics
    links = page.locator("table.fxviz-joint-links")
    assert links.is_visible()
    assert "threshold_backward" in links.inner_text()
    page.locator(".fxviz-search").fill("primals_5")  # one name, a node in each pass
    assert page.locator(".fxviz-match-count").inner_text() == "2 matches"
    matched = page.locator(".fxviz-graph g.fxviz-match title").all_text_contents()
    assert sorted(matched) == ["bw_primals_5", "fw_primals_5"]
    assert requests == []
