"""The widget in a real JupyterLab: drawn, clicked, stepped, collapsed; big graphs stay usable."""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    INSPECTOR_MID_WORD_BREAKS,
    INSPECTOR_SQUEEZED,
    LABELS_OUTSIDE,
    SMALLEST_LABEL_PX,
    contrast,
    open_and_run,
    run_in_kernel,
    screenshot,
    set_theme,
    shown,
    write_notebook,
)

pytestmark = pytest.mark.browser


def _node(page, name: str):
    return page.locator(".fxviz-graph g.node").filter(has=page.locator(f"title:text-is('{name}')"))


def test_debugger_draws_inspects_and_steps(browser, lab):
    write_notebook(
        lab["root"],
        "debug.ipynb",
        [
            "import torch, fxviz\nfrom fxviz.examples import TwoLayerNet\ntorch.manual_seed(0)",
            "app = fxviz.debug(TwoLayerNet(), torch.randn(64, 1000))\napp",
        ],
    )
    page = open_and_run(browser, lab, "debug.ipynb")
    widget = page.locator(".fxviz").first
    _node(page, "linear1").wait_for()
    assert page.locator(".fxviz-graph g.fxviz-current title").text_content() == "linear1"

    _node(page, "linear1").click()
    inspector = page.locator(".fxviz-inspector")
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'linear1'"
    )
    assert "64×100 f32" in inspector.inner_text()  # the shape, before it even ran

    page.locator("button[data-action=step]").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent === 'clamp'"
    )
    assert (
        page.locator(".fxviz-status")
        .inner_text()
        .startswith("stopped at 'clamp' (step) — 2/5 nodes")
    )

    widget.focus()
    page.keyboard.press("n")  # keyboard: step
    page.wait_for_function(
        "document.querySelector('.fxviz-graph g.fxviz-current title')?.textContent === 'linear2'"
    )
    assert "3/5 nodes" in page.locator(".fxviz-status").inner_text()
    _node(page, "linear1").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector')?.textContent.includes('mean')"
    )
    assert page.locator(".fxviz-histogram rect").count() == 20
    screenshot(page, widget, "debugger.png")


def test_nan_breakpoint_and_collapsing_modules(browser, lab):
    write_notebook(
        lab["root"],
        "nan.ipynb",
        [
            "import torch, fxviz\nfrom torch import nn\n"
            "class Block(nn.Module):\n"
            "    def __init__(self):\n        super().__init__(); self.lin = nn.Linear(8, 8)\n"
            "    def forward(self, x):\n        return torch.log(self.lin(x))\n"
            "model = nn.Sequential(*[Block() for _ in range(3)])",
            "app = fxviz.debug(model, torch.randn(4, 8), depth=1)\napp",
        ],
    )
    page = open_and_run(browser, lab, "nan.ipynb")
    box = _node(page, "module__0")
    box.wait_for()
    assert page.locator(".fxviz-graph g.fx-module").count() == 3
    page.locator("button[data-action=break_nan]").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-status')?.textContent.includes('breakpoints: NaN/Inf')"
    )
    assert page.locator("button[data-action=break_nan]").get_attribute("aria-pressed") == "true"
    page.locator("button[data-action=continue]").click()
    page.wait_for_function(  # the node that produced the NaN, named, and NaN/Inf in words
        "document.querySelector('.fxviz-status')?.textContent"
        ".startsWith(\"stopped after 'log' produced NaN/Inf\")"
    )
    assert shown(page.locator(".fxviz-graph g.fxviz-nonfinite .fxviz-marker-nonfinite").first)
    page.wait_for_function(  # the inspector opens on the node that made the NaN
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'log'"
    )
    box.click()  # expand the first module: its nodes are drawn, the others stay boxes
    _node(page, "_0_lin").wait_for()
    assert page.locator(".fxviz-graph g.fx-module").count() == 2
    assert page.locator(".fxviz-graph g.fxviz-nonfinite title").first.text_content() == "log"
    screenshot(page, page.locator(".fxviz").first, "nan-breakpoint.png")


def test_a_3000_node_graph_lays_out_without_freezing_the_page(browser, lab):
    write_notebook(
        lab["root"],
        "big.ipynb",
        [
            "import torch, fxviz\nfrom torch import nn\n"
            "class Block(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.a = nn.Linear(4, 4); self.b = nn.Linear(4, 4); self.n = nn.LayerNorm(4)\n"
            "    def forward(self, x):\n"
            "        h = torch.relu(self.a(x)) * 2 + 1\n"
            "        return self.n(x + torch.tanh(self.b(h)) - 0.5)\n"
            "gm = fxviz.trace(nn.Sequential(*[Block() for _ in range(340)]))\n"
            "view = fxviz.show(gm)\nview",
            "len(gm.graph.nodes), view.depth",
        ],
    )
    page = open_and_run(browser, lab, "big.ipynb")
    page.locator(".fxviz-graph g.fx-module").first.wait_for()
    # opened collapsed, the 340 blocks in groups of 4 (a level wider than 300 is grouped)
    assert page.locator(".fxviz-graph g.fx-module").count() == 86
    page.evaluate(
        "window.__gaps = []; window.__last = performance.now();"
        "window.__beat = setInterval(() => { const now = performance.now();"
        " window.__gaps.push(now - window.__last); window.__last = now; }, 50);"
    )
    run_in_kernel(page, "view.depth = None  # draw all ~3,000 nodes")
    page.wait_for_function(
        "document.querySelectorAll('.fxviz-graph g.node').length > 3000", timeout=180_000
    )
    longest = page.evaluate("clearInterval(window.__beat); Math.max(...window.__gaps)")
    print(f"3,000-node layout: longest main-thread gap {longest:.0f} ms")
    assert page.locator(".fxviz-graph g.fx-module").count() == 0
    screenshot(page, page.locator(".fxviz").first, "big-graph.png")

    # Parts of the graph far from the panel are not painted (each repaint of 40,000 SVG
    # elements costs tens of ms): what is in the panel, and what the view moves to, is.
    far = "_339_n"  # the last block's LayerNorm, a long way down
    _node(page, far).wait_for(state="hidden", timeout=10_000)  # not painted, once the view is open
    assert page.evaluate(UNPAINTED_IN_PANEL) == []
    search = page.locator(".fxviz-search")
    search.fill(far)
    search.press("Enter")
    page.wait_for_function(f"({IN_PANEL})('{far}')", timeout=10_000)
    assert shown(_node(page, far))
    assert page.evaluate(UNPAINTED_IN_PANEL) == []
    page.locator(".fxviz-fit").click()  # the whole graph in the panel: every node painted
    page.wait_for_timeout(200)
    assert page.evaluate(UNPAINTED_IN_PANEL) == []
    assert page.evaluate(
        "[...document.querySelectorAll('.fxviz-graph g.node')].every((g) => g.checkVisibility())"
    )


def _grid_drawn_whole(browser, lab, layers: str, forward: str, blocks: int):
    """A notebook's page showing, drawn whole, a graph of 40 stacks of ``blocks`` blocks
    side by side (a block: ``layers`` made in its ``__init__``, ``forward`` its output of
    ``x``), summed: about as wide as it is tall."""
    write_notebook(lab["root"], "grid.ipynb", [_grid(layers, forward, blocks)])
    page = open_and_run(browser, lab, "grid.ipynb")
    page.locator(".fxviz-graph g.fx-module").first.wait_for()  # opened collapsed
    run_in_kernel(page, "view.depth = None  # every node")
    return page


def _grid(layers: str, forward: str, blocks: int) -> str:
    return (
        "import torch, fxviz\nfrom torch import nn\n"
        "class Block(nn.Module):\n"
        f"    def __init__(self):\n        super().__init__()\n        {layers}\n"
        f"    def forward(self, x):\n        return {forward}\n"
        "class Grid(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        f"        self.branches = nn.ModuleList(nn.Sequential(*[Block() for _ in range({blocks})])"
        " for _ in range(40))\n"
        "    def forward(self, x):\n"
        "        return torch.stack([b(x) for b in self.branches]).sum(0)\n"
        "view = fxviz.show(fxviz.trace(Grid()), depth=1)\nview"
    )


# The share of the graph's nodes that the overview shows: each node's place (its label's
# anchor, in Graphviz's coordinates, moved as the graph group is) is mapped into the
# overview canvas, where the graph's background polygon (Graphviz's viewBox) fills it
# "contain"; a node is shown when a pixel within 2 px of it is not the white background.
OVERVIEW_SHOWS = """() => {
  const canvas = document.querySelector('.fxviz-minimap canvas');
  const graph = document.querySelector('.fxviz-graph g.graph');
  const [, tx, ty] = /translate\\(\\s*([-\\d.e+]+)[\\s,]+([-\\d.e+]+)/.exec(graph.getAttribute('transform'));
  const n = graph.querySelector('polygon').getAttribute('points').trim().split(/[\\s,]+/).map(Number);
  const xs = n.filter((_, i) => i % 2 === 0).map((x) => x + Number(tx));
  const ys = n.filter((_, i) => i % 2 === 1).map((y) => y + Number(ty));
  const vb = { x: Math.min(...xs), y: Math.min(...ys), w: Math.max(...xs) - Math.min(...xs), h: Math.max(...ys) - Math.min(...ys) };
  const W = canvas.width, H = canvas.height;
  const scale = Math.min(W / vb.w, H / vb.h);
  const left = (W - vb.w * scale) / 2, top = (H - vb.h * scale) / 2;
  const data = canvas.getContext('2d').getImageData(0, 0, W, H).data;
  const inked = (x, y) => { if (x < 0 || y < 0 || x >= W || y >= H) return false;
    const i = 4 * (y * W + x); return data[i + 3] > 0 && Math.min(data[i], data[i + 1], data[i + 2]) < 245; };
  let nodes = 0, shown = 0;
  for (const t of graph.querySelectorAll('g.node > text:first-of-type, g.node a > text:first-of-type')) {
    const px = Math.round(left + (Number(t.getAttribute('x')) + Number(tx) - vb.x) * scale);
    const py = Math.round(top + (Number(t.getAttribute('y')) + Number(ty) - vb.y) * scale);
    nodes++;
    let found = false;
    for (let dy = -2; dy <= 2 && !found; dy++) for (let dx = -2; dx <= 2 && !found; dx++) found = inked(px + dx, py + dy);
    if (found) shown++;
  }
  return { nodes, shown };
}"""


def test_the_overview_of_a_big_graph_shows_all_of_it(browser, lab):
    """A big graph drawn whole keeps most of its tiles out of the page at first (they go
    back in a few a frame); the overview, drawn meanwhile, still shows every part."""
    layers = "self.a = nn.Linear(4, 4); self.n = nn.LayerNorm(4)"
    page = _grid_drawn_whole(browser, lab, layers, "self.n(x + torch.relu(self.a(x)))", 12)
    page.locator(".fxviz-minimap canvas").wait_for(state="visible", timeout=120_000)
    page.wait_for_function(  # every tile back in the page by now
        "document.querySelectorAll('.fxviz-graph g.node').length"
        " >= Number(document.querySelector('.fxviz').dataset.nodes)",
        timeout=30_000,
    )
    found = page.evaluate(OVERVIEW_SHOWS)
    screenshot(page, page.locator(".fxviz-graph"), "overview-wide.png")
    assert found["nodes"] > 1900  # every node of the 40 x 12 blocks
    assert found["shown"] >= 0.98 * found["nodes"], found  # no part of the graph left out


# The box of the module named `name` (its title's text), on the page, beside the panel's.
MODULE_BOX = """(name) => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const g = [...document.querySelectorAll('.fxviz-graph g.node.fx-module')]
    .find((n) => n.querySelector('title').textContent === name);
  const r = g?.querySelector('polygon, path')?.getBoundingClientRect();
  return r && { top: r.top - panel.top, bottom: r.bottom - panel.top, left: r.left - panel.left,
    right: r.right - panel.left, height: panel.height, width: panel.width };
}"""


def test_a_frame_closed_in_a_wide_graph_leaves_its_box_in_sight(browser, lab):
    """Closing a module's frame keeps the nodes in view still where it can; in a graph of
    40 modules side by side that put the box it closed into far below the panel."""
    layers = "self.a = nn.Linear(4, 4); self.b = nn.Linear(4, 4)"
    page = _grid_drawn_whole(browser, lab, layers, "self.b(torch.relu(self.a(x)) * 2 + 1)", 8)
    page.locator(".fxviz-graph g.cluster text", has_text="branches.10.0 · Block").first.wait_for()
    page.wait_for_timeout(500)
    label = page.locator(".fxviz-graph g.cluster text", has_text="branches.10.0 · Block").first
    label.dblclick()
    page.wait_for_function(
        "document.querySelector('.fxviz').dataset.opening === 'in place'"
        " && document.querySelector('.fxviz-graph g.fx-module')",
        timeout=60_000,
    )
    page.wait_for_timeout(300)
    box = page.evaluate(MODULE_BOX, "module__branches__10__0")
    assert box is not None
    assert box["top"] >= 0, box
    assert box["bottom"] <= box["height"], box  # in sight, not below the panel
    assert box["left"] >= 0, box
    assert box["right"] <= box["width"], box


# Whether node `title`'s box lies inside the graph panel, shown.
IN_PANEL = """(title) => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const g = [...document.querySelectorAll('.fxviz-graph g.node')]
    .find((n) => n.querySelector('title').textContent === title);
  if (!g || !g.checkVisibility()) return false;
  const r = g.getBoundingClientRect();
  return r.width > 0 && r.left >= panel.left && r.right <= panel.right
    && r.top >= panel.top && r.bottom <= panel.bottom;
}"""

# Nodes not painted although the panel shows where they are: every node's place is read
# from the layout's own text (Graphviz's `x`/`y`), so a hidden node is measured too.
UNPAINTED_IN_PANEL = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const graph = document.querySelector('.fxviz-graph g.graph');
  const ctm = graph.getScreenCTM();
  const out = [];
  for (const g of document.querySelectorAll('.fxviz-graph g.node')) {
    const t = g.querySelector('text');
    if (!t) continue;
    const p = new DOMPoint(Number(t.getAttribute('x')), Number(t.getAttribute('y'))).matrixTransform(ctm);
    const inside = p.x > panel.left && p.x < panel.right && p.y > panel.top && p.y < panel.bottom;
    if (inside && !g.checkVisibility()) out.push(g.querySelector('title').textContent);
  }
  return out;
}"""


def _in_panel(page, title: str) -> bool:
    return page.evaluate(f"({IN_PANEL})('{title}')")


# The first widget lies wholly above the host's status bar (or the window's bottom).
WHOLE_IN_VIEW = """() => {
  const box = document.querySelector('.fxviz').getBoundingClientRect();
  const bar = document.querySelector('#jp-main-statusbar');
  const bottom = bar && bar.offsetHeight ? bar.getBoundingClientRect().top : innerHeight;
  return box.top >= 0 && box.bottom <= bottom;
}"""

RISKY = (  # notebooks/02-step-through-debugging.ipynb's model
    "import torch, fxviz\nfrom torch import nn\ntorch.manual_seed(0)\n"
    "class Risky(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__(); self.a = nn.Linear(8, 8); self.b = nn.Linear(8, 8)\n"
    "    def forward(self, x):\n"
    "        h = torch.relu(self.a(x))\n"
    "        return torch.log(self.b(h)).mean(dim=-1)\n"
    "model, x = Risky(), torch.randn(4, 8)"
)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_notebook_02_debugger_reads_well_in_each_front_end_and_theme(browser, jupyter, theme):
    name = f"risky-{theme}.ipynb"
    write_notebook(jupyter["root"], name, [RISKY, "app = fxviz.debug(model, x)\napp"])
    page = open_and_run(browser, jupyter, name)
    page.set_viewport_size({"width": 1280, "height": 800})
    if theme == "dark":
        set_theme(page, "dark")
    widget = page.locator(".fxviz").first
    widget.locator(".fxviz-graph g.node").first.wait_for()
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening")
    page.wait_for_timeout(300)  # the theme's CSS settles
    background = widget.locator(".fxviz-graph").evaluate("e => getComputedStyle(e).backgroundColor")
    page_fill = widget.locator(".fxviz-graph g.graph polygon").first.evaluate(
        "e => getComputedStyle(e).fill"
    )  # Graphviz's own white page under the graph
    assert (background != "rgb(255, 255, 255)") == (theme == "dark")
    assert (page_fill != "rgb(255, 255, 255)") == (theme == "dark")
    assert page.evaluate(SMALLEST_LABEL_PX) >= 11.9
    assert page.evaluate(LABELS_OUTSIDE) == []
    for part in (".fxviz-legend", ".fxviz-inspector", ".fxviz-status", ".fxviz-buttons"):
        assert shown(widget.locator(part)), part
    for part in (  # readable text on the theme's own background, measured
        ".fxviz-status", ".fxviz-inspector dt", ".fxviz-inspector dd", ".fxviz-btn",
        ".fxviz-legend summary", ".fxviz-help", ".fxviz-graph g.node text",
    ):  # fmt: skip
        assert contrast(widget.locator(part).first) >= 4.5, (part, theme)
    status, buttons = widget.locator(".fxviz-status"), widget.locator(".fxviz-buttons")
    assert abs(status.bounding_box()["y"] - buttons.bounding_box()["y"]) < 40  # with the toolbar
    widget.locator("button[data-action=break_nan]").click()
    widget.locator("button[data-action=continue]").click()
    page.wait_for_function(
        "document.querySelector('.fxviz-status')?.textContent.includes('produced NaN/Inf')"
    )
    page.wait_for_function(
        "document.querySelector('.fxviz-inspector .fxviz-title')?.textContent === 'log'"
    )
    inspector = widget.locator(".fxviz-inspector")
    box, graph = inspector.bounding_box(), widget.locator(".fxviz-graph").bounding_box()
    assert box["x"] >= graph["x"] + graph["width"]
    assert box["x"] + box["width"] <= 1280
    assert page.evaluate(INSPECTOR_SQUEEZED) == []
    assert page.evaluate(INSPECTOR_MID_WORD_BREAKS) == []  # whole numbers, whole names
    front = "lab" if "/lab/" in page.url else "notebook7"
    # the whole widget in the picture, its table clear of the host's status bar
    page.set_viewport_size({"width": 1280, "height": 1200})
    widget.scroll_into_view_if_needed()
    page.wait_for_function(WHOLE_IN_VIEW)
    screenshot(page, widget, f"debugger-{front}-{theme}.png")
    if theme == "dark":  # leave the server's theme as found
        set_theme(page, "light")
    page.close()


def test_a_20000_node_flat_chain_opens_in_groups_in_jupyterlab(browser, lab):
    write_notebook(
        lab["root"],
        "chain.ipynb",
        [
            "import torch, fxviz\ngraph = torch.fx.Graph()\nx = graph.placeholder('x')\n"
            "for i in range(20_000):\n"
            "    x = graph.call_function(torch.relu if i % 2 else torch.neg, (x,))\n"
            "graph.output(x)\ngm = torch.fx.GraphModule(torch.nn.Module(), graph)\n"
            "view = fxviz.show(gm)\nview",
        ],
    )
    page = open_and_run(browser, lab, "chain.ipynb")
    boxes = page.locator(".fxviz-graph g.fx-module")
    boxes.first.wait_for(timeout=120_000)
    assert 50 <= boxes.count() <= 120  # drawn: no "Maximum call stack size exceeded"
    assert page.locator(".fxviz-error-box").inner_text() == ""
    boxes.first.click()  # one group opens, the others stay boxes
    _node(page, "neg_1").wait_for()
    assert shown(_node(page, "neg_1"))
    assert page.evaluate(LABELS_OUTSIDE) == []
    # search's index comes from the kernel on first use; the units came after the first
    # paint: a node deep inside a closed group is found, and its group lights up
    page.locator(".fxviz-search").fill("relu_9999")
    page.wait_for_function(
        "document.querySelector('.fxviz-match-count')?.textContent === '1 match'"
    )
    assert page.locator(".fxviz-graph g.fxviz-match.fx-module").count() == 1
    page.close()
