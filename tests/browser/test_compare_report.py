"""Two saved runs compared from the CLI: the report opens offline and shows where they part."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.cli import main
from tests.test_compare import TinyGPT

pytestmark = pytest.mark.browser


def _visible_inside(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return (
        locator.is_visible()
        and box is not None
        and box["width"] > 4
        and box["height"] > 4
        and box["x"] >= 0
        and box["x"] + box["width"] <= size["width"]
    )


def test_cli_comparison_report_shows_where_runs_part(offline, tmp_path, capsys):
    page, requests = offline
    torch.manual_seed(0)
    live = fxviz.compare_dtype(TinyGPT().eval(), torch.randint(0, 64, (2, 16)))
    live.a.save(tmp_path / "fp32.fxrec")
    live.b.save(tmp_path / "bf16.fxrec")
    del live  # from here on only the files
    out = tmp_path / "cmp.html"
    code = main(
        ["compare", str(tmp_path / "fp32.fxrec"), str(tmp_path / "bf16.fxrec"), "-o", str(out)]
    )
    assert code == 1  # they diverge
    assert "first at 'blocks_0_ln1'" in capsys.readouterr().out

    page.goto(out.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    assert "fxviz compare" in page.locator("header h1").inner_text()

    section = page.locator("section.fxviz-comparison")
    section.scroll_into_view_if_needed()
    assert section.locator("h2").inner_text() == "Where the runs part"
    assert "first at 'blocks_0_ln1' (SQNR" in section.inner_text()
    first_row = section.locator("tbody tr").first
    assert first_row.locator("td").nth(1).inner_text() == "blocks_0_ln1"
    assert _visible_inside(page, first_row)
    font = first_row.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert font >= 11

    marked = page.locator(".fxviz-graph g.cmp-first")
    assert marked.count() == 1
    marked.scroll_into_view_if_needed()
    assert _visible_inside(page, marked)
    assert "first divergence" in marked.text_content()
    shaded = page.locator(".fxviz-graph g.node.cmp-6, .fxviz-graph g.node.cmp-5")
    assert shaded.count() >= 5  # the nodes below 30 dB are shaded red

    page.locator(".fxviz-graph g.node").filter(
        has=page.locator("title:text-is('blocks_0_ln1')")
    ).click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'blocks_0_ln1'"
    )
    inspector = page.locator(".fxviz-inspector")
    text = inspector.inner_text()
    assert "float32 (a) vs bfloat16 (b)" in text
    assert "a value" in text
    assert "b value" in text
    assert "SQNR" in text
    assert _visible_inside(page, inspector)
    assert requests == []
