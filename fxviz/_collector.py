"""Python's cycle collector around fxviz's bursts of objects: a capture, a record, a
table, a drawing.

Each full collection walks every object in the heap: after ``import transformers``,
~430,000 of them (torch, transformers, the model), ~0.1 s each time. A burst of short-lived
objects triggers such collections; these two keep them to the burst's own objects.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused", "old_objects_set_aside"]

# Below this many nodes' objects (a record, a table), the young collection a set-aside
# starts with costs more than it saves: tens of µs of a ~1 ms record of a few hundred nodes
_BURST_NODES = 1000


@contextlib.contextmanager
def old_objects_set_aside(nodes: int | None = None) -> Iterator[None]:
    """Collections inside walk only the objects made inside: every older one is set
    aside meanwhile (``gc.freeze()``) and put back after (``gc.unfreeze()``). ``nodes``:
    how many nodes' objects are coming (a record's, a table's); under 1,000, nothing is
    done.

    Dynamo tracing a model makes millions of objects, most short-lived: the full
    collections they triggered walked the whole heap, a fifth of the first capture of a
    small GPT-2 (0.25 s of CPU of 1.3 s). Garbage made inside is still collected, unlike
    under :func:`collector_paused` (a capture of a big model may take minutes), and so is
    the caller's young garbage (a young collection first). Objects someone froze
    (``gc.freeze()``) stay frozen: then nothing is changed.

    >>> import gc
    >>> with old_objects_set_aside():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count()
    0
    """
    small = nodes is not None and nodes < _BURST_NODES
    if small or gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.collect(1)  # the caller's young garbage: freed now, not set aside with the rest
    gc.freeze()  # what is left is in the oldest generation, where unfreeze puts it back
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector: drawing a 50,000-node graph makes a few hundred
    thousand small objects, and each collection they trigger walks the whole heap (the
    model and its graph too), which took half of the drawing time.

    What the pause made then joins the oldest generation unexamined: re-enabled as it
    was, the collector would first walk all of it as young objects (~80 ms for a
    50,000-node view) and soon after count it towards a full collection (~0.5 s, landing
    on whatever the notebook does next). ``gc.freeze()`` moves every tracked object, so
    the young generations are collected first (the caller's garbage, a dropped partial
    recording, is freed then, not held until a full collection). Cycles made meanwhile
    are collected by the next full collection. Objects someone froze (``gc.freeze()``)
    stay frozen: the pause then ends as before.
    """
    if not gc.isenabled():
        yield
        return
    promote = not gc.get_freeze_count()  # the permanent generation is ours to use
    if promote:
        gc.collect(1)  # what is young now is not the pause's: left to a young collection
    gc.disable()
    try:
        yield
    finally:
        if promote and not gc.get_freeze_count():
            gc.freeze()  # every tracked object: the young ones are the pause's
            gc.unfreeze()  # ... back, into the oldest generation
        gc.enable()
