"""The HTML report opens offline in Chromium and replays the recorded run."""

from __future__ import annotations

import json
import re

import pytest
import torch

import fxviz
from fxviz.examples import TwoLayerNet
from tests.browser.conftest import (
    INSPECTOR_SQUEEZED,
    LABELS_OUTSIDE,
    SMALLEST_LABEL_PX,
    contrast,
    node,
    outline_style,
    screenshot,
    shown,
    text_clearance,
)

pytestmark = pytest.mark.browser


def test_replay_report_offline(offline, tmp_path):
    page, requests = offline
    torch.manual_seed(0)
    rec = fxviz.record(TwoLayerNet(), torch.randn(64, 1000))
    path = tmp_path / "run.html"
    fxviz.report(rec, path, title="TwoLayerNet run")
    text = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", text)
    assert "@import" not in text

    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    assert page.locator("header h1").inner_text() == "TwoLayerNet run"
    assert "torch 2." in page.locator("header").inner_text()
    assert "model: TwoLayerNet (symbolic_trace) · 5 nodes" in page.locator("header").inner_text()
    current = "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent"
    page.wait_for_function(f"{current} === 'linear1'")  # the input x is given
    page.locator("button[data-action=step]").click()
    page.wait_for_function(f"{current} === 'clamp'")
    page.locator(".fxviz-graph g.node").filter(has=page.locator("title:text-is('linear1')")).click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    inspector = page.locator(".fxviz-inspector").inner_text()
    assert "float32 64×100" in inspector  # the recorded output
    assert "mean" in inspector
    page.locator("button[data-action=back]").click()
    page.wait_for_function(f"{current} === 'linear1'")
    page.locator(".fxviz-timeline").fill("5")  # the timeline: to the end
    page.wait_for_function(
        "document.querySelector('.fxviz-status')?.textContent.startsWith('finished')"
    )
    assert requests == []
    screenshot(page, page.locator("body"), "report.png")


def test_report_of_a_failed_run_and_hostile_names(offline, tmp_path):
    page, requests = offline
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.relu, (x,))
    node.name = "<img src=x onerror=alert(1)>"
    graph.output(graph.call_method("view", (node, 3, 3)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    dbg = fxviz.Debugger(gm, torch.randn(4))
    dbg.continue_()
    path = tmp_path / "failed.html"
    fxviz.report(dbg, path)
    assert "<img src=x" not in path.read_text()
    alerts: list[str] = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    page.locator("button[data-action=continue]").click()
    # the page shows the Debugger's own status line for the failing node
    page.wait_for_function(
        f"document.querySelector('.fxviz-status')?.textContent.startsWith({json.dumps(dbg.status)})"
    )
    failing = page.locator(".fxviz-graph g.fxviz-error")
    assert failing.count() == 1
    assert shown(failing)
    assert shown(failing.locator("text").first)  # not hidden by the error box's CSS
    style = outline_style(failing)
    assert style["fill"] == "rgb(255, 179, 179)"
    assert style["stroke"] == "rgb(192, 0, 0)"
    assert "view" in failing.locator("title").text_content()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'view'"
    )
    assert page.evaluate(INSPECTOR_SQUEEZED) == []  # a hostile input name squeezes nothing
    for line in (".fxviz-inspector .fxviz-node-error", ".fxviz-status"):  # never at an edge
        assert text_clearance(page.locator(line)) >= 4, line
    assert alerts == []
    assert requests == []
    screenshot(page, page.locator("body"), "post-mortem.png")


class CNN(torch.nn.Module):
    """A small conv net: 13 FX nodes with long conv labels."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, stride=2), nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 64, 3)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(64, 100)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = torch.relu(self.conv3(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def _open(page, path):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(path.as_uri())
    page.locator(".fxviz-graph g.node").first.wait_for()
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")


def _open_legend(page):
    """Open the legend (closed by default, then as the person last left it)."""
    if not page.locator(".fxviz-legend details").evaluate("d => d.open"):
        page.locator(".fxviz-legend summary").click()
    assert page.locator(".fxviz-legend details").evaluate("d => d.open")


def test_a_cnn_opens_readable_with_every_label_inside_its_shape(offline, tmp_path):
    page, _ = offline
    torch.manual_seed(0)
    rec = fxviz.record(CNN(), torch.randn(2, 3, 32, 32))
    assert len(rec) == 13
    path = tmp_path / "cnn.html"
    fxviz.report(rec, path)
    _open(page, path)
    assert page.evaluate(SMALLEST_LABEL_PX) >= 11.9  # readable at first sight, no zooming
    assert page.evaluate(LABELS_OUTSIDE) == []
    assert shown(node(page, "x"))  # top-anchored: the first node is in the panel
    box, panel = node(page, "x").bounding_box(), page.locator(".fxviz-graph").bounding_box()
    assert panel["y"] <= box["y"]
    assert box["y"] + box["height"] <= panel["y"] + panel["height"]
    legend = page.locator(".fxviz-legend")
    assert shown(legend)
    _open_legend(page)
    assert "Conv2d(3→16" in legend.inner_text()
    status, toolbar = page.locator(".fxviz-status"), page.locator(".fxviz-buttons")
    assert abs(status.bounding_box()["y"] - toolbar.bounding_box()["y"]) < 40
    screenshot(page, page.locator("body"), "cnn.png")
    page.locator(".fxviz-fit").click()  # the whole graph, one click away
    page.wait_for_timeout(100)
    assert all(
        panel["y"] - 4 <= b["y"] and b["y"] + b["height"] <= panel["y"] + panel["height"] + 4
        for b in (g.bounding_box() for g in page.locator(".fxviz-graph g.node").all())
    )


def test_search_at_the_start_finds_nodes_not_run_yet(offline, tmp_path):
    page, _ = offline
    torch.manual_seed(0)
    rec = fxviz.record(TwoLayerNet(), torch.randn(8, 1000))
    path = tmp_path / "search.html"
    fxviz.report(rec, path)
    _open(page, path)
    search = page.locator(".fxviz-search")
    search.fill("clamp")
    assert page.locator(".fxviz-match-count").inner_text() == "1 match"
    assert shown(node(page, "clamp"))
    assert "drop-shadow" in outline_style(node(page, "clamp"))["filter"]
    search.fill("linear")  # targets and module paths too: Linear(...) and linear1/linear2
    assert page.locator(".fxviz-match-count").inner_text() == "2 matches"
    search.press("Enter")
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    assert page.locator(".fxviz-match-count").inner_text() == "1 of 2"
    page.locator(".fxviz-next").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear2'"
    )
    page.locator(".fxviz-prev").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    assert "not run yet" in page.locator(".fxviz-inspector").inner_text()
    screenshot(page, page.locator("body"), "search-at-start.png")


def test_states_combine_on_one_node_and_the_legend_explains_them(offline, tmp_path):
    page, _ = offline
    torch.manual_seed(0)
    path = tmp_path / "states.html"
    fxviz.report(fxviz.record(TwoLayerNet(), torch.randn(8, 1000)), path)
    _open(page, path)
    x = node(page, "linear1")
    x.click()  # linear1 is current (the input is given) and now selected
    page.locator("button[data-action=toggle_breakpoint]").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-status').textContent.includes('at linear1')"
    )
    style = outline_style(x)
    assert style["stroke"] == "rgb(31, 111, 235)"
    assert style["width"] >= 3  # current
    assert "drop-shadow" in style["filter"]  # selected
    assert shown(x.locator(".fxviz-marker-breakpoint"))  # breakpoint
    legend = page.locator(".fxviz-legend")
    _open_legend(page)
    for words in ("next to run", "selected", "breakpoint", "raised", "NaN/Inf", "already ran"):
        assert words in legend.inner_text()
    assert all(shown(s) for s in legend.locator(".fxviz-legend-sample").all())
    entries = legend.locator("li span")
    texts = entries.all_inner_texts()
    assert len(set(texts)) == len(texts)  # each entry reads differently...
    clipped = entries.evaluate_all(  # ...and whole: no entry cut to "…" or hidden
        "spans => spans.filter(s => s.scrollWidth > s.clientWidth + 1"
        " || getComputedStyle(s).textOverflow === 'ellipsis').map(s => s.textContent)"
    )
    assert clipped == []
    page.locator(".fxviz-legend summary").click()  # collapsible
    assert not shown(legend.locator(".fxviz-legend-sample").first)
    page.wait_for_function("localStorage.getItem('fxviz.legend.open') === '0'")  # remembered
    # (the details element's toggle event, which stores it, is dispatched as a task)


def test_a_nan_break_opens_the_inspector_on_the_node_that_made_it(offline, tmp_path):
    page, _ = offline

    class Risky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.log(self.b(torch.relu(self.a(x)))).mean(dim=-1)

    torch.manual_seed(0)
    path = tmp_path / "nan.html"
    fxviz.report(fxviz.record(Risky(), torch.randn(4, 8)), path)
    _open(page, path)
    for name in ("log", "mean", "output"):  # nothing has run: no node looks like NaN yet
        _looks_unmarked(node(page, name))
    toggle = page.locator("button[data-action=break_nan]")
    unpressed = toggle.evaluate("b => getComputedStyle(b).backgroundColor")
    toggle.click()
    page.wait_for_function(  # the toggle looks pressed (waited for: a loaded page is slow)
        "document.querySelector('button[data-action=break_nan]')"
        ".getAttribute('aria-pressed') === 'true'"
    )
    assert toggle.evaluate("b => getComputedStyle(b).backgroundColor") != unpressed
    page.locator("button[data-action=continue]").click()
    page.wait_for_function(  # names the node that produced it, in words
        "document.querySelector('.fxviz-status').textContent"
        ".startsWith(\"stopped after 'log' produced NaN/Inf\")"
    )
    assert "breakpoints: NaN/Inf" in page.locator(".fxviz-status").inner_text()
    assert page.locator(".fxviz-inspector .fxviz-title").inner_text() == "log"
    log = node(page, "log")
    assert shown(log.locator(".fxviz-marker-nonfinite"))
    for name in ("mean", "output"):  # fed by the NaN, but not run yet at the break
        _looks_unmarked(node(page, name))
    screenshot(page, page.locator("body"), "nan-break-report.png")


def _looks_unmarked(g) -> None:
    """The node shows no NaN/Inf or error: no red outline, no NaN tag, no warning line."""
    stroke = [int(v) for v in re.findall(r"\d+", outline_style(g)["stroke"])[:3]]
    assert not (stroke[0] > 150 and stroke[1] < 80 and stroke[2] < 80), stroke  # not red
    assert g.locator(".fxviz-marker-nonfinite").count() == 0
    assert not [t for t in g.locator("text").all_text_contents() if "⚠" in t]


def test_hostile_node_names_get_their_states(offline, tmp_path):
    page, _ = offline
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    proto = graph.call_function(torch.relu, (x,))
    proto.name = "__proto__"
    legendish = graph.call_function(torch.neg, (proto,))
    legendish.name = "_legend_call_function"
    graph.output(legendish)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    path = tmp_path / "names.html"
    fxviz.report(fxviz.record(gm, torch.randn(3)), path)
    _open(page, path)
    page.wait_for_function(  # the start: the input x is given
        "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent === '__proto__'"
    )
    page.locator("button[data-action=step]").click()
    page.wait_for_function("document.querySelector('.fxviz-status').textContent.includes('2/4')")
    assert "fxviz-done" in node(page, "__proto__").get_attribute("class")
    legendish_node = node(page, "_legend_call_function")
    assert legendish_node.count() == 1
    assert shown(legendish_node)
    assert "fxviz-current" in legendish_node.get_attribute("class")


def _chain_report(page, tmp_path, length: int) -> None:
    """Open the report of a flat chain of ``length`` ops (drawn in groups)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    for i in range(length):
        x = graph.call_function(torch.relu if i % 2 else torch.neg, (x,))
    graph.output(x)
    path = tmp_path / "chain.html"
    fxviz.report(torch.fx.GraphModule(torch.nn.Module(), graph), path)
    _open(page, path)


def test_a_20000_node_flat_chain_draws_in_groups_that_open(offline, tmp_path):
    page, _ = offline
    _chain_report(page, tmp_path, 20_000)
    boxes = page.locator(".fxviz-graph g.fx-module")
    assert 50 <= boxes.count() <= 120
    assert page.evaluate(SMALLEST_LABEL_PX) >= 11.9
    assert page.evaluate(LABELS_OUTSIDE) == []
    page.locator(".fxviz-search").fill("relu_9999")  # inside a closed box: the box lights up
    assert page.locator(".fxviz-match-count").inner_text() == "1 match"
    assert page.locator(".fxviz-graph g.fxviz-match.fx-module").count() == 1
    screenshot(page, page.locator("body"), "big-graph-20k.png")
    page.evaluate("document.querySelector('.fxviz').dataset.opening = ''")
    page.locator(".fxviz-graph g.fxviz-match.fx-module").click()  # open the group holding it
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert 50 <= page.locator(".fxviz-graph g.node").count() <= 400  # one group: 1% of the chain
    assert shown(node(page, "relu_9999"))
    page.locator(".fxviz-overview").click()
    page.wait_for_function("document.querySelectorAll('.fxviz-graph g.fx-module').length > 50")


def test_the_report_lays_out_ahead_the_boxes_in_view_so_a_click_opens_one_at_once(
    offline, tmp_path
):
    page, _ = offline
    _chain_report(page, tmp_path, 3_000)
    # once idle, the page peeks at the boxes nearest the panel's centre (no kernel: the
    # report answers from the drawings it holds) and lays their openings out
    page.wait_for_function("(globalThis.__fxviz_layout_v3?.cache.count ?? 0) >= 2")
    centre = page.locator(".fxviz-graph").bounding_box()
    box = page.evaluate(
        """([cx, cy]) => [...document.querySelectorAll('.fxviz-graph g.node.fx-module')]
        .map((g) => [g.querySelector('title').textContent, g.getBoundingClientRect()])
        .sort((a, b) => Math.hypot(a[1].x + a[1].width / 2 - cx, a[1].y + a[1].height / 2 - cy)
          - Math.hypot(b[1].x + b[1].width / 2 - cx, b[1].y + b[1].height / 2 - cy))[0][0]""",
        [centre["x"] + centre["width"] / 2, centre["y"] + centre["height"] / 2],
    )
    layouts = "globalThis.__fxviz_layout_v3.nextId"  # layouts asked of the worker so far
    asked = page.evaluate(layouts)
    page.evaluate("document.querySelector('.fxviz').dataset.opening = ''")
    page.locator(".fxviz-graph g.node.fx-module").filter(
        has=page.locator(f"title:text-is('{box}')")
    ).click()
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert page.evaluate(layouts) == asked  # its drawing was laid out before the click
    assert 20 <= page.locator(".fxviz-graph g.node").count() <= 400  # the one group, opened
    assert shown(page.locator(".fxviz-graph g.node").nth(5))
    assert page.locator(".fxviz-overview").is_visible()
    assert page.evaluate(SMALLEST_LABEL_PX) >= 11.9


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_report_follows_the_systems_light_or_dark_setting(offline, tmp_path, scheme):
    page, _ = offline
    page.emulate_media(color_scheme=scheme)
    torch.manual_seed(0)
    path = tmp_path / "theme.html"
    fxviz.report(fxviz.record(TwoLayerNet(), torch.randn(8, 1000)), path, title="TwoLayerNet")
    _open(page, path)
    for _ in range(3):
        page.locator("button[data-action=step]").click()
    _open_legend(page)
    node(page, "linear1").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    backgrounds = [
        page.locator(part).evaluate("e => getComputedStyle(e).backgroundColor")
        for part in ("body", ".fxviz-graph")
    ]
    page_fill = page.locator(".fxviz-graph g.graph polygon").first.evaluate(
        "e => getComputedStyle(e).fill"
    )  # Graphviz's own white page under the graph
    for colour in [*backgrounds, page_fill]:
        assert (sum(map(int, re.findall(r"\d+", colour)[:3])) < 200) == (scheme == "dark"), colour
    readable = {
        "title": page.locator("header h1"),
        "facts": page.locator("header p").first,
        "status": page.locator(".fxviz-status"),
        "button": page.locator("button[data-action=step]"),
        "search": page.locator(".fxviz-search"),
        "legend": page.locator(".fxviz-legend-head").first,
        "inspector key": page.locator(".fxviz-inspector dt").first,
        "inspector value": page.locator(".fxviz-inspector dd").first,
        "table": page.locator(".fxviz-table td").first,
        "edge label": page.locator(".fxviz-graph g.edge text").first,
        "node label": node(page, "clamp").locator("text").first,
    }
    for what, locator in readable.items():
        assert shown(locator), what
        assert contrast(locator) >= 4.5, what
    assert page.evaluate(LABELS_OUTSIDE) == []
    if scheme == "dark":
        screenshot(page, page.locator("body"), "report-dark.png")
