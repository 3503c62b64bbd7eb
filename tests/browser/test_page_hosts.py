"""The page as hosts show it: a Content-Security-Policy that forbids workers, small
windows, the side column's order (inspector first, legend closed until asked for)."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.examples import TwoLayerNet
from tests.browser.conftest import node, shown

pytestmark = pytest.mark.browser

NO_WORKERS = '<meta http-equiv="Content-Security-Policy" content="worker-src \'none\'">'


def _report(tmp_path, name: str, *, head: str = "") -> str:
    torch.manual_seed(0)
    html = fxviz.report(fxviz.record(TwoLayerNet(), torch.randn(8, 1000)))
    assert html.count("<head>") == 1
    path = tmp_path / name
    path.write_text(html.replace("<head>", "<head>" + head, 1), encoding="utf-8")
    return path.as_uri()


def test_a_page_that_forbids_workers_still_draws_the_graph(offline, tmp_path):
    page, _ = offline
    refused = []
    page.on("console", lambda m: refused.append(m.text) if "worker-src" in m.text else None)
    page.goto(_report(tmp_path, "no-workers.html", head=NO_WORKERS))
    node(page, "linear1").wait_for(timeout=60_000)
    assert refused, "the page's policy refused the layout worker"  # the case is real
    assert page.evaluate("globalThis.__fxviz_layout_v3.noWorker") is True  # main thread
    for name in ("x", "linear1", "clamp", "linear2", "output"):
        assert shown(node(page, name)), name
    current = "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent"
    assert page.evaluate(current) == "linear1"  # the run starts on the model's first node
    page.locator("button[data-action=step]").click()  # and the page works as usual
    page.wait_for_function(f"{current} === 'clamp'")


@pytest.mark.parametrize("size", [(1280, 720), (1400, 950)])
def test_the_side_column_shows_the_inspector_first_and_whole(offline, tmp_path, size):
    page, _ = offline
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    page.goto(_report(tmp_path, f"side-{width}.html"))
    page.evaluate("localStorage.removeItem('fxviz.legend.open')")  # a first visit
    page.reload()
    node(page, "linear1").wait_for()
    for _ in range(3):
        page.locator("button[data-action=step]").click()
    node(page, "linear1").click()
    page.wait_for_function("document.querySelector('.fxviz-histogram rect')")
    inspector, legend = page.locator(".fxviz-inspector"), page.locator(".fxviz-legend")
    side = page.locator(".fxviz-side").bounding_box()
    assert inspector.bounding_box()["y"] < legend.bounding_box()["y"]  # inspector first
    assert not page.locator(".fxviz-legend details").evaluate("d => d.open")  # closed
    assert not shown(legend.locator(".fxviz-legend-sample").first)
    assert legend.bounding_box()["height"] < 40  # one line: the inspector keeps the room
    for part in (".fxviz-inspector .fxviz-title", ".fxviz-inspector dl", ".fxviz-histogram"):
        box = page.locator(part).bounding_box()
        assert shown(page.locator(part)), part
        assert side["y"] <= box["y"]
        assert box["y"] + box["height"] <= side["y"] + side["height"] + 1, part  # not cut off
        assert box["x"] + box["width"] <= side["x"] + side["width"] + 1, part
    assert page.locator(".fxviz-side").bounding_box()["x"] + side["width"] <= width  # on screen


class Wide(torch.nn.Module):
    """Eight branches of 30 nodes each: too big to fit readably, not a hairline."""

    def forward(self, x):
        outs = []
        for i in range(8):
            h = x + i
            for _ in range(10):
                h = torch.relu(h * 1.01 + 0.1)
            outs.append(h)
        return torch.stack(outs).sum(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_overview_is_optional_and_themed(offline, tmp_path, scheme):
    page, _ = offline
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size({"width": 1280, "height": 800})
    path = tmp_path / "wide.html"
    fxviz.report(fxviz.record(Wide(), torch.ones(4)), path)
    page.goto(path.as_uri())
    page.evaluate("localStorage.removeItem('fxviz.minimap.hidden')")
    page.reload()
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") != "fit"
    minimap, toggle = page.locator(".fxviz-minimap"), page.locator(".fxviz-minimap-toggle")
    minimap.wait_for(state="visible")  # drawn once the graph is on screen, not before it
    assert shown(minimap)
    graph = page.locator(".fxviz-graph").bounding_box()
    box = minimap.bounding_box()
    assert graph["x"] <= box["x"]
    assert box["x"] + box["width"] <= graph["x"] + graph["width"]
    assert box["y"] + box["height"] <= graph["y"] + graph["height"]
    drawing = minimap.locator("canvas")
    dark_image = drawing.evaluate("c => getComputedStyle(c).filter") != "none"
    assert dark_image == (scheme == "dark")  # no white strip on a dark page
    assert drawing.evaluate(_INKED) > 200  # the graph drawn small, not a blank box
    assert not shown(toggle)
    page.locator(".fxviz-minimap-close").click()  # optional: hidden, and remembered
    assert minimap.count() == 0
    assert shown(toggle)
    page.reload()
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert page.locator(".fxviz-minimap").count() == 0
    page.locator(".fxviz-minimap-toggle").click()
    assert shown(page.locator(".fxviz-minimap"))
    assert page.locator(".fxviz-minimap canvas").evaluate(_INKED) > 200  # drawn when shown


# Pixels of a canvas drawn in (opaque, not near white: Graphviz's background is white)
_INKED = """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && Math.min(d[i], d[i + 1], d[i + 2]) < 200) n++;
  return n; }"""


def test_no_overview_over_a_graph_that_fits(offline, tmp_path):
    page, _ = offline
    page.goto(_report(tmp_path, "small.html"))
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "fit"
    assert page.locator(".fxviz-minimap").count() == 0
    assert not shown(page.locator(".fxviz-minimap-toggle"))
