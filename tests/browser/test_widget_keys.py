"""Focus and keys as a person uses them: a click anywhere in the widget gives it the
keyboard, its shortcuts land in it and never in the notebook, Esc gives the keyboard back."""

from __future__ import annotations

import pytest

from tests.browser.conftest import open_and_run, shown, write_notebook

pytestmark = pytest.mark.browser

NEXT_CELL = "# the cell after the widget: keys typed in the widget never land here"
FOCUSED = "document.activeElement?.classList.contains('fxviz')"
STATUS = "document.querySelector('.fxviz-status')?.textContent ?? ''"


def _node(page, name: str):
    return page.locator(".fxviz-graph g.node").filter(has=page.locator(f"title:text-is('{name}')"))


def _status_starts(page, text: str) -> None:
    page.wait_for_function(f"({STATUS}).startsWith({text!r})")


def test_keys_reach_the_widget_and_never_the_notebook(browser, jupyter):
    write_notebook(
        jupyter["root"],
        "keys.ipynb",
        [
            "import torch, fxviz\nfrom fxviz.examples import TwoLayerNet\ntorch.manual_seed(0)",
            "app = fxviz.debug(TwoLayerNet(), torch.randn(8, 1000))\napp",
            NEXT_CELL,
        ],
    )
    page = open_and_run(browser, jupyter, "keys.ipynb")
    _node(page, "linear1").wait_for()
    _status_starts(page, "stopped at 'linear1' (start)")  # the input x is given
    cells = page.locator(".jp-Notebook .jp-Cell")
    count = cells.count()
    assert count == 3

    _node(page, "linear1").click()  # a click on a node gives the widget the keyboard
    page.wait_for_function(FOCUSED)
    for key in "nnb":  # in the notebook's command mode: b inserts a cell, n nothing
        page.keyboard.press(key)
    _status_starts(page, "stopped at 'clamp' (back) — 2/5 nodes")
    page.keyboard.press("c")
    _status_starts(page, "finished — 5/5 nodes")
    page.wait_for_timeout(300)  # anything the notebook would do with the keys has happened
    assert cells.count() == count  # no cell inserted, cut or copied
    assert NEXT_CELL in cells.nth(2).inner_text()  # nothing typed into the next cell

    page.keyboard.press("Escape")  # the keyboard goes back to the notebook
    page.wait_for_function(f"!({FOCUSED}) && !document.activeElement?.closest('.fxviz')")

    graph = page.locator(".fxviz-graph")
    box = graph.bounding_box()
    page.mouse.click(box["x"] + 4, box["y"] + box["height"] - 4)  # the background, no node
    page.wait_for_function(FOCUSED)
    page.keyboard.press("r")  # restart
    _status_starts(page, "stopped at 'linear1' (start)")  # the input x is given
    page.keyboard.press("n")  # a row in the table
    _status_starts(page, "stopped at 'clamp' (step)")
    page.keyboard.press("Escape")
    page.wait_for_function(f"!({FOCUSED})")
    page.locator(".fxviz-table td").first.click()  # the table too
    page.wait_for_function(FOCUSED)
    page.keyboard.press("/")  # search takes the keys; Esc leaves it for the widget
    page.wait_for_function("document.activeElement?.classList.contains('fxviz-search')")
    page.keyboard.type("clamp")  # the search index comes from the kernel: wait for it
    page.wait_for_function(
        "document.querySelector('.fxviz-match-count')?.textContent === '1 match'"
    )
    assert cells.count() == count

    help_ = page.locator(".fxviz-help")  # the shortcuts, said where the widget is
    assert shown(help_)
    tip = help_.get_attribute("title")
    for line in ("/  search", "Esc  back to the notebook", "n  step one node", "b  back one node"):
        assert line in tip
