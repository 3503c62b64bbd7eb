"""The widget in a real marimo notebook (``marimo edit``, headless), shown plainly and
through ``mo.ui.anywidget``: drawn inside its cell, readable, a click inspects a node, keys
land in the widget and never in the next cell, and fxviz logs no error in the console."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import (
    INSPECTOR_SQUEEZED,
    LABELS_OUTSIDE,
    SMALLEST_LABEL_PX,
    _free_port,
    contrast,
    screenshot,
    serve,
    shown,
)

pytest.importorskip("marimo", reason="marimo is in the test extras: pip install -e '.[test]'")
pytestmark = pytest.mark.browser

NEXT_CELL = "# the cell after the widget: keys typed in the widget never land here"
# The widget's pan/zoom transform, unchanged for half a second: the opening view is
# chosen, applied and followed (marimo mounts anywidgets in a shadow root).
STILL = """() => {
  const root = document.querySelector('marimo-anywidget')?.shadowRoot;
  const view = root?.querySelector('.svg-pan-zoom_viewport');
  if (!view || !root.querySelector('.fxviz')?.dataset.opening) return false;
  const now = performance.now(), transform = view.getAttribute('transform');
  if (window.__fxvizView !== transform) { window.__fxvizView = transform; window.__fxvizSince = now; }
  return now - window.__fxvizSince > 500;
}"""
RECT = "e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; }"
CELLS = {  # the same debugger, displayed as a cell's last expression or wrapped by marimo
    "plain": "app",
    "wrapped": "mo.ui.anywidget(app)",
}


def _notebook(shown_as: str) -> str:
    return f"""import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import torch

    import fxviz
    from fxviz.examples import TwoLayerNet

    _ = torch.manual_seed(0)
    return TwoLayerNet, fxviz, mo, torch


@app.cell
def _(TwoLayerNet, fxviz, mo, torch):
    app = fxviz.debug(TwoLayerNet(), torch.randn(8, 1000))
    {shown_as}
    return


@app.cell
def _():
    {NEXT_CELL}
    return
"""


@pytest.fixture(scope="module")
def marimo(tmp_path_factory) -> Iterator[dict]:
    """``marimo edit`` serving a temporary folder, its cells run when a notebook opens."""
    root = tmp_path_factory.mktemp("marimo")
    config = root.parent / f"{root.name}-config"
    (config / "marimo").mkdir(parents=True)
    # marimo 0.25 leaves a notebook's cells unrun until asked; a person's first look is
    # at the run notebook, so run on open (the user's own config is never read or changed)
    (config / "marimo" / "marimo.toml").write_text("[runtime]\nauto_instantiate = true\n")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    for url in serve(
        [
            sys.executable, "-m", "marimo", "edit", "--headless", "--no-token",
            "--skip-update-check", "--host", "127.0.0.1", "--port", str(port), str(root),
        ],
        {"XDG_CONFIG_HOME": str(config)},
        base, f"{base}/health", root.parent / f"{root.name}-marimo.log", "marimo",
    ):  # fmt: skip
        yield {"url": url, "root": Path(root)}


def _within(inner: dict, outer: dict, axis: str) -> bool:
    """``inner`` lies inside ``outer`` along ``axis`` ("x" or "y"), to a pixel."""
    size = "width" if axis == "x" else "height"
    return (
        outer[axis] - 1 <= inner[axis]
        and inner[axis] + inner[size] <= outer[axis] + outer[size] + 1
    )


OUTPUT_AREA = (
    "e => { for (let n = e.getRootNode().host; n; n = n.parentElement)"
    " if (getComputedStyle(n).overflowY === 'auto') { const r = n.getBoundingClientRect();"
    " return { top: r.top, bottom: r.bottom, scrolls: n.scrollHeight > n.clientHeight + 1 }; }"
    " return null; }"
)


def _fits_the_output_area(widget) -> None:
    """The whole widget inside marimo's output area, which need not scroll: the table
    under the graph, not drawn under it."""
    output = widget.evaluate(OUTPUT_AREA)
    assert output is not None
    graph = widget.locator(".fxviz-graph").evaluate(RECT)
    table = widget.locator(".fxviz-table").evaluate(RECT)
    assert not output["scrolls"], (output, graph, table)
    assert output["top"] - 1 <= graph["y"], (graph, output)
    assert table["y"] >= graph["y"] + graph["height"], (table, graph)
    assert table["y"] + table["height"] <= output["bottom"] + 1, (table, output)
    assert graph["height"] >= 240, graph


def _in_widget(snippet: str) -> str:
    """A page-wide measurement from conftest, run inside the widget's shadow root (marimo
    mounts anywidgets in one), where ``document.querySelector`` cannot see."""
    return (
        "(host) => { const root = host.shadowRoot; const document = {"
        " querySelector: (s) => root.querySelector(s),"
        " querySelectorAll: (s) => root.querySelectorAll(s),"
        " createElement: (t) => window.document.createElement(t) };"
        f" return ({snippet})(); }}"
    )


@pytest.mark.parametrize("shown_as", list(CELLS))
def test_marimo_shows_the_debugger_and_gives_it_the_keys(browser, marimo, shown_as):
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a shared machine: waits for states, never sleeps
    name = f"debug_{shown_as}.py"
    (marimo["root"] / name).write_text(_notebook(CELLS[shown_as]))
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{marimo['url']}/?file={name}")

    widget = page.locator(".fxviz").first
    status = widget.locator(".fxviz-status")
    graph = widget.locator(".fxviz-graph")
    linear1 = graph.locator("g.node").filter(has=page.locator("title:text-is('linear1')"))
    linear1.wait_for(timeout=120_000)  # a fresh kernel imports torch first
    expect(status).to_contain_text("stopped at 'linear1' (start) — 1/5 nodes")  # x is given
    page.wait_for_function(STILL, polling=100)  # opened, and the view has stopped moving

    # seen: drawn, inside the widget, the widget inside its cell, labels readable
    cell = page.locator(".marimo-cell").filter(has=widget)
    assert page.locator(".marimo-cell").count() == 3
    outer, inner, drawn = cell.bounding_box(), widget.bounding_box(), graph.bounding_box()
    assert shown(graph)
    assert min(drawn["width"], drawn["height"]) > 200, drawn
    assert _within(inner, outer, "x"), (inner, outer)  # across: the cell holds the widget
    # marimo caps a cell's output at ~610 px and scrolls what is taller: the widget fits
    # it, the graph and the table under it both in sight, never one scrolled under the other
    _fits_the_output_area(widget)
    for title in ("x", "linear1"):
        box = graph.locator("g.node").filter(has=page.locator(f"title:text-is('{title}')"))
        b = box.evaluate(RECT)  # the shape itself (Playwright's box adds glow and outline)
        assert shown(box), title
        assert _within(b, drawn, "x"), (title, b, drawn)
        assert _within(b, drawn, "y"), (title, b, drawn)
    host = page.locator("marimo-anywidget").first
    assert host.evaluate(_in_widget(LABELS_OUTSIDE)) == []
    assert host.evaluate(_in_widget(SMALLEST_LABEL_PX)) >= 11
    for part in (
        status,
        widget.locator(".fxviz-inspector dd").first,
        widget.locator(".fxviz-btn").first,
    ):
        assert shown(part)
        assert part.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= 11
        assert contrast(part) >= 4.5

    # a click selects a node: the inspector shows it, and the widget has the keyboard
    linear1.click()
    expect(widget.locator(".fxviz-inspector .fxviz-title")).to_have_text("linear1")
    assert "8×100 f32" in widget.locator(".fxviz-inspector").inner_text()
    assert host.evaluate(_in_widget(INSPECTOR_SQUEEZED)) == []
    expect(widget).to_be_focused()
    for key in "nnb":
        page.keyboard.press(key)
    expect(status).to_contain_text("stopped at 'clamp' (back) — 2/5 nodes")
    page.keyboard.press("c")
    expect(status).to_contain_text("finished — 5/5 nodes")
    expect(widget.locator(".fxviz-inspector")).to_contain_text("float32 8×100 on cpu")  # it ran
    # selected after it ran: its own colour under the glow, not the glow showing through
    # a faded fill (a solid purple node, which the legend does not explain)
    expect(linear1).to_have_class(
        re.compile(r"\bfxviz-done\b.*\bfxviz-selected\b|\bfxviz-selected\b.*\bfxviz-done\b")
    )
    assert (
        linear1.evaluate("g => getComputedStyle(g.querySelector('path, polygon')).fillOpacity")
        == "1"
    )
    page.keyboard.press("/")  # search takes the keys typed next
    expect(widget.locator(".fxviz-search")).to_be_focused()
    page.keyboard.type("clamp")
    expect(widget.locator(".fxviz-match-count")).to_have_text("1 match")
    page.keyboard.press("Escape")  # clears the query
    page.keyboard.press("Escape")  # and gives the keyboard back
    expect(widget).not_to_be_focused()
    expect(widget.locator(".fxviz-search")).not_to_be_focused()
    # nothing typed reached the notebook: no cell added, the next cell's code untouched
    assert page.locator(".marimo-cell").count() == 3
    assert page.locator(".marimo-cell .cm-content").nth(2).inner_text() == NEXT_CELL
    screenshot(page, cell, f"marimo-{shown_as}.png")
    assert errors == []
    page.close()


GPT2_NOTEBOOK = """import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import torch
    import transformers as tf

    import fxviz

    _ = torch.manual_seed(0)
    config = tf.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=32, vocab_size=100,
                           bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 100, (1, 8))
    inputs = dict(input_ids=ids, attention_mask=torch.ones(1, 8, dtype=torch.long),
                  token_type_ids=torch.zeros(1, 8, dtype=torch.long),
                  position_ids=torch.arange(8)[None])
    return fxviz, inputs, mo, model


@app.cell
def _(fxviz, inputs, mo, model):
    app = fxviz.debug(model, **inputs)
    mo.ui.anywidget(app)
    return
"""


def test_marimo_fits_a_real_model_in_its_output_area(browser, marimo):
    """GPT-2 with four inputs: a table of rows under a 130-node graph, all in sight."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    (marimo["root"] / "gpt2.py").write_text(GPT2_NOTEBOOK)
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{marimo['url']}/?file=gpt2.py")
    widget = page.locator(".fxviz").first
    widget.locator(".fxviz-graph g.fxviz-current").wait_for(timeout=180_000)
    page.wait_for_function(STILL, polling=100)
    expect(widget.locator(".fxviz-status")).to_contain_text("(start) — 4/")  # inputs given
    widget.locator("button[data-action=step10]").click()
    expect(widget.locator(".fxviz-status")).to_contain_text("(step) — 14/")
    expect(widget.locator(".fxviz-table tr").nth(10)).to_be_visible()
    _fits_the_output_area(widget)
    host = page.locator("marimo-anywidget").first
    assert host.evaluate(_in_widget(LABELS_OUTSIDE)) == []
    screenshot(page, page.locator(".marimo-cell").filter(has=widget), "marimo-gpt2.png")
    page.close()
