"""Statistics of values on an accelerator about to be dropped, read together.

With ``keep="stats"`` (or past a memory budget) a node's value is dropped as the run goes
on, so its statistics are taken as it runs; one at a time on an accelerator, each read
is a host sync that stalls the device's queue, once a node. Instead a value's reductions
start on the device as its node runs (so they see it as it was then) and are read with
many others' in one transfer: the same numbers
(:func:`~fxviz._record._batched.read_device_statistics`). The value itself is held only
for the rare tensor read again (its sums overflow or cancel, or it holds a NaN), and is
copied before a node may write it (:meth:`HeldSummaries.before_write`); a write fxviz
cannot foresee (an op whose schema hides it) reaches such a re-read, as it reaches the
statistics of a kept value.

They are read when they hold :data:`HELD_BYTES` of memory or :data:`HELD_VALUES` values,
when the run ends, and when the recording is read. On the CPU there is no sync to save,
and a value measured as its node ran is measured warm: taken at once, as before.

    >>> import torch
    >>> class Entry:  # what the recorder gives: an object with ``outputs``
    ...     outputs = None
    >>> held, entry = HeldSummaries(), Entry()
    >>> held.hold(entry, torch.randn(8, 4))  # on the CPU: not held
    False
    >>> x = torch.randn(8, 4)
    >>> anywhere = HeldSummaries(waits=lambda t: True)  # device-agnostic: any tensor waits
    >>> anywhere.hold(entry, x), entry.outputs
    (True, None)
    >>> anywhere.read()
    >>> entry.outputs[0].max == x.max().item()
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fxviz._record._batched import read_device_statistics, start_device_statistics
from fxviz._record._summary import (
    TensorSummary,
    iter_tensors,
    measured_on_device,
    summarize_tensor,
    with_statistics,
)
from fxviz._record._writes import storage_key
from fxviz._torch_compat import is_alias_of

__all__ = ["HELD_BYTES", "HELD_VALUES", "HeldSummaries"]

HELD_BYTES = 64 << 20  # memory held alive past this: read
HELD_VALUES = 256  # values held past this many: read


class _Waiting:
    """One tensor whose statistics wait: its summary so far (layout, no statistics), its
    reductions started on the device, and the tensor they reduce (the value, or a copy
    once a node may write it)."""

    __slots__ = ("copied", "reductions", "summary", "values")

    def __init__(self, summary: TensorSummary, values: torch.Tensor, reductions: Any) -> None:
        self.summary, self.values, self.reductions = summary, values, reductions
        self.copied = False


class HeldSummaries:
    """Values on an accelerator (each of an entry whose ``outputs`` are set once read)
    whose statistics wait to be read with others."""

    def __init__(self, waits: Callable[[torch.Tensor], bool] | None = None) -> None:
        """``waits``: which tensors wait (default: plain ones on an accelerator; the
        reductions are device-agnostic torch code, which tests run on the CPU)."""
        self._waits = measured_on_device if waits is None else waits
        self._held: list[tuple[Any, list[_Waiting]]] = []  # (entry, its tensors), in order
        self._keys: set[Any] = set()  # the memory of the values held (not copied)
        self._bytes = 0

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, entry: Any, value: Any) -> bool:
        """Make ``entry.outputs`` wait for :meth:`read`; ``False`` (nothing held, measure
        it now) unless every tensor of ``value`` is a plain one on an accelerator whose
        dtype the reductions take."""
        waiting = []
        for path, t in iter_tensors(value):
            if not self._waits(t):
                return False
            started = start_device_statistics(t)
            if started is None:
                return False
            w = _Waiting(summarize_tensor(path, t, False), *started)
            w.copied = not is_alias_of(w.values, t)  # a gapped view is measured as a copy
            waiting.append(w)
        if not waiting:
            return False
        for w in waiting:
            if not w.copied:
                self._keys.add(storage_key(w.values))
            self._bytes += w.values.untyped_storage().nbytes()  # all it holds alive
        self._held.append((entry, waiting))
        self._read_past_limits()
        return True

    def before_write(self, tensors: Sequence[torch.Tensor]) -> None:
        """``tensors`` may be written in place next: the values held on their memory are
        copied (their reductions are queued already; a value is read again only for a
        rare sum that overflows, or a NaN). A copy costs no host sync."""
        keys = {storage_key(t) for t in tensors} & self._keys
        keys.discard(None)
        if not keys:  # the common case: none of them
            return
        for _, waiting in self._held:
            for w in waiting:
                if not w.copied and storage_key(w.values) in keys:
                    w.values, w.copied = w.values.clone(), True
                    self._bytes += w.values.untyped_storage().nbytes()
        self._read_past_limits()

    def read(self) -> None:
        """Read every value's statistics, set its entry's ``outputs``, let the values go."""
        held, self._held, self._keys, self._bytes = self._held, [], set(), 0
        flat = [w for _, waiting in held for w in waiting]
        found = read_device_statistics([(w.values, w.reductions) for w in flat])
        measured = iter(found)
        for entry, waiting in held:
            outputs = []
            for w in waiting:
                stats = next(measured)  # every one was started: none is None
                outputs.append(w.summary if stats is None else with_statistics(w.summary, stats))
            entry.outputs = tuple(outputs)

    def _read_past_limits(self) -> None:
        if self._bytes > HELD_BYTES or len(self._held) > HELD_VALUES:
            self.read()
