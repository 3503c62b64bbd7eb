"""The first paint shows the model: the view opens on its own first node, readable,
never on an input drawn beside it."""

from __future__ import annotations

import pytest
import torch

import fxviz
from tests.browser.conftest import open_and_run, screenshot, write_notebook

pytestmark = pytest.mark.browser


class ManyInputs(torch.nn.Module):
    """Twelve inputs in a row, the model's own work starting under the last of them."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(12))

    def forward(self, *xs):
        h = xs[-1]
        for block, x in zip(self.blocks, reversed(xs), strict=True):
            h = torch.relu(block(h) * x)
        return h


def test_report_opens_on_the_models_first_node_readable(offline, tmp_path):
    page, _ = offline
    page.set_viewport_size({"width": 1280, "height": 800})
    torch.manual_seed(0)
    inputs = tuple(torch.randn(2, 4) for _ in range(12))
    path = tmp_path / "inputs.html"
    fxviz.report(fxviz.record(ManyInputs(), *inputs), path)
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") != "fit"
    page.wait_for_timeout(400)  # the replay's first states have been shown (and followed)
    first = page.evaluate(
        """() => {
        const nodes = [...document.querySelectorAll('.fxviz-graph g.node')]
          .filter(g => !g.classList.contains('kind-placeholder'));
        const y = g => Number(g.querySelector('text').getAttribute('y'));
        const top = nodes.reduce((a, b) => (y(b) < y(a) ? b : a));
        const r = top.getBoundingClientRect();
        const font = parseFloat(getComputedStyle(top.querySelector('text')).fontSize);
        return {title: top.querySelector('title').textContent, x: r.x, y: r.y,
                width: r.width, height: r.height,
                scale: r.height / top.getBBox().height, font};
        }"""
    )
    graph = page.locator(".fxviz-graph").bounding_box()
    assert graph is not None
    centre = first["x"] + first["width"] / 2
    assert graph["x"] <= centre <= graph["x"] + graph["width"], (first, graph)
    assert graph["y"] <= first["y"] <= graph["y"] + graph["height"], (first, graph)
    assert first["font"] * first["scale"] >= 11, first  # readable, not a faint thread
    screenshot(page, page.locator("body"), "first_paint_model.png")


def test_report_start_shows_the_node_the_status_names(offline, tmp_path):
    """At the start the debugger's cursor is past the model's input (given, not a step):
    the opening view (on the model's first node) keeps the cursor in view too, so status,
    inspector and view agree."""
    from tests.hf_models import build

    page, _ = offline
    page.set_viewport_size({"width": 1280, "height": 800})
    model, inputs = build("gpt2")
    path = tmp_path / "gpt2.html"
    fxviz.report(fxviz.record(model, *inputs), path)
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    current = "document.querySelector('.fxviz-graph g.fxviz-current')"
    page.wait_for_function(f"{current} && !{current}.classList.contains('kind-placeholder')")
    name = page.evaluate(f"{current}.querySelector('title').textContent")
    assert f"stopped at {name!r}" in page.locator(".fxviz-status").inner_text()
    page.wait_for_function(
        f"document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === {name!r}"
    )
    graph = page.locator(".fxviz-graph").bounding_box()
    box = page.locator(".fxviz-graph g.fxviz-current").bounding_box()
    assert graph is not None
    assert box is not None
    assert graph["x"] <= box["x"], (box, graph)
    assert box["x"] + box["width"] <= graph["x"] + graph["width"], (box, graph)
    assert graph["y"] <= box["y"], (box, graph)
    assert box["y"] + box["height"] <= graph["y"] + graph["height"], (box, graph)
    # run to the end: the view follows to the output, the node the run finished on
    page.locator("button[data-action=continue]").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-status')?.textContent.startsWith('finished')"
    )
    output = page.locator(".fxviz-graph g.node.kind-output")
    page.wait_for_function(
        """() => {
        const g = document.querySelector('.fxviz-graph g.node.kind-output').getBoundingClientRect();
        const p = document.querySelector('.fxviz-graph').getBoundingClientRect();
        return g.top >= p.top && g.bottom <= p.bottom && g.left >= p.left && g.right <= p.right;
        }"""
    )
    assert output.is_visible()


GPT2 = """import fxviz
from tests.hf_models import build
model, inputs = build("gpt2")
view = fxviz.show(fxviz.trace(model, *inputs))
view"""
# The graph's start: its inputs and the node each flows into first; for each, where it is
# against the graph panel and its label's height, in CSS px.
START = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const nodes = [...document.querySelectorAll('.fxviz-graph g.node')];
  const titled = (t) => nodes.find((g) => g.querySelector('title').textContent === t);
  const edges = [...document.querySelectorAll('.fxviz-graph g.edge > title')]
    .map((t) => t.textContent.split('->').map((end) => end.split(':')[0]));
  const inputs = nodes.filter((g) => g.classList.contains('kind-placeholder'));
  const users = inputs.map((g) => edges.find(([a]) => a === g.querySelector('title').textContent));
  return [...inputs, ...users.map((edge) => titled(edge[1]))].map((g) => {
    const r = g.getBoundingClientRect();
    return { title: g.querySelector('title').textContent,
      shown: g.checkVisibility({ opacityProperty: true, visibilityProperty: true })
        && r.width > 0 && r.height > 0,
      inside: r.left >= panel.left && r.right <= panel.right && r.top >= panel.top
        && r.bottom <= panel.bottom,
      px: g.querySelector('text').getBoundingClientRect().height }; }); }"""


def test_the_widget_opens_with_the_graphs_start_inside_the_panel(browser, lab):
    """GPT-2's input is drawn far to the left of its topmost node (the position ids'
    `arange`): a view centred on that node alone cut the input off at the panel's side.
    The first view shows where the data enters: the input and the node it goes into."""
    write_notebook(lab["root"], "start.ipynb", [GPT2])
    page = open_and_run(browser, lab, "start.ipynb")
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening", timeout=120_000)
    # a graph wider than the panel at a readable zoom: the view shows a part of it
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") != "fit"
    start = page.evaluate(START)
    assert len(start) == 2, start  # GPT-2 has one input
    assert start[0]["title"] == "input_ids", start
    assert all(s["shown"] and s["inside"] for s in start), start
    assert all(s["px"] >= 11 for s in start), start  # readable
    screenshot(page, page.locator(".fxviz-graph"), "first_paint_start.png")
    page.close()
