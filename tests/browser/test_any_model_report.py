"""A capture's report in Chromium: graph frames and break markers are drawn and readable,
and the replay steps across a graph break."""

from __future__ import annotations

import pytest
import torch

import fxviz
from tests.any_model.models import Detector

pytestmark = pytest.mark.browser

CURRENT = "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent"


def test_report_of_a_capture_shows_frames_and_breaks(browser, tmp_path):
    torch.manual_seed(1)
    rec = fxviz.record(Detector(), torch.randn(6, 8))
    names = list(rec)
    path = tmp_path / "detector.html"
    fxviz.report(rec, path)
    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        page.locator(".fxviz-graph g.node").first.wait_for()
        header = page.locator("header")
        assert "captured by: dynamo" in header.inner_text()
        line = header.locator("p", has_text="break python0: Dynamic shape operator")
        assert line.is_visible()
        assert "models.py:45: keep = torch.nonzero(scores > 0).flatten()" in line.inner_text()
        assert line.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= 11

        marker = page.locator(".fxviz-graph g.node").filter(
            has=page.locator("title:text-is('python0')")
        )
        box = marker.bounding_box()
        assert box is not None
        assert box["width"] > 20
        assert box["height"] > 10
        reason = marker.locator("text", has_text="Dynamic shape operator")
        text_box = reason.bounding_box()
        assert text_box is not None
        assert box["x"] <= text_box["x"]
        assert text_box["x"] + text_box["width"] <= box["x"] + box["width"] + 1
        assert text_box["y"] + text_box["height"] <= box["y"] + box["height"] + 1
        assert reason.evaluate("e => getComputedStyle(e).visibility") == "visible"

        frame = page.locator(".fxviz-graph g.cluster").filter(has_text="graph 0 (dynamo)")
        frame_box = frame.first.bounding_box()
        assert frame_box is not None
        assert frame_box["width"] > 20

        # the replay steps from the break marker into the next graph
        at_break = names.index("python0")
        slot = page.evaluate(  # the scrubber's positions skip parameter fetches
            "at => JSON.parse(document.getElementById('fxviz-data').textContent)"
            ".replay.positions.indexOf(at)",
            at_break,
        )
        assert slot >= 0
        page.locator(".fxviz-timeline").fill(str(slot))
        page.wait_for_function(f"{CURRENT} === 'python0'")
        page.locator("button[data-action=step]").click()
        page.wait_for_function(f"{CURRENT} === {names[at_break + 1]!r}")
        assert names[at_break + 1].startswith("g1_")
    finally:
        page.close()
