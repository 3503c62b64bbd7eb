"""The per-run bookkeeping behind a recording.

The hot path (``Recorder.run_node``) does only what cannot wait: time the node, keep or
drop its value (taking its statistics when it is dropped), and copy values that an
in-place write is about to change. Everything else in a :class:`NodeRecord` (readable
target, module path, statistics of kept values, see ``_stats``) is built the first time
someone looks at that record.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, overload

import torch
import torch.fx

from fxviz._nodes import module_path, source_line, target_text
from fxviz._record._grads import GradientWatcher
from fxviz._record._held import HeldSummaries
from fxviz._record._records import NodeRecord, Recording, StoredValue, new_node_record
from fxviz._record._stats import (
    cached_summary,
    check_stats,
    deferred_summary,
    note_versions,
    same_elements,
    view_summary,
    warn_if_changed,
)
from fxviz._record._summary import TensorSummary, iter_tensors, summarize, summarize_many
from fxviz._record._writes import (
    aliased_inputs,
    runs_unknown_code,
    storage_key,
    tensor_inputs,
    warn_unforeseen,
    written_locations,
    written_tensors,
)
from fxviz._torch_compat import graph_tail, storage_id, tree_map_only_tensors
from fxviz.errors import FxvizWarning

__all__ = ["Deferred", "Keep", "Recorder", "check_keep"]

Keep = Literal["all", "stats"] | int
_STRIDED = torch.strided
_FREE_OPS = ("placeholder", "get_attr")  # their values exist anyway: never count them
_Key = int  # a storage's identity
_BLOCK = 64  # entries whose pending statistics are taken together (see _measure_block)


def check_keep(keep: Any) -> Keep:
    """Validate a ``keep=`` argument."""
    if keep in ("all", "stats"):
        return keep
    if isinstance(keep, int) and not isinstance(keep, bool) and keep >= 0:
        return keep
    raise ValueError(f"keep must be 'all', 'stats' or a byte budget (int >= 0), not {keep!r}")


class _Entry(StoredValue):
    """What the hot path stores for one node run; a NodeRecord is built from it on demand.

    It is also the record's :class:`StoredValue`, so a copy taken before a later in-place
    write shows through every record of this node.
    """

    # Class-level defaults: the hot path sets only what differs from them.
    error: BaseException | None = None
    outputs: tuple[TensorSummary, ...] | None = None  # None: summarise the kept value
    versions: tuple[int, ...] | None = None  # statistics pending: its versions then
    stamp: int | None = None  # a bare tensor summarised as it ran: its version then
    stamped_after = 0  # how many foreseen writes had run when it was stamped
    mutates: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    produced: tuple[str, ...] = ()
    snapshotted: frozenset[_Key] = frozenset()  # storages already copied before a write
    exposed: str | None = None  # a node running unknown code got its memory (see settle)

    def __init__(self, node: torch.fx.Node, value: Any, kept: bool, elapsed: float) -> None:
        self.node = node
        self.value = value if kept else None
        self.kept = kept
        self.elapsed = elapsed

    def read(self) -> Any:
        """The value; the first read of one that unknown code got checks it against its
        statistics (see :meth:`Recorder.settle`)."""
        if self.exposed is not None:
            exposed, self.exposed = self.exposed, None
            warn_if_changed(self.node.name, exposed, self.value, self.outputs)
        return self.value


class Deferred(Protocol):
    """Nodes that ran one after another, whose entries are made when first needed."""

    @property
    def nodes(self) -> Sequence[torch.fx.Node]:
        """The nodes, in the order they ran."""
        ...

    def entry(self, k: int) -> _Entry:
        """The entry of ``nodes[k]``, made now if it was not (once: the same one after)."""
        ...

    def kept(self, k: int) -> Any:
        """The value ``nodes[k]`` kept (``None`` when none), making no entry."""
        ...


class _Made:
    """One entry already made, run after deferred ones (a :class:`Deferred` of one)."""

    def __init__(self, entry: _Entry) -> None:
        self.nodes, self._entry = (entry.node,), entry

    def entry(self, k: int) -> _Entry:
        return self._entry

    def kept(self, k: int) -> Any:
        return self._entry.value if self._entry.kept else None


class Recorder:
    """Records each node an interpreter runs; used by ``RecordingMixin`` and ``Debugger``."""

    def __init__(self, interpreter: Any, *, keep: Keep = "all", stats: Any = True) -> None:
        self.interpreter: Any = interpreter  # while it runs (see ``finish``)
        self._module: Any = None  # the module and env the run left (set by ``finish``)
        self._env: dict[torch.fx.Node, Any] | None = None
        self._built: dict[int, NodeRecord] = {}  # records built so far, by index
        self.keep = check_keep(keep)
        self.stats = check_stats(stats)
        self._entries: list[_Entry] = []
        # batches of nodes whose entries are made when first read (see ``defer``)
        self._pending: list[Deferred] = []
        self._pending_count = 0
        # values dropped as the run goes, whose statistics are read together (``_held``)
        self._held = HeldSummaries()
        self._making = threading.Lock()
        # node -> its entry, for entries summarised as they ran (``stamp`` set): the only
        # ones another node's statistics can be taken from (a view of a parameter)
        self._stamped: dict[torch.fx.Node, _Entry] = {}
        # memory a node wrote in place (foreseen), and how many such writes had run then:
        # a write through ``.data`` changes values without moving their version counter,
        # so a summary stamped before it is not lent to a view made after it
        self._written: dict[_Key, int] = {}
        self._writes = 0
        self.output: Any = None
        self.complete = False
        self._position: dict[torch.fx.Node, int] = {}
        self._plans = _plans_of(self.interpreter.graph)
        self._texts = _plans_of(self.interpreter.graph, "_fxviz_texts")
        self._owners: dict[_Key, list[int]] = {}  # memory -> positions of kept values on it
        self._indexed = 0  # nodes run before this position are in _owners
        self._measured_blocks: set[int] = set()  # see _measure_block
        # memory the kept values live on (budget only), each with how many kept values
        # hold a tensor on it and its bytes: paid for once, by the first; let go (and its
        # bytes given back) when the last is dropped or swapped for a copy before a write
        # (``_hold``, ``_let_go``). Counted from the recording's own values, never from
        # what the run still holds (which differs between the engines); a storage let go
        # may have its key reused by a new tensor, which is then paid for
        self._kept_storages: dict[_Key, list[int]] = {}  # key -> [holders, bytes]
        self._kept_bytes = 0
        self._dropped = 0
        self._transformer = isinstance(interpreter, torch.fx.Transformer)
        self.next_run_node: Callable[[torch.fx.Node], Any] = interpreter.run_node
        self.env: dict[torch.fx.Node, Any] | None = None  # the env of the run being recorded
        # called with the tensors a node is about to write in place (the Debugger copies
        # parameters there, to put them back on restart)
        self.before_write: Callable[[list[torch.Tensor]], None] | None = None
        self.grads: GradientWatcher | None = None  # set when gradients are recorded too

    # -- entries, some made when first read ----------------------------------------------
    @property
    def entries(self) -> list[_Entry]:
        """One entry a node run, in order (making the deferred ones first)."""
        if self._held:
            self._held.read()
        if self._pending:
            with self._making:  # another thread reading now waits for them whole
                for batch in self._pending:
                    for k in range(len(batch.nodes)):
                        self._add(batch.entry(k))
                self._pending, self._pending_count = [], 0
        return self._entries

    @property
    def count(self) -> int:
        """How many nodes ran, the deferred ones included (making none)."""
        return len(self._entries) + self._pending_count

    def defer(self, batch: Deferred) -> None:
        """Leave the entries of ``batch.nodes`` (which ran next, in this order) to be made
        when ``entries`` is first read, or when a write is about to change one's value."""
        self._pending.append(batch)
        self._pending_count += len(batch.nodes)

    def names(self, count: int) -> list[str]:
        """The names of the first ``count`` nodes run (making no deferred entry)."""
        names = [e.node.name for e in self._entries[:count]]
        for batch in self._pending:
            if len(names) >= count:
                break
            names += [n.name for n in batch.nodes]
        return names[:count]

    # -- the hot path --------------------------------------------------------------------
    def run_node(self, node: torch.fx.Node, run: Callable[[torch.fx.Node], Any]) -> Any:
        """Run ``node`` through ``run`` (the interpreter's own ``run_node``) and record it."""
        env = self.interpreter.env
        plan = self._plans.get(node)
        if plan is None or plan[2] is not node.args or plan[3] is not node.target:
            plan = self._plans[node] = _plan(node, self.interpreter.submodules)
        writes, inputs = plan[0], plan[1]
        if writes:
            written = written_tensors(node, writes, env)
            if self.before_write is not None:
                self.before_write(written)
            self._snapshot(written)
        before = tensor_inputs(inputs, [env.get(n) for n in inputs])
        if plan[4] and before and self.stats != "off":
            self.settle([t for _, t, _ in before], node)
        tail = self._graph_tail() if self._transformer else None
        start = time.perf_counter()
        try:
            value = run(node)
        except Exception as error:
            self.failed(
                node,
                error,
                time.perf_counter() - start,
                before,
                foreseen=lambda: written_tensors(node, writes, env),
                values=lambda: {n.name: env.get(n) for n in inputs},
            )
            raise
        elapsed = time.perf_counter() - start
        entry = self.entry_for(node, value, elapsed, before)
        if before:
            self.note_writes(
                entry,
                before,
                foreseen=lambda: written_tensors(node, writes, env),
                values=lambda: {n.name: env.get(n) for n in inputs},
            )
        if tail is not None:
            entry.produced = self._produced_since(tail)
        if self.grads is not None:
            self.grads.watch(node.name, value)
        self._append(entry)
        return value

    def failed(
        self,
        node: torch.fx.Node,
        error: Exception,
        elapsed: float,
        before: list[Any],
        *,
        foreseen: Callable[[], Sequence[torch.Tensor]],
        values: Callable[[], dict[str, Any]],
    ) -> None:
        """Record ``node``, which raised ``error``, and the inputs it wrote before it did
        (``before``, ``foreseen``, ``values``: as for :meth:`note_writes`, which warns where
        the write was not foreseen: no copy kept the values it changed)."""
        entry = _Entry(node, None, False, elapsed)
        entry.error = error
        entry.outputs = ()
        if before:
            self.note_writes(entry, before, foreseen=foreseen, values=values)
        self._append(entry)

    def entry_for(
        self, node: torch.fx.Node, value: Any, elapsed: float, before: list[Any]
    ) -> _Entry:
        """The entry of a node that ran: kept within the budget, its aliases, and the
        statistics that cannot wait (``before``: its tensor inputs and their versions)."""
        kept = self.keep == "all" or self._admit(node.op, value)
        entry = _Entry(node, value, kept, elapsed)
        self.describe(entry, value, before)
        return entry

    def describe(self, entry: _Entry, value: Any, before: list[Any]) -> None:
        """Note which inputs ``value`` shares memory with, and take the statistics that
        cannot wait."""
        if before:
            entry.aliases = aliased_inputs(value, before)
        self.summarize_ran(entry, value, before)

    def note_writes(
        self,
        entry: _Entry,
        before: list[Any],
        *,
        foreseen: Callable[[], Sequence[torch.Tensor]],
        values: Callable[[], dict[str, Any]],
    ) -> None:
        """Note the inputs a node wrote in place (their version counters moved since
        ``before``) and warn where ``foreseen()`` (what was expected) does not cover them;
        ``values()``: the inputs by name."""
        for _, t, version in before:
            if t._version != version:
                entry.mutates = tuple(
                    dict.fromkeys(n.name for n, t, v in before if t._version != v)
                )
                warn_unforeseen(entry.node, foreseen(), values(), entry.mutates)
                return

    def summarize_ran(self, entry: _Entry, value: Any, before: list[Any]) -> None:
        """Take the statistics that cannot wait: of a value about to be dropped, of one
        that outlives the run (inputs, parameters: cached), or all with ``stats="eager"``;
        the others are taken when first read. A view of a summarised value takes its
        statistics from it."""
        stats = self.stats
        if stats == "off":
            if not entry.kept:
                entry.outputs = summarize(value, False)
            return
        op = entry.node.op
        if op in _FREE_OPS:
            entry.outputs = cached_summary(value)
        elif entry.aliases and (derived := self._derive(value, before)) is not None:
            entry.outputs = derived
        elif stats == "lazy" and entry.kept and (versions := note_versions(value)) is not None:
            entry.versions = versions
            return
        elif not entry.kept and self._held.hold(entry, value):
            pass  # measured with others' before a write or a read (``_held``)
        else:
            entry.outputs = summarize(value, True)
        if isinstance(value, torch.Tensor) and not value.is_inference():
            self.stamp(entry, value._version)

    def stamp(self, entry: _Entry, version: int) -> None:
        """Note that ``entry`` was summarised as it ran, at ``version`` of its value."""
        entry.stamp = version
        entry.stamped_after = self._writes
        self._stamped[entry.node] = entry

    def unwritten(self, base: _Entry, t: torch.Tensor) -> bool:
        """Whether no foreseen write reached the memory of ``t`` (the value of the stamped
        ``base``) since ``base`` was stamped: its version counter alone does not tell, a
        write through ``t.data`` leaves it as it was."""
        key = storage_key(t)  # None: memory fxviz cannot follow, nor its writes
        return key is None or self._written.get(key, 0) <= base.stamped_after

    def _derive(self, value: Any, before: list[Any]) -> tuple[TensorSummary, ...] | None:
        """Statistics of a view from those of the input it views, when both are whole."""
        if not isinstance(value, torch.Tensor):
            return None
        bases = []
        for node, t, version in before:
            base = self._stamped.get(node)
            if (
                base is not None
                and base.stamp == version
                and base.outputs
                and (not self._written or self.unwritten(base, t))
            ):
                bases.append((t, base.outputs[0], version))
        return view_summary(value, bases) if bases else None

    def outputs(self, entry: _Entry, *, derive: bool = True) -> tuple[TensorSummary, ...]:
        """The entry's summaries, taking pending statistics now (from the value it views,
        when it is a whole view of an input and ``derive``)."""
        if entry.outputs is None:
            if entry.versions is None:
                entry.outputs = summarize(entry.value, False)
            else:
                derived = self._derive_kept(entry) if derive and entry.aliases else None
                entry.outputs = derived or deferred_summary(
                    entry.node.name, entry.value, entry.versions
                )
        return entry.outputs

    def _derive_kept(self, entry: _Entry) -> tuple[TensorSummary, ...] | None:
        """Pending statistics of a kept view, from the kept inputs it views (measured
        now if need be, but never derived in turn: no recursion down a chain of views)."""
        value = entry.value
        if not isinstance(value, torch.Tensor) or entry.versions != (value._version,):
            return None
        bases = []
        for node in entry.node.all_input_nodes:
            base = self._entry_of(node)
            if base is None or node.name not in entry.aliases or not base.kept:
                continue
            held = base.value
            if not isinstance(held, torch.Tensor) or held.is_inference():
                continue
            if same_elements(value, held, held._version):  # else it lends nothing: not measured
                (summary,) = self.outputs(base, derive=False)
                bases.append((held, summary, held._version))
        return view_summary(value, bases) if bases else None

    def _append(self, entry: _Entry) -> None:
        """Add ``entry`` after every node run so far (deferred too, behind deferred ones)."""
        if self._pending:
            self.defer(_Made(entry))
        else:
            self._add(entry)

    def _add(self, entry: _Entry) -> None:
        self._position[entry.node] = len(self._entries)
        self._entries.append(entry)

    def _entry_at(self, position: int) -> _Entry:
        """The entry of the ``position``-th node run, making it alone if it was deferred."""
        if position < len(self._entries):
            return self._entries[position]
        position -= len(self._entries)
        for batch in self._pending:
            if position < len(batch.nodes):
                return batch.entry(position)
            position -= len(batch.nodes)
        raise IndexError(position)

    def _entry_of(self, node: torch.fx.Node) -> _Entry | None:
        """The entry of ``node`` if it ran, making it alone if it was deferred."""
        index = self._position.get(node)
        if index is not None:
            return self._entries[index]
        for batch in self._pending:
            if node in batch.nodes:
                return batch.entry(batch.nodes.index(node))
        return None

    # -- results -------------------------------------------------------------------------
    def finish(self, output: Any) -> None:
        """Mark the run complete (letting go of the interpreter: see :meth:`release`);
        warn once if the memory budget dropped values."""
        self.output = output
        self.complete = True
        self.release()
        if self._dropped:
            kept = len(self.entries) - self._dropped
            warnings.warn(
                f"fxviz kept the values of {kept} of {len(self.entries)} nodes "
                f"(budget keep={self.keep:,} bytes); later values were dropped and their "
                "statistics kept. Raise keep=<bytes> or use keep='all' to keep them.",
                FxvizWarning,
                stacklevel=3,
            )

    def release(self) -> None:
        """Let go of the interpreter, keeping the module and env its run left (by
        ``finish``, and by a run that failed): it holds the recorder in turn, and a
        recording dropped is then freed at once, its values with it, not at the garbage
        collector's next pass."""
        if self._held:
            self._held.read()
        interpreter = self.interpreter
        if interpreter is not None:
            self._module, self._env = interpreter.module, interpreter.env
            self.interpreter = self.next_run_node = None  # type: ignore[assignment]

    @property
    def records(self) -> Sequence[NodeRecord]:
        """Every node run so far, as records built on first access."""
        return _RecordList(self, len(self.entries))

    def record(self, index: int) -> NodeRecord:
        """The :class:`NodeRecord` of the ``index``-th node run (built once, then cached)."""
        found = self._built.get(index)
        if found is None:
            found = self._built[index] = self._build(index, self.entries[index])
        return found

    def recording(
        self, *, error: BaseException | None = None, upto: int | None = None
    ) -> Recording:
        """A :class:`Recording` of the first ``upto`` nodes run (all by default)."""
        count = self.count if upto is None else min(upto, self.count)
        done = self.complete and count == self.count
        running = self.interpreter is not None  # else: as the run left them (``finish``)
        return Recording(
            self.interpreter.module if running else self._module,
            _RecordList(self, count),
            names=self.names(count),
            env=self.interpreter.env if running else self._env,
            output=self.output if done else None,
            complete=done,
            error=error,
            gradients=None if self.grads is None else self.grads.gradients,
        )

    def _build(self, index: int, entry: _Entry) -> NodeRecord:
        node = entry.node
        if entry.outputs is None and entry.versions is not None:
            self._measure_block(index)
        outputs = self.outputs(entry)
        target, module, source, inputs = _node_facts(self._texts, node)
        names, shapes, dtypes = [], [], []
        for n in inputs:  # names read now: a node can be renamed
            names.append(n.name)
            first = self._first_output(n)
            shapes.append(first.shape if first else None)
            dtypes.append(first.dtype if first else None)
        return new_node_record(  # every field, in order
            index,
            node.name,
            node.op,
            target,
            module,
            tuple(names),
            tuple(shapes),
            tuple(dtypes),
            outputs,
            entry.elapsed,
            entry.error,
            entry,
            entry.mutates,
            entry.aliases,
            entry.produced,
            source,
            None if self.grads is None else self.grads.gradients,
        )

    def _measure_block(self, index: int) -> None:
        """Take the pending statistics of the block of :data:`_BLOCK` entries that holds
        ``index``, the small tensors of one shape together (``summarize_many``): records are
        read in runs (a table, the widget, a report, a loop), and one reduction for many
        tensors costs about what it costs for one. Only bare tensors unchanged since their
        node ran are measured here, as they were then; views wait for ``outputs`` (which
        takes theirs from the value they view), and changed values for the read that warns.
        """
        start = index - index % _BLOCK
        if start in self._measured_blocks:
            return
        entries = self.entries[start : start + _BLOCK]
        if len(entries) == _BLOCK or self.complete:  # a Debugger's next nodes may join it
            self._measured_blocks.add(start)
        pending: list[tuple[_Entry, torch.Tensor]] = [
            (e, e.value)
            for e in entries
            if e.outputs is None
            and e.versions is not None
            and not e.aliases
            and type(e.value) is torch.Tensor
            and e.versions[0] == e.value._version
        ]
        if len(pending) < 2:
            return
        summaries = summarize_many([value for _, value in pending])
        for (e, _), summary in zip(pending, summaries, strict=True):
            if summary is not None:
                e.outputs = (summary,)

    def _first_output(self, node: torch.fx.Node) -> TensorSummary | None:
        entries = self.entries
        index = self._position.get(node)
        if index is None:
            return None
        entry = entries[index]
        if entry.outputs is None:  # shapes only: its statistics may still wait
            first = next(iter_tensors(entry.value), None)
            return None if first is None else summarize(first[1], False)[0]
        return entry.outputs[0] if entry.outputs else None

    # -- memory: budget, aliasing and copies before in-place writes ----------------------
    def _admit(self, op: str, value: Any) -> bool:
        """Whether the memory budget lets this node's value be kept."""
        if self.keep == "stats":
            return False
        if op in _FREE_OPS:
            return True
        held = self._kept_storages
        sizes: dict[_Key, int] = {}  # each memory under the value, with what it costs
        for _, t in iter_tensors(value):
            key = storage_key(t)
            if key is not None and key not in sizes:  # held: a kept value paid for it
                sizes[key] = 0 if key in held else t.untyped_storage().nbytes()
        if self._kept_bytes + sum(sizes.values()) > self.keep:  # type: ignore[operator]
            self._dropped += 1
            return False
        for key, nbytes in sizes.items():
            self._hold(key, nbytes)
        return True

    def _hold(self, key: _Key, nbytes: int) -> None:
        """One more kept value holds memory ``key`` (budget only): the first pays its
        ``nbytes``."""
        held = self._kept_storages.get(key)
        if held is None:
            self._kept_storages[key] = [1, nbytes]
            self._kept_bytes += nbytes
        else:
            held[0] += 1

    def _let_go(self, key: _Key | None) -> None:
        """A kept value no longer holds memory ``key`` (budget only): when none does, its
        bytes are given back."""
        held = None if key is None else self._kept_storages.get(key)
        if key is None or held is None:
            return
        if held[0] > 1:
            held[0] -= 1
        else:
            del self._kept_storages[key]
            self._kept_bytes -= held[1]

    def _index_kept(self) -> None:
        """Note which memory the kept values of the nodes run so far live on (making no
        deferred entry)."""
        owners, position = self._owners, self._indexed
        made = self._entries
        values = [e.value if e.kept else None for e in made[position:]]
        skip = max(0, position - len(made))
        for batch in self._pending:
            values += [batch.kept(k) for k in range(skip, len(batch.nodes))]
            skip = max(0, skip - len(batch.nodes))
        for value in values:
            if type(value) is torch.Tensor:  # most values: one plain tensor (storage_key)
                key = None if value.is_meta or value.layout != _STRIDED else storage_id(value)
                if key is not None:
                    owners.setdefault(key, []).append(position)
            elif value is not None:
                keys = {key for _, t in iter_tensors(value) if (key := storage_key(t)) is not None}
                for key in keys:
                    owners.setdefault(key, []).append(position)
            position += 1
        self._indexed = position

    def _kept_on(self, tensors: Sequence[torch.Tensor]) -> Iterator[tuple[_Key, _Entry]]:
        """``(key, entry)`` for each storage ``key`` under ``tensors`` and each entry whose
        kept value lives on it (made now if it was deferred: only those)."""
        keys = {key for t in tensors if (key := storage_key(t)) is not None}
        if not keys:
            return
        self._index_kept()
        for key in keys:
            for position in self._owners.get(key, ()):
                yield key, self._entry_at(position)

    def settle(self, tensors: Sequence[torch.Tensor], node: torch.fx.Node) -> None:
        """Take the pending statistics of kept values that share memory with ``tensors``:
        ``node`` runs code fxviz does not know next, which could write into them. A write
        its version counters show is warned of after it; one through ``.data`` moves none,
        so each such value is checked against its statistics when first read instead
        (during the run it would cost a copy or a measure of each, every run)."""
        if self._held:  # it could write into them too
            self._held.before_write(tensors)
        for _, entry in self._kept_on(tensors):
            if entry.outputs is None and entry.versions is not None:
                self.outputs(entry)
            if entry.exposed is None:
                entry.exposed = node.name

    def _snapshot(self, tensors: Sequence[torch.Tensor]) -> None:
        """Copy the kept values that the next node is about to overwrite, before it does,
        and note the memory it writes (see :meth:`unwritten`)."""
        if self._held:  # measured as they are, before the write
            self._held.before_write(tensors)
        self._writes += 1
        for t in tensors:
            key = storage_key(t)
            if key is not None:
                self._written[key] = self._writes
        for key, entry in self._kept_on(tensors):
            if key in entry.snapshotted or not entry.kept:
                continue
            entry.snapshotted |= {key}
            value = entry.value
            if type(value) is torch.Tensor:  # most values: one plain tensor
                copy = _copy_if_on(value, key)
            else:
                copy = tree_map_only_tensors(lambda t, key=key: _copy_if_on(t, key), value)
            if self._copy_measures_alike(entry, key, copy):  # statistics wait, the copy's
                entry.value, entry.versions = copy, note_versions(copy)
                continue
            self.outputs(entry)  # summarise it as it is, before the write
            if isinstance(self.keep, int):
                pairs = zip(iter_tensors(copy), iter_tensors(entry.value), strict=True)
                copies = {  # the copies' own memory: paid for, and given back when dropped
                    storage_key(new): new.untyped_storage().nbytes()
                    for (_, new), (_, old) in pairs
                    if new is not old
                }
                if self._kept_bytes + sum(copies.values()) > self.keep:
                    self._release(entry)
                    continue
                self._let_go(key)
                for copied, nbytes in copies.items():
                    if copied is None:
                        self._kept_bytes += nbytes  # no key: paid for, never given back
                    else:
                        self._hold(copied, nbytes)
            entry.value = copy

    def _copy_measures_alike(self, entry: _Entry, key: _Key, copy: Any) -> bool:
        """Whether ``copy`` (of the tensors of ``entry``'s value on memory ``key``) gives
        the summary the value would give now, so it may wait for the first read: the value
        unchanged since its node ran, each tensor copied with its own strides (``clone``
        keeps those of a dense tensor: the same layout, its reductions in the same order;
        a gapped view's copy is contiguous, a layout the record must not show), and every
        value kept (a budget may drop it). A view (an in-place node's value too) is then
        measured on its copy, which shares no memory with what it viewed: nothing is
        derived from that."""
        value = entry.value
        if self.keep != "all" or entry.outputs is not None:
            return False
        if entry.versions is None or entry.versions != note_versions(value):
            return False
        if type(value) is torch.Tensor:  # most values: one plain tensor
            return copy.stride() == value.stride()
        return all(
            new.stride() == old.stride()
            for (_, old), (_, new) in zip(iter_tensors(value), iter_tensors(copy), strict=True)
            if storage_key(old) == key
        )

    def _release(self, entry: _Entry) -> None:
        """Drop a kept value that no longer fits the budget, and give its bytes back."""
        for key in {storage_key(t) for _, t in iter_tensors(entry.value)}:
            self._let_go(key)
        entry.value, entry.kept = None, False
        self._dropped += 1

    # -- Transformer: which new nodes each old node made ---------------------------------
    def _graph_tail(self) -> torch.fx.Node:
        """The last node of the new graph (its root sentinel while it is empty)."""
        return graph_tail(self.interpreter.new_graph)

    def _produced_since(self, tail: torch.fx.Node | None) -> tuple[str, ...]:
        new_nodes = reversed(self.interpreter.new_graph.nodes)
        fresh = list(itertools.takewhile(lambda n: n is not tail, new_nodes))
        return tuple(n.name for n in reversed(fresh))


class _RecordList(Sequence[NodeRecord]):
    """The records of the first ``count`` nodes run, each built when first read."""

    def __init__(self, recorder: Recorder, count: int) -> None:
        self._recorder = recorder
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> NodeRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[NodeRecord]: ...
    def __getitem__(self, index: int | slice) -> NodeRecord | list[NodeRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"record index {index} out of range ({self._count} nodes)")
        return self._recorder.record(index)


def _plans_of(graph: torch.fx.Graph, key: str = "_fxviz_plans") -> dict[torch.fx.Node, Any]:
    """Per-node plans (or texts, with ``key="_fxviz_texts"``) of a graph, kept across runs
    on the graph object itself.

    Not in a global ``WeakKeyDictionary``: its values would hold the graph's nodes, which
    hold the graph, so no entry (and no model) would ever be freed. On the graph, the
    plans die with it.
    """
    plans = vars(graph).get(key)
    if plans is None:
        plans = {}
        setattr(graph, key, plans)
    return plans


def _node_facts(
    texts: dict[torch.fx.Node, Any], node: torch.fx.Node
) -> tuple[str, str, str, tuple[torch.fx.Node, ...]]:
    """:func:`target_text`, :func:`module_path` and :func:`source_line` of ``node`` and
    its input nodes, remembered per graph while its target, args, kwargs and
    the meta entries they come from are the same objects (a qualified function name costs
    a few µs, ``all_input_nodes`` a list; records of every run need them)."""
    found = texts.get(node)
    meta = node.meta
    stack, trace = meta.get("nn_module_stack"), meta.get("stack_trace")
    if (
        found is None
        or found[0] is not node.target
        or found[1] is not node.args
        or found[2] is not node.kwargs
        or found[3] is not stack
        or found[4] is not trace
    ):
        facts = (
            target_text(node),
            module_path(node),
            source_line(node),
            tuple(node.all_input_nodes),
        )
        found = texts[node] = (node.target, node.args, node.kwargs, stack, trace, facts)
    return found[5]


def _plan(node: torch.fx.Node, submodules: dict[str, Any]) -> tuple[Any, ...]:
    """``(writes, inputs, args, target, unknown)``: valid while ``node.args`` and
    ``node.target`` stay the same objects (torch.fx replaces ``args`` and ``kwargs``
    together on every edit)."""
    writes = written_locations(node, submodules)
    unknown = runs_unknown_code(node, submodules)
    return (writes, tuple(node.all_input_nodes), node.args, node.target, unknown)


def _copy_if_on(t: torch.Tensor, key: _Key) -> torch.Tensor:
    """A detached copy of ``t`` if it lives on storage ``key`` (keeping requires_grad),
    with ``t``'s strides where that is cheap (see :func:`_copy_keeping_strides`)."""
    if storage_key(t) != key:
        return t
    copy = _copy_keeping_strides(t.detach())
    return copy.requires_grad_(True) if t.requires_grad else copy


def _copy_keeping_strides(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with its strides, so that it reads, and reduces, as ``t`` did.

    ``clone`` keeps a dense tensor's strides. A gapped view (``x[:, :3]``), whose memory
    spans at most twice its values, is copied into memory of that span, laid out alike;
    any other (an expanded view, a sparse slice) gets ``clone``'s dense copy.

    >>> x = torch.arange(12.0).reshape(3, 4)
    >>> _copy_keeping_strides(x[:, :3]).stride(), _copy_keeping_strides(x[:, :1]).stride()
    ((4, 1), (1, 1))
    """
    numel = t.numel()
    span = 1  # how many elements the view's memory spans
    for stride, size in sorted(zip(t.stride(), t.shape, strict=True)):
        if size != 1 and stride < span:  # it overlaps itself (an expanded view)
            return t.clone()
        span += stride * (size - 1)
    if numel == 0 or not numel < span <= 2 * numel:  # dense, or mostly gaps
        return t.clone()
    return t.new_empty(span).as_strided(t.shape, t.stride()).copy_(t)
