"""Widgets driven from two threads at once, as in JupyterLab with ipykernel 7: the browser's
messages run on a kernel subshell's thread while a cell changes the same widget."""

from __future__ import annotations

import threading

import torch
from torch import nn

import fxviz


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.n = nn.Linear(4, 4), nn.Linear(4, 4), nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x)) * 2 + 1
        return self.n(x + torch.tanh(self.b(h)) - 0.5)


def _from_the_browser(widget, messages: list[dict], replies: list[dict]) -> threading.Thread:
    """A thread handing ``messages`` to the widget as ipywidgets does with a comm message
    (``replies``: what the widget sends back)."""

    def send(content, buffers=None):
        replies.append(content)

    widget.send = send

    def run() -> None:
        for content in messages:
            widget._on_message(widget, content, [])

    return threading.Thread(target=run)


def test_a_message_from_the_browser_waits_for_the_cells_redraw_to_finish():
    gm = fxviz.trace(nn.Sequential(*[Block() for _ in range(40)]))
    view = fxviz.show(gm, depth=1)
    box = next(iter(view._boxes))
    replies: list[dict] = []
    browser = _from_the_browser(view, [{"type": "peek_module", "unit": box, "id": 1}], replies)
    handled_meanwhile: list[list[dict]] = []

    def mid_redraw(change) -> None:  # the cell's redraw has set its DOT, and goes on
        if not handled_meanwhile:
            browser.start()  # the browser's message arrives now
            browser.join(timeout=1.0)
            handled_meanwhile.append(list(replies))

    view.observe(mid_redraw, "dot")
    view.depth = None  # the cell: every module opened
    browser.join()
    assert handled_meanwhile == [[]]
    # handled after: the box peeked at is gone, so there is nothing to show
    assert replies == [{"type": "peeked", "id": 1, "unit": box, "dot": None}]
    assert view.error == ""
    assert "fx-module" not in view.dot


def test_a_debugger_stepped_by_a_cell_and_by_its_buttons_runs_each_node_once():
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(30)])
    x = torch.randn(2, 4)
    app = fxviz.debug(model, x)
    buttons = _from_the_browser(app, [{"type": "step"}] * 100, [])
    buttons.start()
    for _ in range(100):
        app.debugger.step()  # the cell
    buttons.join()

    alone = fxviz.Debugger(model, x)  # the same 200 steps, from one thread
    alone.step(200)
    dbg = app.debugger
    assert app.error == ""
    assert (dbg.position, dbg.status) == (alone.position, alone.status)
    ran, want = dbg.recording.records(), alone.recording.records()
    assert [r.name for r in ran] == [r.name for r in want]
    assert all(torch.equal(a.value, b.value) for a, b in zip(ran, want, strict=True))
    dbg.continue_()
    assert torch.equal(dbg.output, model(x))


_reached, _go_on = threading.Event(), threading.Event()


@torch.fx.wrap
def _held(x: torch.Tensor) -> torch.Tensor:
    """A node that waits, while it runs, for the test to say go on."""
    _reached.set()
    _go_on.wait(10)
    return x + 1


class Held(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.last = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(torch.relu(_held(self.first(x))))


def test_a_cell_interrupts_a_continue_clicked_in_the_toolbar_after_the_node_it_runs():
    # the kernel's interrupt reaches the main thread only, not the subshell's
    model, x = Held(), torch.randn(2, 4)
    _go_on.set()  # the capture's own runs pass
    app = fxviz.debug(model, x)
    _reached.clear()
    _go_on.clear()
    toolbar = _from_the_browser(app, [{"type": "continue"}], [])
    toolbar.start()
    assert _reached.wait(10)  # the toolbar's run is inside _held
    app.debugger.interrupt()  # the cell
    _go_on.set()
    toolbar.join()

    dbg = app.debugger
    assert dbg.stop_reason == "interrupted"
    assert dbg.current is not None
    assert dbg.current.name == "relu"  # it stopped after the node it was running
    assert "(interrupted)" in app.status
    assert app.error == ""
    dbg.continue_()  # goes on from there, and the run is whole
    assert dbg.stop_reason == "end"
    assert torch.equal(dbg.output, model(x))
