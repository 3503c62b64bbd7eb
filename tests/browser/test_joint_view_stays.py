"""Clicking a node of one pass of a joint graph highlights its partner in the other pass
without taking the view away from the node the person chose."""

from __future__ import annotations

import pytest

from tests.browser.conftest import open_and_run, screenshot, write_notebook

pytestmark = pytest.mark.browser

_MODEL = (
    "import torch, fxviz\nfrom torch import nn\ntorch.manual_seed(0)\n"
    "layers = [m for _ in range(10) for m in (nn.Linear(8, 8), nn.ReLU())]\n"
    "model = nn.Sequential(*layers)\n"
    "x = torch.randn(2, 8)\n"
    "joint = fxviz.trace(model, x, method='joint')"
)


def test_selecting_a_backward_node_keeps_it_in_view(browser, lab):
    write_notebook(lab["root"], "joint_view.ipynb", [_MODEL, "fxviz.show(joint.record(x))"])
    page = open_and_run(browser, lab, "joint_view.ipynb")
    page.locator(".fxviz-graph g.node").first.wait_for()
    search = page.locator(".fxviz-search")
    search.fill("threshold_backward")
    page.wait_for_function(
        "/^\\d+ matches$/.test(document.querySelector('.fxviz-match-count')?.textContent)"
    )
    search.press("Enter")  # selects the first match and zooms to it, readable
    page.wait_for_function(
        "document.querySelectorAll('.fxviz-graph g.fxviz-linked').length > 0"
        " && document.querySelector('.fxviz-graph g.fxviz-selected') !== null"
    )
    page.wait_for_timeout(400)  # the states' frame has run: the view would have moved by now
    selected = page.locator(".fxviz-graph g.fxviz-selected").first
    linked = page.locator(".fxviz-graph g.fxviz-linked").first
    assert "fw_" in (linked.locator("title").text_content() or "")  # the forward partner
    box, graph = selected.bounding_box(), page.locator(".fxviz-graph").bounding_box()
    assert box is not None
    assert graph is not None
    centre_x, centre_y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    assert graph["x"] <= centre_x <= graph["x"] + graph["width"], (box, graph)
    assert graph["y"] <= centre_y <= graph["y"] + graph["height"], (box, graph)
    assert "bw_" in (selected.locator("title").text_content() or "")
    screenshot(page, page.locator(".fxviz").first, "joint_view_stays.png")
    page.close()
