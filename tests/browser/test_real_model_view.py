"""A Hugging Face GPT-2 with four inputs, as a person first sees it (report, JupyterLab,
Notebook 7): the model's own names (one exported graph: no frame, no g0_ prefix), the opening
view on the model's first node with the debugger's cursor in it (the inputs are given, the
run starts past them), labels inside their shapes with room, and the table clear of the
graph inside the output area."""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    CAPTURE_MACHINERY,
    LABELS_CRAMPED,
    OPENING,
    open_and_run,
    screenshot,
    set_theme,
    write_notebook,
)

pytestmark = pytest.mark.browser

GPT2 = (
    "import torch, fxviz, transformers as tf\n"
    "torch.manual_seed(0)\n"
    "config = tf.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=32, vocab_size=100,\n"
    "                       bos_token_id=0, eos_token_id=0)\n"
    "model = tf.GPT2LMHeadModel(config).eval()\n"
    "ids = torch.randint(0, 100, (1, 8))\n"
    "inputs = dict(input_ids=ids, attention_mask=torch.ones(1, 8, dtype=torch.long),\n"
    "              token_type_ids=torch.zeros(1, 8, dtype=torch.long),\n"
    "              position_ids=torch.arange(8)[None])"
)
INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def _gpt2():
    namespace: dict = {}
    exec(GPT2, namespace)  # the notebook's own cell, run here
    return namespace["fxviz"], namespace["model"], namespace["inputs"]


def _check_what_a_person_sees(page) -> dict:
    assert page.evaluate(CAPTURE_MACHINERY) == []  # the model's names, not torch.compile's
    seen = page.evaluate(OPENING)
    assert seen["topShown"], seen  # the model's first node...
    assert seen["currentShown"], seen  # ...and the cursor, in the opening view
    assert not seen["currentIsInput"], seen  # the inputs are given: the run starts past them
    status = page.locator(".fxviz-status").inner_text()
    assert f"stopped at {seen['current']!r} (start) — {len(INPUTS)}/" in status
    assert page.evaluate(LABELS_CRAMPED) == []
    return seen


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_report_of_gpt2_with_four_inputs(offline, tmp_path, scheme):
    page, _ = offline
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size({"width": 1280, "height": 800})
    fxviz, model, inputs = _gpt2()
    rec = fxviz.record(model, **inputs)
    assert rec.method == "export"
    path = tmp_path / "gpt2.html"
    fxviz.report(rec, path)
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    page.wait_for_function("document.querySelector('.fxviz-graph g.fxviz-current')")
    page.wait_for_timeout(400)  # the replay's first states shown, and followed
    _check_what_a_person_sees(page)
    header = page.locator("header").inner_text()
    assert "g0" not in header
    assert "captured by: torch.export" in header  # one graph: nothing stitched
    assert "break" not in header
    screenshot(page, page.locator("body"), f"report-gpt2-{scheme}.png")


@pytest.mark.parametrize(("front", "theme"), [("lab", "light"), ("notebook7", "dark")])
def test_debugger_on_gpt2_in_jupyter(browser, request, front, theme):
    jupyter = request.getfixturevalue(front)
    name = f"gpt2-{theme}.ipynb"
    write_notebook(jupyter["root"], name, [GPT2, "app = fxviz.debug(model, **inputs)\napp"])
    page = open_and_run(browser, jupyter, name)
    page.set_viewport_size({"width": 1280, "height": 1000})
    if theme == "dark":
        set_theme(page, "dark")
    widget = page.locator(".fxviz").first
    widget.locator(".fxviz-graph g.fxviz-current").wait_for(timeout=120_000)
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    page.wait_for_timeout(400)
    _check_what_a_person_sees(page)
    # the table under the graph, never drawn over by it, inside the output area
    page.locator("button[data-action=step10]").click()
    page.wait_for_function("document.querySelectorAll('.fxviz-table tr').length > 10")
    graph, table = widget.locator(".fxviz-graph").bounding_box(), widget.locator(".fxviz-table")
    assert table.bounding_box()["y"] >= graph["y"] + graph["height"], (table.bounding_box(), graph)
    output = widget.evaluate("e => e.closest('.jp-OutputArea').getBoundingClientRect().bottom")
    box = table.bounding_box()
    assert box["y"] + box["height"] <= output + 1
    widget.scroll_into_view_if_needed()
    screenshot(page, widget, f"debugger-gpt2-{front}-{theme}.png")
    if theme == "dark":  # leave the server's theme as found
        set_theme(page, "light")
    page.close()
