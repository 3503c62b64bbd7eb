"""Review findings (wt-break, 2026-11-27) on drawing: each test fails on main for the
reason its docstring gives."""

from __future__ import annotations

import gc
import weakref

import torch

import fxviz


class _Held:
    """One end of a reference cycle that holds a tensor."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value
        self.other: object = None


def test_a_drawing_leaves_the_callers_young_garbage_to_a_young_collection():
    """``collector_paused`` ends with ``gc.freeze(); gc.unfreeze()`` (commit df8aa38),
    documented as moving "what the pause made" into the oldest generation; but
    ``gc.freeze`` takes every tracked object, so a cycle the caller dropped just before
    drawing (a partial recording, a failed run's values) moves there too: the young
    collections that freed it before (as at 99d4170) no longer do, and it holds its
    memory until the next full collection."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    gm = fxviz.trace(model, torch.randn(2, 4))
    gc.collect()
    threshold = gc.get_threshold()
    # no automatic collection between the drop and the drawing (it would free the cycle
    # first, as it does when the drawing starts later)
    gc.set_threshold(10**6, *threshold[1:])
    try:
        a, b = _Held(torch.zeros(1000)), _Held(torch.zeros(1))
        a.other, b.other = b, a
        gone = weakref.ref(a.value)
        del a, b  # garbage now, in the youngest generation
        fxviz.to_dot(gm)
    finally:
        gc.set_threshold(*threshold)
    gc.collect(1)  # the young generations (what the collector runs most)
    assert gone() is None
