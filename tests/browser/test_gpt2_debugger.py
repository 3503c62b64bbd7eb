"""A Hugging Face GPT-2 (small, random weights) in the debugger, as a new user meets it
in JupyterLab: the inspector, the linked table and the status line tell the truth about
the run and are readable."""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    INSPECTOR_MID_WORD_BREAKS,
    INSPECTOR_SQUEEZED,
    open_and_run,
    screenshot,
    shown,
    write_notebook,
)

pytestmark = pytest.mark.browser

GPT2 = """import torch, transformers, fxviz
cfg = transformers.GPT2Config(n_layer=4, n_embd=64, n_head=2, vocab_size=1000,
                              bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(cfg).eval()
input_ids = torch.randint(0, 1000, (1, 8))
dbg = fxviz.debug(model, input_ids)
dbg"""
STATUS = "document.querySelector('.fxviz-status')?.textContent ?? ''"
INSPECTOR = "document.querySelector('.fxviz-inspector')?.innerText ?? ''"
TITLE = "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent ?? ''"
FOCUSED = "document.activeElement?.classList.contains('fxviz')"


def _debugger(browser, lab, name: str):
    write_notebook(lab["root"], name, [GPT2])
    page = open_and_run(browser, lab, name)
    page.wait_for_function(f"({STATUS}).startsWith('stopped at')", timeout=120_000)
    page.locator(".fxviz-graph g.node").first.wait_for()
    return page


def _status_starts(page, text: str) -> None:
    page.wait_for_function(f"({STATUS}).startsWith({text!r})")


def _settled(page, ms: int = 1500) -> None:
    """Wait long enough for the kernel's answer to a key to have been drawn."""
    page.wait_for_timeout(ms)


def test_the_inspector_shows_its_node_as_it_is_after_the_run_finishes(browser, lab):
    page = _debugger(browser, lab, "gpt2_inspector.ipynb")
    graph = page.locator(".fxviz-graph").bounding_box()
    page.mouse.click(graph["x"] + 4, graph["y"] + graph["height"] - 4)  # the background
    page.wait_for_function(FOCUSED)  # the widget has the keyboard
    for key in "nnn":
        page.keyboard.press(key)
    _status_starts(page, "stopped at 'add' (step)")
    _settled(page)
    assert page.evaluate(TITLE) == "add"
    assert "not run yet" in page.evaluate(INSPECTOR)
    page.keyboard.press("c")
    _status_starts(page, "finished — 221/221 nodes")
    _settled(page)
    inspector = page.locator(".fxviz-inspector")
    assert shown(inspector)
    assert page.evaluate(TITLE) == "add"  # the same node, now run
    text = page.evaluate(INSPECTOR)
    assert "not run yet" not in text, text
    assert "time" in text, text
    assert "output" in text, text
    page.keyboard.press("r")  # restart: the node to run next, not run yet
    _status_starts(page, "stopped at 'view' (start)")
    _settled(page)
    assert page.evaluate(TITLE) == "view"
    page.close()


# The selected table row: where it is in the table's own scroll box, and whether it is
# wholly inside it (below the header row, above the box's bottom).
ROW_SEEN = """() => {
  const box = document.querySelector('.fxviz-table');
  const row = box.querySelector('tr.fxviz-row-selected');
  if (!row) return null;
  const b = box.getBoundingClientRect(), r = row.getBoundingClientRect();
  const top = b.top + box.clientTop, bottom = top + box.clientHeight;
  return { name: row.dataset.name, inside: r.top >= top - 1 && r.bottom <= bottom + 1,
           scrollTop: box.scrollTop, rowTop: r.top, boxTop: top, boxBottom: bottom };
}"""
# The notebook's own scroll position (JupyterLab's windowed panel, else the document).
PAGE_SCROLL = """() => {
  const outer = document.querySelector('.jp-WindowedPanel-outer');
  return [outer ? outer.scrollTop : 0, document.scrollingElement.scrollTop];
}"""


def test_the_table_scrolls_to_the_node_selected_in_the_graph(browser, lab):
    page = _debugger(browser, lab, "gpt2_table.ipynb")
    page.locator(".fxviz-toolbar button[data-action='continue']").click()  # a row a node run
    _status_starts(page, "finished — 221/221 nodes")
    page.locator(".fxviz-table tr[data-name='output']").wait_for(state="attached")
    # the table counts what the status line counts: the model's own 221 nodes (its 61
    # parameter fetches are folded into their users, in both)
    assert page.locator(".fxviz-table tr[data-name]").count() == 221
    page.locator(".fxviz-fit").click()  # the whole graph: its last node can be clicked
    _settled(page, 500)
    scrolled = page.evaluate(PAGE_SCROLL)
    output = page.locator(".fxviz-graph g.node").filter(has=page.locator("title:text-is('output')"))
    output.click()
    page.wait_for_function(
        "document.querySelector('.fxviz-table tr.fxviz-row-selected')?.dataset.name === 'output'"
    )
    _settled(page, 500)
    seen = page.evaluate(ROW_SEEN)
    assert seen["inside"], seen  # the person sees the highlighted row without scrolling
    assert shown(page.locator(".fxviz-table tr.fxviz-row-selected"))
    assert page.evaluate(PAGE_SCROLL) == scrolled  # the notebook itself did not move
    first = page.locator(".fxviz-table tr[data-name]").first.get_attribute("data-name")
    page.locator(".fxviz-search").fill(first)  # back up to the first row: scrolled up to it
    page.locator(".fxviz-search").press("Enter")
    page.wait_for_function(
        f"document.querySelector('.fxviz-table tr.fxviz-row-selected')?.dataset.name === {first!r}"
    )
    _settled(page, 500)
    seen = page.evaluate(ROW_SEEN)
    assert seen["inside"], seen
    page.close()


# The value preview and the inspector: whether the preview's box is inside the
# inspector's, scrolls sideways what it cannot show, and the inspector hides nothing.
PREVIEW_SEEN = """() => {
  const box = document.querySelector('.fxviz-inspector');
  const pre = box.querySelector('.fxviz-preview');
  const b = box.getBoundingClientRect(), p = pre.getBoundingClientRect();
  const left = b.left + box.clientLeft, right = left + box.clientWidth;
  return { inside: p.left >= left - 1 && p.right <= right + 1,
           inspectorHides: box.scrollWidth > box.clientWidth + 1,
           previewHides: pre.scrollWidth > pre.clientWidth + 1,
           previewScrolls: ['auto', 'scroll'].includes(getComputedStyle(pre).overflowX),
           width: [p.left, p.right, left, right] };
}"""


def test_the_inspector_breaks_long_names_between_words_and_shows_its_preview(browser, lab):
    page = _debugger(browser, lab, "gpt2_wrap.ipynb")
    page.locator(".fxviz-toolbar button[data-action='continue']").click()
    _status_starts(page, "finished")
    # a layer norm: its target and parameter inputs are long dotted and underscored names
    page.locator(".fxviz-table tr[data-name='layer_norm_4']").click()
    page.wait_for_function(f"{TITLE} === 'layer_norm_4'")
    _settled(page, 500)
    assert "aten.layer_norm.default" in page.evaluate(INSPECTOR)
    assert "input transformer_h_2_ln_1_weight" in page.evaluate(INSPECTOR)
    assert page.evaluate(INSPECTOR_MID_WORD_BREAKS) == []
    assert page.evaluate(INSPECTOR_SQUEEZED) == []
    seen = page.evaluate(PREVIEW_SEEN)
    assert seen["inside"], seen
    assert not seen["inspectorHides"], seen
    assert not seen["previewHides"], seen  # its values wrap in the panel, none cut off
    assert shown(page.locator(".fxviz-inspector .fxviz-preview"))
    screenshot(page, page.locator(".fxviz-inspector"), "gpt2-inspector.png")
    page.close()
