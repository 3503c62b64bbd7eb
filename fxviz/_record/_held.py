"""Statistics of values about to be dropped, read together.

With ``keep="stats"`` (or past a memory budget) a node's value is dropped as the run goes
on, so its statistics are taken as it runs. One at a time, that costs a host sync a node
on an accelerator (each read of a summary stalls the device's queue) and, on the CPU,
six or seven reductions a small tensor where one call does many tensors of one shape
(:mod:`fxviz._record._batched`). So the values are held a while instead (on an
accelerator their reductions are started as the node runs, and read later) and measured
together: the same numbers, read in one transfer a device. They are read when the values
held pass :data:`HELD_BYTES` or :data:`HELD_VALUES` (on the CPU, :data:`CPU_HELD_BYTES`:
while they are in the cache), when the run ends and when the recording is read; a value a
node may write in place, or pass to code fxviz does not know, is measured before on the
CPU, copied on an accelerator (see :meth:`HeldSummaries.before_write`).

    >>> import torch
    >>> from fxviz._record._summary import summarize
    >>> class Entry:  # what the recorder gives: an object with ``outputs``
    ...     outputs = None
    >>> held, entries = HeldSummaries(), [Entry(), Entry()]
    >>> values = [torch.randn(8, 4), torch.randn(8, 4)]
    >>> [held.hold(e, v) for e, v in zip(entries, values)], entries[0].outputs
    ([True, True], None)
    >>> held.read()
    >>> [e.outputs for e in entries] == [summarize(v) for v in values]
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fxviz._record._batched import (
    batchable,
    batched_statistics,
    read_device_statistics,
    start_device_statistics,
)
from fxviz._record._summary import iter_tensors, measured_summary, summarize_tensor
from fxviz._record._writes import storage_key
from fxviz._torch_compat import functorch_unwrapped, is_alias_of

__all__ = ["HELD_BYTES", "HELD_VALUES", "HeldSummaries"]

HELD_BYTES = 256 << 20  # values held past this many bytes: read
HELD_VALUES = 256  # ... or past this many values
# On the CPU, only small tensors are held (where a reduction's call costs more than its
# arithmetic), and only while they stay in the cache: measured cold later, a bigger one
# costs more than it did measured warm as its node ran.
CPU_HELD_NUMEL = 1 << 12
CPU_HELD_BYTES = 1 << 20


class HeldSummaries:
    """Values (each of an entry whose ``outputs`` are set once read) whose statistics
    wait to be read with others."""

    def __init__(self) -> None:
        # (entry, [(path, tensor, started reductions or None on the CPU)]) in run order
        self._held: list[tuple[Any, list[tuple[str, torch.Tensor, Any]]]] = []
        self._keys: set[Any] = set()  # the memory under the tensors held
        self._bytes = self._cpu_bytes = 0

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, entry: Any, value: Any) -> bool:
        """Hold ``value`` until :meth:`read` sets ``entry.outputs``; ``False`` (nothing
        held) where its statistics are as cheap taken now: a tensor on the CPU too big to
        share its reductions, or one the reductions do not take as it is."""
        tensors = []
        nbytes = cpu_bytes = 0
        for path, t in iter_tensors(value):
            if not _measured_later(t):
                return False
            if t.is_cpu:
                started = None
                cpu_bytes += t.numel() * t.element_size()
            else:
                started = start_device_statistics(t)
                if started is None:
                    return False
            tensors.append((path, t, started))
            self._keys.add(storage_key(t))
            nbytes += t.untyped_storage().nbytes()  # the memory it holds, all of it
            if started is not None and not is_alias_of(started[0], t):
                nbytes += started[0].untyped_storage().nbytes()  # a dense copy measured
        if not tensors:
            return False
        self._held.append((entry, tensors))
        self._bytes += nbytes
        self._cpu_bytes += cpu_bytes
        if (
            self._bytes > HELD_BYTES
            or self._cpu_bytes > CPU_HELD_BYTES
            or len(self._held) > HELD_VALUES
        ):
            self.read()
        return True

    def before_write(self, tensors: Sequence[torch.Tensor]) -> None:
        """``tensors`` may be written in place next: the values held on their memory are
        measured now where their statistics are read from the values (the CPU), copied
        where reductions were started as they ran (an accelerator: the value is read again
        only for a rare sum that overflows, or a NaN; a copy costs no host sync)."""
        keys = {storage_key(t) for t in tensors} & self._keys
        keys.discard(None)
        if not keys:  # the common case: none of them
            return
        on_cpu = False
        for _, items in self._held:
            for k, (path, t, started) in enumerate(items):
                if storage_key(t) not in keys:
                    continue
                if started is None:
                    on_cpu = True
                else:
                    copy = started[0].clone()
                    items[k] = (path, t, (copy, started[1]))
                    self._bytes += copy.untyped_storage().nbytes()
        if on_cpu:
            self.read(cpu_only=True)

    def read(self, cpu_only: bool = False) -> None:
        """Measure the values held (``cpu_only``: those whose tensors are all on the CPU),
        set their entries' ``outputs`` and let the values go."""
        if cpu_only:
            held, kept = [], []
            for item in self._held:
                on_cpu = all(started is None for _, _, started in item[1])
                (held if on_cpu else kept).append(item)
            self._held, self._cpu_bytes = kept, 0
            self._keys = {storage_key(t) for _, items in kept for _, t, _ in items}
        else:
            held, self._held, self._bytes, self._cpu_bytes = self._held, [], 0, 0
            self._keys = set()
        flat = [item for _, tensors in held for item in tensors]
        on_cpu = [i for i, (_, t, _) in enumerate(flat) if t.is_cpu]
        found: list[Any] = read_device_statistics([started for _, _, started in flat])
        for i, stats in zip(on_cpu, batched_statistics([flat[i][1] for i in on_cpu]), strict=True):
            found[i] = stats
        k = 0
        for entry, tensors in held:
            outputs = []
            for path, t, _ in tensors:
                stats = found[k]
                k += 1
                if stats is None:  # alone of its shape, or holding a NaN: measured alone
                    outputs.append(summarize_tensor(path, t, True))
                else:
                    outputs.append(measured_summary(path, t, stats))
            entry.outputs = tuple(outputs)


def _measured_later(t: torch.Tensor) -> bool:
    """Whether the statistics of ``t`` can wait for :meth:`HeldSummaries.read`: a plain
    dense tensor with values, on an accelerator, or on the CPU a small one that can share
    its reductions with others of its shape."""
    if t.is_cpu:
        return t.numel() <= CPU_HELD_NUMEL and batchable(t)
    return (
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout == torch.strided
        and t.numel() != 0
        and functorch_unwrapped(t) is t
        and not (t.is_meta or t.is_complex() or t.is_quantized)
    )
