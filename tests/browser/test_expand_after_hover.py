"""A module box the pointer rests on, or is pressed on, is laid out open before the click
(js/peek.js): the click shows the module opened at once (or as soon as the kernel answers
the press), in place, and the kernel's DOT for it, when it comes, is not laid out or drawn
again."""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    LABELS_OUTSIDE,
    open_and_run,
    run_in_kernel,
    screenshot,
    write_notebook,
)

pytestmark = pytest.mark.browser

BUILD = """import torch, fxviz
from torch import nn
model = nn.Sequential(
    *[nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU()) for _ in range(60)])
view = fxviz.show(fxviz.trace(model), depth=1)
view"""

# The topmost module box whose whole box is inside the graph panel: its title.
TOP_BOX = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const inside = [...document.querySelectorAll('.fxviz-graph g.node.fx-module')].map((g) =>
    [g, g.getBoundingClientRect()]).filter(([, r]) => r.width > 0 && r.top >= panel.top
    && r.bottom <= panel.bottom && r.left >= panel.left && r.right <= panel.right);
  inside.sort((a, b) => a[1].top - b[1].top);
  return inside[0]?.[0].querySelector('title').textContent ?? null; }"""
TITLES = (
    "() => [...document.querySelectorAll('.fxviz-graph g.node > title')].map(t => t.textContent)"
)
# Each of `titles`: shown, wholly inside the graph panel, its label's height in px.
SEEN = """(titles) => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const want = new Set(titles);
  return [...document.querySelectorAll('.fxviz-graph g.node')]
    .filter((g) => want.has(g.querySelector('title').textContent)).map((g) => {
      const r = g.getBoundingClientRect();
      const text = g.querySelector('text');
      return { title: g.querySelector('title').textContent,
        shown: g.checkVisibility({ opacityProperty: true, visibilityProperty: true })
          && r.width > 0 && r.height > 0,
        inside: r.left >= panel.left - 1 && r.right <= panel.right + 1
          && r.top >= panel.top - 1 && r.bottom <= panel.bottom + 1,
        px: text ? text.getBoundingClientRect().height : 0 }; }); }"""
# From now on, the DOT of every layout the worker is asked for is kept (in order).
RECORD_LAYOUTS = """() => { const s = globalThis.__fxviz_layout_v3;
  const post = s.worker.postMessage.bind(s.worker);
  s.asked = []; s.worker.postMessage = (m) => { s.asked.push(m.dot); post(m); }; }"""
# How many of the layouts asked since RECORD_LAYOUTS were of a DOT laid out before.
LAID_OUT_AGAIN = """() => { const asked = globalThis.__fxviz_layout_v3.asked;
  return asked.length - new Set(asked).size; }"""
STATUS = "document.querySelector('.fxviz-status')?.textContent"
RECT = "(g) => { const r = g.getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom]; }"


def _opened_view(browser, lab, name: str, cells: list[str]):
    """The page of a notebook running ``cells``, once the widget has drawn its first view;
    the topmost module box wholly inside the panel (a locator), its title and the frame
    it opens into."""
    write_notebook(lab["root"], name, cells)
    page = open_and_run(browser, lab, name)
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening", timeout=120_000)
    title = page.evaluate(TOP_BOX)
    assert title is not None
    box = page.locator(".fxviz-graph g.node.fx-module").filter(
        has=page.locator(f"title:text-is('{title}')")
    )
    frame = next(c[6:] for c in box.get_attribute("class").split() if c.startswith("opens-"))
    return page, box, title, frame


def _frame(page, title: str):
    """The drawn frame (a module opened) titled ``title``."""
    return page.locator(".fxviz-graph g.cluster").filter(
        has=page.locator(f"title:text-is('{title}')")
    )


def _redrawn(page, act) -> None:
    """Do ``act()`` and wait until the widget shows a new SVG, opened."""
    old = page.evaluate_handle("document.querySelector('.fxviz-graph svg')")
    act()
    page.wait_for_function(
        "(old) => { const s = document.querySelector('.fxviz-graph svg');"
        " return s && s !== old && document.querySelector('.fxviz').dataset.opening; }",
        arg=old,
    )


def test_a_hovered_module_opens_at_once_and_is_not_laid_out_again(browser, lab):
    page, box, _, _ = _opened_view(browser, lab, "hover.ipynb", [BUILD])
    before = set(page.evaluate(TITLES))
    cached = page.evaluate("() => globalThis.__fxviz_layout_v3.cache.count")
    box.hover()  # the pointer rests on the box: the page peeks at it and lays it out
    page.wait_for_function(
        f"() => globalThis.__fxviz_layout_v3.cache.count > {cached}", timeout=30_000
    )
    page.evaluate(RECORD_LAYOUTS)
    _redrawn(page, box.click)
    _opened_from_the_peek(page, before)
    page.close()


@pytest.mark.parametrize("server", ["lab", "lab_nodelay"])
def test_a_module_pressed_without_resting_on_it_opens_from_the_press(browser, server, request):
    """Also under a server with ``fxviz.server.NoDelayConnection`` (the README's opt-in):
    every message still comes, in order."""
    lab = request.getfixturevalue(server)
    page, box, _, _ = _opened_view(browser, lab, "press.ipynb", [BUILD])
    before = set(page.evaluate(TITLES))
    page.evaluate(RECORD_LAYOUTS)
    left, right, top, bottom = box.evaluate(RECT)

    def click() -> None:  # onto the box and pressed at once: no rest for a hover to peek
        page.mouse.move((left + right) / 2, (top + bottom) / 2)
        page.mouse.down()
        page.mouse.up()

    _redrawn(page, click)
    _opened_from_the_peek(page, before)
    page.close()


# The module box wholly inside the graph panel nearest the panel's centre: its title.
NEAREST_BOX = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const x = panel.left + panel.width / 2, y = panel.top + panel.height / 2;
  const inside = [...document.querySelectorAll('.fxviz-graph g.node.fx-module')].map((g) =>
    [g, g.getBoundingClientRect()]).filter(([, r]) => r.width > 0 && r.top >= panel.top
    && r.bottom <= panel.bottom && r.left >= panel.left && r.right <= panel.right);
  const away = ([, r]) => Math.hypot(r.left + r.width / 2 - x, r.top + r.height / 2 - y);
  inside.sort((a, b) => away(a) - away(b));
  return inside[0]?.[0].querySelector('title').textContent ?? null; }"""
# The worker is idle and has been asked for `n` layouts at least.
LAID_OUT = """(n) => { const s = globalThis.__fxviz_layout_v3;
  return s.nextId > n && s.pending.size === 0 && !(s.running?.size); }"""


def _rested_view(browser, lab, name: str, cells: list[str]):
    """The page of a notebook running ``cells`` once the widget has drawn its first view
    and the page has rested (a few layouts made after it: the boxes in view opened
    ahead); the box nearest the panel's centre (a locator) and its title."""
    write_notebook(lab["root"], name, cells)
    page = open_and_run(browser, lab, name)
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening", timeout=120_000)
    page.wait_for_timeout(1500)  # nothing pointed at, nothing pressed: only the page's rest
    page.wait_for_function(LAID_OUT, arg=1, timeout=30_000)
    title = page.evaluate(NEAREST_BOX)
    assert title is not None
    box = page.locator(".fxviz-graph g.node.fx-module").filter(
        has=page.locator(f"title:text-is('{title}')")
    )
    return page, box, title


def test_a_module_clicked_without_pointing_at_it_first_opens_from_a_layout_made_ahead(browser, lab):
    """A box clicked with no rest of the pointer and no press before (a click event
    alone): the page laid the opening of the boxes in view out once it was idle, so the
    click shows the module opened at once, from that layout."""
    # modules two nodes long: one opened mid-panel fits below its box (the view keeps what
    # is above it still and moves up for a frame's first row only)
    page, box, _ = _rested_view(browser, lab, "ahead.ipynb", [SHORT])
    before = set(page.evaluate(TITLES))
    page.evaluate(RECORD_LAYOUTS)
    _redrawn(page, lambda: box.dispatch_event("click"))  # no pointer over it, no press
    _opened_from_the_peek(page, before, nodes=2)
    page.close()


NESTED = """import torch, fxviz
from torch import nn
model = nn.Sequential(*[nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 4))
                        for _ in range(60)])
view = fxviz.show(fxviz.trace(model), depth=1)
view"""


def test_a_module_opened_ahead_then_changed_in_the_kernel_opens_as_the_kernel_has_it(browser, lab):
    """The kernel opens a module inside a closed box after the page opened that box
    ahead: nothing drawn changes, but the box's opening does. A click on it shows the
    module as the kernel has it now, from the first frame (never the layout made before,
    then another)."""
    page, box, title = _rested_view(browser, lab, "stale.ipynb", [NESTED])
    run_in_kernel(  # the first module inside the box, opened while the box stays closed
        page,
        f"__d = view.dot; view.expanded = [view._boxes[{title!r}] + '.0']\n"
        "view.status = 'unchanged' if view.dot == __d else 'changed'",
    )
    page.wait_for_function(f"{STATUS} === 'unchanged'")
    _redrawn(page, lambda: box.dispatch_event("click"))
    first = page.evaluate_handle("document.querySelector('.fxviz-graph svg')")
    shown = set(page.evaluate(MODULE_TITLES))  # the boxes the first view after the click has
    # the boxes the kernel's view has (its answer to the click comes before this status)
    run_in_kernel(page, "view.status = ' '.join(sorted(view._boxes))")
    page.wait_for_function(f"{STATUS}.startsWith('module__')")
    page.wait_for_timeout(500)  # a draw the kernel's answer would start has run by now
    assert page.evaluate("(s) => document.querySelector('.fxviz-graph svg') === s", first)
    assert shown == set(page.evaluate(STATUS).split()), shown  # the inner module is open
    assert page.locator(".fxviz-error-box").evaluate("e => e.textContent") == ""
    page.close()


def _opened_from_the_peek(page, before: set[str], nodes: int = 4) -> None:
    """The view just drawn came from a peek, the kernel's DOT for the click is not laid
    out or drawn again (the page then opens the new view's boxes in view ahead: other
    layouts), and the opened module is shown, in place, inside the panel, readable."""
    assert page.evaluate("document.querySelector('.fxviz').dataset.drawn") == "peeked"
    drawn = page.evaluate_handle("document.querySelector('.fxviz-graph svg')")
    # the kernel answers the click with the same DOT, then (in order) this status line
    run_in_kernel(page, "view.status = 'after the click'")
    page.wait_for_function(f"{STATUS} === 'after the click'")
    page.wait_for_timeout(500)  # a draw the echo would start has run by now
    assert page.evaluate("(s) => document.querySelector('.fxviz-graph svg') === s", drawn)
    assert page.evaluate(LAID_OUT_AGAIN) == 0  # no layout for the echo
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "in place"
    # what a person sees: the module's own nodes, on screen, inside the panel, readable
    inner = [t for t in page.evaluate(TITLES) if t not in before]
    assert len(inner) >= nodes, inner
    seen = page.evaluate(SEEN, inner)
    assert all(s["shown"] and s["inside"] for s in seen), seen
    assert all(s["px"] >= 10 for s in seen if s["px"]), seen
    assert page.evaluate(LABELS_OUTSIDE) == []
    assert page.evaluate(STATUS) == "after the click"  # the widget did not fail
    assert page.locator(".fxviz-error-box").evaluate("e => e.textContent") == ""


# The top centre of the frame titled `title`, on the page.
FRAME_TOP = """(title) => {
  const g = [...document.querySelectorAll('.fxviz-graph g.cluster')]
    .find((c) => c.querySelector('title').textContent === title);
  const r = g.querySelector('polygon, path').getBoundingClientRect();
  return [r.left + r.width / 2, r.top]; }"""
# The top and bottom of the first row of nodes inside the frame titled `title`, on the page.
FIRST_ROW = """(title) => {
  const frame = [...document.querySelectorAll('.fxviz-graph g.cluster')]
    .find((c) => c.querySelector('title').textContent === title)
    .querySelector('polygon, path').getBoundingClientRect();
  const inside = [...document.querySelectorAll('.fxviz-graph g.node')]
    .map((g) => g.getBoundingClientRect()).filter((r) => r.left >= frame.left
      && r.right <= frame.right && r.top >= frame.top && r.bottom <= frame.bottom);
  const first = inside.reduce((a, b) => (b.top < a.top ? b : a));
  return [first.top, first.bottom]; }"""
# The top centre of the module box that opens into frame `title`, on the page.
BOX_TOP = """(title) => {
  const g = [...document.querySelectorAll('.fxviz-graph g.node.fx-module')]
    .find((n) => n.classList.contains('opens-' + title));
  const r = g.querySelector('polygon, path').getBoundingClientRect();
  return [r.left + r.width / 2, r.top]; }"""


def _still_above(before: dict, after: dict, top: float) -> None:
    """Every node in view ``before`` (centres by title) above ``top`` (a page y), and
    there is one, is where it was ``after`` (within 2 px)."""
    above = [t for t, (_, y) in before.items() if y < top]
    assert above, before  # the case: something in view above the module
    assert all(t in after for t in above), (before, after)
    moved = {t: (after[t][0] - before[t][0], after[t][1] - before[t][1]) for t in above}
    assert all(abs(dx) <= 2 and abs(dy) <= 2 for dx, dy in moved.values()), moved


def test_a_closed_module_leaves_its_box_where_its_frame_was(browser, lab):
    page, box, title, frame = _opened_view(browser, lab, "close.ipynb", [BUILD])
    _redrawn(page, box.click)
    page.wait_for_timeout(500)  # the kernel's echo of the click, if any, has come
    top = page.evaluate(FRAME_TOP, frame)  # where the person looks: not the graph's top
    label = _frame(page, frame).locator("text").first
    row = page.evaluate(FIRST_ROW, frame)
    before = page.evaluate(CENTRES)
    _redrawn(page, label.dblclick)
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "in place"
    x, y = page.evaluate(BOX_TOP, frame)
    assert abs(x - top[0]) <= 3, (top, (x, y))
    # the box takes the frame's top: between the frame's top edge and its first row's top
    assert top[1] - 3 <= y <= row[0] + 3, (top, row, (x, y))
    _still_above(before, page.evaluate(CENTRES), top[1])
    seen = page.evaluate(SEEN, [title])
    assert all(s["shown"] and s["inside"] and s["px"] >= 10 for s in seen), seen
    page.close()


WIDE = """import torch, fxviz
from torch import nn

class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(4, 4) for _ in range(4))
    def forward(self, x):
        return self.a(x) + self.b(x) + self.c(x) + self.d(x)

model = nn.Sequential(*[Wide() for _ in range(60)])
view = fxviz.show(fxviz.trace(model), depth=1)
view"""
PANEL = (
    "() => { const r = document.querySelector('.fxviz-graph').getBoundingClientRect();"
    " return [r.left, r.right, r.top, r.bottom]; }"
)


def test_a_module_opened_at_the_panels_edge_is_drawn_inside_it(browser, lab):
    page, box, _, frame = _opened_view(browser, lab, "edge.ipynb", [WIDE])
    left = page.evaluate(PANEL)[0]
    _, _, box_top, box_bottom = box.evaluate(RECT)
    # drag the graph (from empty space beside the box) until the box touches the left side
    y = (box_top + box_bottom) / 2
    for _ in range(6):
        shift = box.evaluate(RECT)[0] - (left + 2)
        if abs(shift) <= 6:
            break
        start = box.evaluate(RECT)[0] - 5
        page.mouse.move(start, y)
        page.mouse.down()
        page.mouse.move(start - shift, y, steps=8)
        page.mouse.up()
    assert abs(box.evaluate(RECT)[0] - (left + 2)) <= 6
    _redrawn(page, box.click)
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "in place"
    cluster = _frame(page, frame).locator("polygon, path").first
    f_left, f_right, f_top, _ = cluster.evaluate(RECT)
    p_left, p_right, _, _ = page.evaluate(PANEL)
    assert f_right - f_left <= p_right - p_left  # it fits: then all of it is shown
    assert f_left >= p_left - 1, (f_left, p_left)
    assert f_right <= p_right + 1, (f_right, p_right)
    # at the height the box was: the frame's top edge above it, its first row not
    assert f_top - 3 <= box_top <= page.evaluate(FIRST_ROW, frame)[0] + 3, (f_top, box_top)
    page.close()


# Modules two nodes long: one opened leaves room in the panel for what was below it.
SHORT = BUILD.replace(", nn.Linear(4, 4), nn.ReLU())", ")")
# Every node wholly inside the graph panel: its centre on the page, by title.
CENTRES = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  return Object.fromEntries([...document.querySelectorAll('.fxviz-graph g.node')].map((g) =>
    [g.querySelector('title').textContent, g.getBoundingClientRect()]).filter(([, r]) =>
    r.width > 0 && r.left >= panel.left && r.right <= panel.right && r.top >= panel.top
    && r.bottom <= panel.bottom).map(([t, r]) => [t, [r.left + r.width / 2, r.top + r.height / 2]])); }"""


def test_opening_a_module_leaves_the_rest_of_the_view_in_place(browser, lab):
    """What was above the box stays where it was; what was below moves straight down to
    make room for the opened module, never sideways."""
    page, box, title, frame = _opened_view(browser, lab, "steady.ipynb", [SHORT])
    before = page.evaluate(CENTRES)
    box_top = box.evaluate(RECT)[2]
    below = [t for t, (_, y) in before.items() if y > box_top and t != title]
    _redrawn(page, box.click)
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "in place"
    after = page.evaluate(CENTRES)
    _still_above(before, after, box_top)
    moved = {
        t: [after[t][0] - before[t][0], after[t][1] - before[t][1]] for t in below if t in after
    }
    assert moved, (before, after)  # some of what was below is still in view
    assert all(abs(dx) <= 2 and dy > 0 for dx, dy in moved.values()), moved
    # the module opens at the height its box was: its frame's top edge above, its first row not
    f_top = page.evaluate(FRAME_TOP, frame)[1]
    assert f_top - 3 <= box_top <= page.evaluate(FIRST_ROW, frame)[0] + 3, (f_top, box_top)
    page.close()


GPT2 = """import torch, transformers, fxviz
cfg = transformers.GPT2Config(n_layer=4, n_embd=64, n_head=2, vocab_size=1000,
                              bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(cfg).eval()
rec = fxviz.record(model, torch.randint(0, 1000, (1, 8)))
view = fxviz.show(rec, depth=3)
view"""
# The titles of the module boxes drawn.
MODULE_TITLES = """() => [...document.querySelectorAll('.fxviz-graph g.node.fx-module > title')]
  .map((t) => t.textContent)"""
# The nodes wholly inside the frame titled `title`: their title, box on the page, and
# whether each is wholly inside the graph panel; the topmost first.
FRAME_NODES = """(title) => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const frame = [...document.querySelectorAll('.fxviz-graph g.cluster')]
    .find((c) => c.querySelector('title').textContent === title)
    .querySelector('polygon, path').getBoundingClientRect();
  return [...document.querySelectorAll('.fxviz-graph g.node')]
    .map((g) => [g.querySelector('title').textContent, g.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && r.left >= frame.left && r.right <= frame.right
      && r.top >= frame.top && r.bottom <= frame.bottom)
    .sort((a, b) => a[1].top - b[1].top)
    .map(([t, r]) => ({ title: t, top: r.top, bottom: r.bottom, inside: r.left >= panel.left - 1
      && r.right <= panel.right + 1 && r.top >= panel.top - 1 && r.bottom <= panel.bottom + 1 }));
}"""


def test_a_module_opened_near_the_panels_bottom_shows_its_first_row(browser, lab):
    """A box dragged near the panel's bottom edge opens into a frame far taller than the
    room below it: the view moves up just enough for the frame's title and first row of
    nodes to be wholly inside the panel."""
    write_notebook(lab["root"], "bottom.ipynb", [GPT2])
    page = open_and_run(browser, lab, "bottom.ipynb")
    page.wait_for_function("document.querySelector('.fxviz')?.dataset.opening", timeout=120_000)
    titles = page.evaluate(MODULE_TITLES)
    title = next((t for t in titles if t.endswith("h__1")), None)  # transformer.h.1
    assert title is not None, titles
    box = page.locator(".fxviz-graph g.node.fx-module").filter(
        has=page.locator(f"title:text-is('{title}')")
    )
    frame = next(c[6:] for c in box.get_attribute("class").split() if c.startswith("opens-"))
    bottom = page.evaluate(PANEL)[3]
    # drag the graph (from empty space beside the box) until the box is 10 px above the
    # panel's bottom edge, across wholly inside the panel (centred)
    p_left, p_right, p_top = page.evaluate(PANEL)[:3]
    for _ in range(8):
        left, right, _, b_bottom = box.evaluate(RECT)
        shift = (bottom - 10) - b_bottom
        across = (p_left + p_right) / 2 - (left + right) / 2
        if abs(shift) <= 4 and abs(across) <= 40:
            break
        # from empty space left of the box, within the panel from start to end
        y = p_top + 20 if shift > 0 else bottom - 20
        shift = max(min(shift, bottom - 40 - y), p_top + 20 - y)
        x = min(max(left - 20, p_left + 20), p_right - 20)
        across = max(min(across, p_right - 20 - x), p_left + 20 - x)
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + across, y + shift, steps=8)
        page.mouse.up()
    left, right, top, b_bottom = box.evaluate(RECT)
    assert abs(b_bottom - (bottom - 10)) <= 4, (b_bottom, bottom)
    assert p_left <= left, (left, p_left)
    assert right <= p_right, (right, p_right)

    def press() -> None:  # pressed for ~100 ms, as a person clicks
        page.mouse.move((left + right) / 2, (top + b_bottom) / 2)
        page.mouse.down()
        page.wait_for_timeout(100)
        page.mouse.up()

    _redrawn(page, press)
    assert page.evaluate("document.querySelector('.fxviz').dataset.opening") == "in place"
    page.wait_for_timeout(500)  # the kernel's answer to the click, if any, has come
    inner = page.evaluate(FRAME_NODES, frame)
    assert inner, frame
    first = [n for n in inner if n["top"] < inner[0]["bottom"]]  # the first row
    assert all(n["inside"] for n in first), inner[:4]
    label = _frame(page, frame).locator("text").first
    _, _, p_top, p_bottom = page.evaluate(PANEL)
    _, _, l_top, l_bottom = label.evaluate(RECT)  # the frame's title, on screen too
    assert l_top >= p_top - 1, (l_top, p_top)
    assert l_bottom <= p_bottom + 1, (l_bottom, p_bottom)
    screenshot(page, page.locator(".fxviz-graph"), "opened-near-the-bottom.png")
    page.close()
