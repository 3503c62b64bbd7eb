"""A capture's report in Chromium: graph frames and break markers are drawn and readable."""

from __future__ import annotations

import pytest
import torch

import fxviz
from tests.any_model.models import Detector

pytestmark = pytest.mark.browser


def test_report_of_a_capture_shows_frames_and_breaks(browser, tmp_path):
    torch.manual_seed(1)
    rec = fxviz.record(Detector(), torch.randn(6, 8))
    path = tmp_path / "detector.html"
    fxviz.report(rec, path)
    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        page.locator(".fxviz-graph g.node").first.wait_for()
        header = page.locator("header").inner_text()
        assert "captured by: dynamo" in header
        assert "Dynamic shape operator" in header
        marker = page.locator(".fxviz-graph g.node").filter(
            has=page.locator("title:text-is('python0')")
        )
        box = marker.bounding_box()
        assert box is not None
        assert box["width"] > 20
        assert box["height"] > 10
        assert "Python" in marker.text_content()
        frame = page.locator(".fxviz-graph g.cluster").filter(has_text="graph 0 (dynamo)")
        assert frame.count() >= 1
        frame_box = frame.first.bounding_box()
        assert frame_box is not None
        assert frame_box["width"] > 20
    finally:
        page.close()
