"""The cycle collector around fxviz's bursts of objects: what a drawing makes while the
collector is paused joins the oldest generation unexamined, and cycles made meanwhile are
still collected; a trace's collections walk only what the trace makes."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import fxviz
from fxviz._collector import collector_paused, old_objects_set_aside


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def _generation_of(obj: object) -> int | None:
    for generation in (0, 1, 2):
        if any(o is obj for o in gc.get_objects(generation=generation)):
            return generation
    return None


@pytest.fixture(autouse=True)
def _collector_on():
    assert gc.isenabled()
    yield
    gc.enable()


def test_what_a_view_makes_is_not_walked_again_as_young_objects():
    # re-enabled as it was, the collector walked every object of a 50,000-node view as
    # a young one (~80 ms), then counted it towards a full collection (~0.5 s) that
    # landed on whatever the notebook did next
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2, 2)) for _ in range(400)])
    view = fxviz.GraphView(fxviz.trace(model))
    assert _generation_of(view._draw.nodes[5]) == 2


def test_a_cycle_made_during_the_pause_is_still_collected():
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        made = [[] for _ in range(50_000)]  # young objects enough for a collection
    del a, b, made
    gc.collect()
    assert gone() is None


def test_objects_someone_froze_stay_frozen():
    kept = [_Node() for _ in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = [_Node() for _ in range(1000)]
        # none frozen by the pause, none let go (frozen temporaries may die meanwhile)
        assert 0 < gc.get_freeze_count() <= frozen
        assert all(_generation_of(k) is None for k in kept)  # still permanent
        assert _generation_of(made[0]) in (0, 1)  # the pause ended as before
    finally:
        gc.unfreeze()


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


def test_a_trace_collects_apart_from_the_older_heap():
    """Dynamo tracing a model makes millions of objects; the full collections they
    triggered walked the whole heap (a fifth of the first record of a small GPT-2). The
    objects older than the trace are set aside while it runs, and put back after."""
    old = _Node()
    during: list[tuple[int, int | None]] = []

    class Probe(torch.nn.Module):  # a symbolic trace runs forward's Python for real
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            during.append((gc.get_freeze_count(), _generation_of(old)))
            return x + 1

    fxviz.trace(Probe(), torch.ones(2), method="symbolic")
    assert during
    assert during[0][0] > 0  # set aside ...
    assert during[0][1] is None  # ... where no collection walks it
    assert gc.get_freeze_count() == 0
    assert _generation_of(old) == 2  # back, in the oldest generation


def test_garbage_made_while_old_objects_are_set_aside_is_collected():
    with old_objects_set_aside():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()  # walks only what was made inside
        assert gone() is None


def test_setting_old_objects_aside_leaves_the_callers_young_garbage_collectable():
    """The caller's cycle dropped just before (young) is freed before the old objects are
    set aside: set aside with them, it would wait for the next full collection."""
    threshold = gc.get_threshold()
    gc.set_threshold(10**6, *threshold[1:])  # no automatic collection meanwhile
    try:
        a, b = _Held(torch.zeros(1000)), _Held(torch.zeros(1))
        a.other, b.other = b, a
        gone = weakref.ref(a.value)
        del a, b
        with old_objects_set_aside():
            assert gone() is None
    finally:
        gc.set_threshold(*threshold)


def test_objects_someone_froze_stay_frozen_through_a_trace():
    kept = [_Node() for _ in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        fxviz.trace(torch.nn.Linear(2, 2), torch.ones(2), method="symbolic")
        assert 0 < gc.get_freeze_count() <= frozen
        assert all(_generation_of(k) is None for k in kept)  # still permanent
    finally:
        gc.unfreeze()


def _freeze_count_in_graph(x: torch.Tensor) -> torch.Tensor:
    _FREEZE_COUNTS.append(gc.get_freeze_count())
    return x + 1


_FREEZE_COUNTS: list[int] = []
torch.fx.wrap("_freeze_count_in_graph")


class _Counting(torch.nn.Module):
    def __init__(self, nodes: int) -> None:
        super().__init__()
        self.nodes = nodes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _freeze_count_in_graph(x)
        for _ in range(self.nodes):
            x = x.relu()
        return x


@pytest.mark.parametrize("verb", ["record", "record-interpreted", "shapes"])
def test_a_graph_runs_with_the_older_heap_set_aside(verb):
    """A record or a shape pass makes objects a node (a record, a summary, fake
    tensors): its collections walk only those, not the caller's whole heap."""
    gm = fxviz.trace(_Counting(1000))
    _FREEZE_COUNTS.clear()
    if verb == "shapes":
        fxviz.shapes(gm, torch.ones(2))
    else:
        fxviz.record(
            gm, torch.ones(2), engine="interpreted" if verb.endswith("interpreted") else None
        )
    assert _FREEZE_COUNTS
    assert min(_FREEZE_COUNTS) > 0
    assert gc.get_freeze_count() == 0


def test_a_small_record_is_left_to_the_collector_as_it_is():
    """Under 1,000 nodes the young collection a set-aside starts with would cost more
    than the collections it saves (a record of the zoo's models takes ~2 ms)."""
    gm = fxviz.trace(_Counting(10))
    _FREEZE_COUNTS.clear()
    fxviz.record(gm, torch.ones(2))
    assert _FREEZE_COUNTS == [0]


def test_a_table_is_built_with_the_older_heap_set_aside():
    model = torch.nn.Sequential(*[torch.nn.ReLU() for _ in range(1000)])
    fxviz.record(model, torch.ones(2)).table()  # pandas imported: an import under
    rec = fxviz.record(model, torch.ones(2))  # frequent collections takes a minute
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(gc.get_freeze_count())

    gc.callbacks.append(note)
    try:
        rec.table()  # objects enough for a few collections
    finally:
        gc.callbacks.remove(note)
    assert max(seen) > 0  # a collection inside, which did not walk the older heap
    assert gc.get_freeze_count() == 0
