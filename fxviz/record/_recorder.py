"""The per-run bookkeeping behind a recording: one :class:`NodeRecord` per node run."""

from __future__ import annotations

import dataclasses
import itertools
import time
import warnings
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.fx

from fxviz._nodes import module_path, source_line, target_text
from fxviz._torch_compat import tree_map_only_tensors
from fxviz.errors import FxvizWarning
from fxviz.record._records import NodeRecord, Recording
from fxviz.record._summary import iter_tensors, summarize
from fxviz.record._writes import AliasIndex, storage_key, written_locations, written_tensors

__all__ = ["Keep", "Recorder", "check_keep"]

Keep = Literal["all", "stats"] | int
_FREE_OPS = ("placeholder", "get_attr")  # their values exist anyway: never count them


def check_keep(keep: Any) -> Keep:
    """Validate a ``keep=`` argument."""
    if keep in ("all", "stats") or (
        isinstance(keep, int) and not isinstance(keep, bool) and keep >= 0
    ):
        return keep
    raise ValueError(f"keep must be 'all', 'stats' or a byte budget (int >= 0), not {keep!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """What does not change between runs of one node, worked out once."""

    name: str
    op: str
    target: str
    module: str
    inputs: tuple[torch.fx.Node, ...]
    input_names: tuple[str, ...]
    writes: tuple[tuple[str, Any], ...]
    source: str


class Recorder:
    """Records each node an interpreter runs; used by ``RecordingMixin`` and ``Debugger``."""

    def __init__(
        self, interpreter: torch.fx.Interpreter, *, keep: Keep = "all", stats: bool = True
    ):
        self.interpreter = interpreter
        self.keep = check_keep(keep)
        self.stats = stats
        self.records: list[NodeRecord] = []
        self.output: Any = None
        self.complete = False
        self.error: BaseException | None = None
        self._position: dict[str, int] = {}
        self._plans: dict[torch.fx.Node, _Plan] = {}
        self._aliases = AliasIndex()
        self._snapshotted: set[str] = set()
        self._kept_storages: set[tuple[str, int]] = set()
        self._kept_bytes = 0
        self._dropped = 0
        self._unforeseen: list[str] = []
        self._transformer = isinstance(interpreter, torch.fx.Transformer)

    # -- running -------------------------------------------------------------------------
    def run_node(self, node: torch.fx.Node, run: Callable[[torch.fx.Node], Any]) -> Any:
        """Run ``node`` through ``run`` (the interpreter's own ``run_node``) and record it."""
        plan = self._plan(node)
        env = self.interpreter.env
        if plan.writes:
            self._snapshot(written_tensors(node, plan.writes, env), plan.name)
        before = [(n, t, t._version) for n in plan.inputs for t in _direct_tensors(env.get(n))]
        tail = self._graph_tail() if self._transformer else None
        start = time.perf_counter()
        try:
            value = run(node)
        except Exception as error:
            self._append(plan, None, time.perf_counter() - start, error=error)
            raise
        elapsed = time.perf_counter() - start
        written = tuple(dict.fromkeys(n.name for n, t, v in before if t._version != v))
        if written:
            self._check_foreseen(plan, node, written)
        produced = self._produced_since(tail) if self._transformer else ()
        self._append(plan, value, elapsed, mutates=written, produced=produced)
        return value

    def finish(self, output: Any) -> None:
        """Mark the run complete; warn once if the memory budget dropped values."""
        self.output = output
        self.complete = True
        if self._dropped:
            kept = len(self.records) - self._dropped
            warnings.warn(
                f"fxviz kept the values of {kept} of {len(self.records)} nodes "
                f"(budget keep={self.keep:,} bytes); later values were dropped and their "
                "statistics kept. Raise keep=<bytes> or use keep='all' to keep them.",
                FxvizWarning,
                stacklevel=3,
            )

    def recording(
        self, *, error: BaseException | None = None, upto: int | None = None
    ) -> Recording:
        """A :class:`Recording` of the first ``upto`` records (all by default)."""
        records = self.records if upto is None else self.records[:upto]
        done = self.complete and (upto is None or upto >= len(self.records))
        return Recording(
            self.interpreter.module,
            list(records),
            env=self.interpreter.env,
            output=self.output if done else None,
            complete=done,
            error=error if error is not None else self.error,
        )

    # -- bookkeeping ---------------------------------------------------------------------
    def _plan(self, node: torch.fx.Node) -> _Plan:
        plan = self._plans.get(node)
        if plan is None:
            inputs = tuple(node.all_input_nodes)
            plan = _Plan(
                name=node.name,
                op=node.op,
                target=target_text(node),
                module=module_path(node),
                inputs=inputs,
                input_names=tuple(n.name for n in inputs),
                writes=written_locations(node, self.interpreter.submodules),
                source=source_line(node),
            )
            self._plans[node] = plan
        return plan

    def _append(
        self,
        plan: _Plan,
        value: Any,
        elapsed: float,
        *,
        error: BaseException | None = None,
        mutates: tuple[str, ...] = (),
        produced: tuple[str, ...] = (),
    ) -> None:
        tensors = [t for _, t in iter_tensors(value)]
        kept = error is None and self._admit(plan.op, tensors)
        by_name = self._position
        inputs = [
            self.records[by_name[name]] if name in by_name else None for name in plan.input_names
        ]
        record = NodeRecord(
            index=len(self.records),
            name=plan.name,
            op=plan.op,
            target=plan.target,
            module=plan.module,
            inputs=plan.input_names,
            input_shapes=tuple(r.shape if r else None for r in inputs),
            input_dtypes=tuple(r.dtype if r else None for r in inputs),
            outputs=summarize(value, self.stats),
            time_s=elapsed,
            error=error,
            value=value if kept else None,
            kept=kept,
            mutates=mutates,
            aliases=self._aliases.add(plan.name, tensors) if tensors else (),
            produced=produced,
            source=plan.source,
        )
        by_name[plan.name] = len(self.records)
        self.records.append(record)

    def _admit(self, op: str, tensors: list[torch.Tensor]) -> bool:
        """Whether the memory budget lets this node's value be kept."""
        if self.keep == "all":
            return True
        if self.keep == "stats":
            return False
        if op in _FREE_OPS:
            return True
        cost, keys = self._cost(tensors)
        if self._kept_bytes + cost > self.keep:
            self._dropped += 1
            return False
        self._kept_bytes += cost
        self._kept_storages.update(keys)
        return True

    def _cost(self, tensors: list[torch.Tensor]) -> tuple[int, set[tuple[str, int]]]:
        cost, keys = 0, set()
        for t in tensors:
            key = storage_key(t)
            if key is None or key in self._kept_storages or key in keys:
                continue
            keys.add(key)
            cost += t.untyped_storage().nbytes()
        return cost, keys

    def _snapshot(self, tensors: list[torch.Tensor], writer: str) -> None:
        """Copy the kept values that ``writer`` is about to overwrite, before it does."""
        for t in tensors:
            key = storage_key(t)
            if key is None:
                continue
            for owner in self._aliases.owners(key):
                index = self._position[owner]
                record = self.records[index]
                if not record.kept or owner in self._snapshotted:
                    continue
                self._snapshotted.add(owner)
                copy = _copy_sharing(record.value, key)
                if self.keep not in ("all", "stats"):
                    cost = sum(
                        s.nbytes for _, s in iter_tensors(copy) if storage_key(s) is not None
                    )
                    if self._kept_bytes + cost > self.keep:
                        self.records[index] = dataclasses.replace(record, value=None, kept=False)
                        self._dropped += 1
                        continue
                    self._kept_bytes += cost
                self.records[index] = dataclasses.replace(record, value=copy)

    def _check_foreseen(self, plan: _Plan, node: torch.fx.Node, written: tuple[str, ...]) -> None:
        """Warn when a write happened that ``written_locations`` did not foresee."""
        foreseen = {
            storage_key(t) for t in written_tensors(node, plan.writes, self.interpreter.env)
        }
        env = self.interpreter.env
        for name in written:
            value = env.get(next(n for n in plan.inputs if n.name == name))
            keys = {storage_key(t) for t in _direct_tensors(value)}
            if keys & foreseen:
                continue
            stale = [
                o for k in keys if k for o in self._aliases.owners(k) if o not in self._snapshotted
            ]
            self._unforeseen.append(name)
            warnings.warn(
                f"node {plan.name!r} ({plan.op} {plan.target}) wrote to {name!r} in place in a "
                f"way fxviz did not foresee, so the kept values of {stale or [name]} show them "
                "after that write (their statistics are from before). Please report the op.",
                FxvizWarning,
                stacklevel=2,
            )

    def _graph_tail(self) -> torch.fx.Node | None:
        new_graph = self.interpreter.new_graph  # type: ignore[attr-defined]
        return next(iter(reversed(new_graph.nodes)), None)

    def _produced_since(self, tail: torch.fx.Node | None) -> tuple[str, ...]:
        new_graph = self.interpreter.new_graph  # type: ignore[attr-defined]
        fresh = list(itertools.takewhile(lambda n: n is not tail, reversed(new_graph.nodes)))
        return tuple(n.name for n in reversed(fresh))


def _direct_tensors(value: Any) -> list[torch.Tensor]:
    """Tensors in a value and one level of tuple/list (what a node can write through)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _copy_sharing(value: Any, key: tuple[str, int]) -> Any:
    """``value`` with each tensor that lives on ``key``'s memory replaced by a detached copy."""

    def copy(t: torch.Tensor) -> torch.Tensor:
        return t.detach().clone() if storage_key(t) == key else t

    return tree_map_only_tensors(copy, value)
