"""The compiled recording engine: ``fxviz.record`` runs the graph's generated code
(``_codegen``) and gets the same :class:`Recording` as through ``RecordingInterpreter``.

One contract, two engines. The interpreted one (``RecordingMixin``) composes with any
``torch.fx.Interpreter`` and steps node by node (the Debugger); this one costs about what
``GraphModule.forward`` costs. Both fill the same :class:`Recorder`: entries, the memory
budget, snapshots before in-place writes, pending statistics. The generated code calls
back here once a node (``ran``), or twice for a node that may write in place (``pre`` and
``post``: snapshots and version checks as ``Recorder.run_node`` does them).

``fxviz.record(..., engine=)`` picks the engine explicitly; left out, it is ``ENGINE``
(``"compiled"``), which the tests' ``recording_engine`` fixture switches to run every
recording test on both. No environment variable is read.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import torch
import torch.fx

from fxviz._record._attrs import module_attr
from fxviz._record._codegen import Compiled, compiled_for
from fxviz._record._explain import drop_own_frames, wrap_node_failure
from fxviz._record._recorder import Keep, Recorder, _Entry
from fxviz._record._records import Recording
from fxviz._record._regions import leave_stopped_run
from fxviz._record._stats import cached_summary, view_summary
from fxviz._record._writes import aliased_inputs, flat_tensors, tensor_inputs
from fxviz._torch_compat import is_alias_of
from fxviz.errors import InputError, RecordingInterrupted

__all__ = ["ENGINE", "ENGINES", "Engine", "check_engine", "record_compiled"]

Engine = Literal["compiled", "interpreted"]
ENGINES: tuple[Engine, ...] = ("compiled", "interpreted")
ENGINE: Engine = "compiled"  # fxviz.record's engine when none is passed


def check_engine(engine: str | None) -> Engine:
    """``engine``, or the default :data:`ENGINE` for ``None``.

    >>> check_engine(None), check_engine("interpreted")
    ('compiled', 'interpreted')
    """
    if engine is None:
        return ENGINE
    if engine not in ENGINES:
        raise InputError(f"unknown engine: {engine!r} (must be one of {list(ENGINES)})")
    return engine


_TENSOR = torch.Tensor
_PARAMETER = torch.nn.Parameter
_CONTAINERS = (torch.Tensor, tuple, list)


class _Run:
    """One run of generated code: what ``Interpreter`` would hold (``module``, ``env``,
    ``args_iter``), the :class:`Recorder`, and the callbacks the code makes."""

    placeholder_impl = torch.fx.Interpreter.placeholder
    _fetch_attr = torch.fx.Interpreter.fetch_attr

    def __init__(self, gm: torch.fx.GraphModule, compiled: Compiled, keep: Keep, stats: Any):
        self.module = gm
        self.graph: torch.fx.Graph = gm.graph
        self.compiled = compiled
        self.env: dict[torch.fx.Node, Any] = {}
        self.args_iter: Any = iter(())
        self.fxviz_progress: Any = None
        self.recorder = Recorder(self, keep=keep, stats=stats)
        self._keep_all = self.recorder.keep == "all"
        self._lazy = self.recorder.stats == "lazy"
        self._off = self.recorder.stats == "off" and self._keep_all
        self._ticked = 0
        self._progress: bool | None = False
        self._show_at = 0.0
        self._foreseen: list[torch.Tensor] = []
        self._owners: dict[str, Any] = {}  # path -> module, looked up this run

    def run_node(self, node: torch.fx.Node) -> Any:
        raise NotImplementedError("the compiled engine runs the graph's code, not node by node")

    def placeholder(self, target: str, args: tuple[Any, ...]) -> Any:
        return self.placeholder_impl(target, args, {})

    def fetch_attr(self, target: str, owner: str, atom: str) -> Any:
        """``Interpreter.fetch_attr(target)`` (``owner.atom``), a tenth of the cost: the
        modules on the path are looked up once a run (``_owner``), then one lookup
        (``module_attr``) where it calls ``hasattr`` and ``getattr`` at every step."""
        try:
            found = self._owners.get(owner)
            if found is None:
                found = self._owner(owner)
            return module_attr(found, atom)
        except AttributeError:
            return self._fetch_attr(target)  # its error, exactly

    def rebound(self) -> None:
        """A node assigned module attributes: look paths up again from here on."""
        self._owners.clear()

    def _owner(self, path: str) -> Any:
        """The object at dotted ``path`` under the module, remembered for this run (until
        a node runs code that could rebind it: see ``pre``)."""
        parent, _, atom = path.rpartition(".")
        if not atom:
            found = self.module
        else:
            above = self._owners.get(parent)
            found = module_attr(self._owner(parent) if above is None else above, atom)
        self._owners[path] = found
        return found

    # -- called by the generated code ----------------------------------------------------
    def ran(self, i: int, value: Any, elapsed: float, inputs: tuple[Any, ...]) -> None:
        """Record node ``i``, which cannot write in place (no version checks needed)."""
        self.flush(i, (value,), (inputs,), (0.0,), (elapsed,))

    def flush(
        self,
        first: int,
        values: tuple[Any, ...],
        inputs: tuple[tuple[Any, ...], ...],
        starts: tuple[float, ...],
        ends: tuple[float, ...],
    ) -> None:
        """Record nodes ``first``, ``first + 1``, ... (none of which can write in place),
        with the values they gave, their inputs' values and clock readings around their
        calls. Handed over in a batch (when all values are kept) before the next node that
        may write in place, so what is noted here is what it was as each node ran.

        With every value kept and statistics waiting, most nodes (a plain tensor that views
        no summarised value) need nothing now but their value's version: their
        entries are made when the recording is first read (``Recorder.defer``), from what
        is noted here. The others are described now, as ``Recorder.describe`` does."""
        recorder = self.recorder
        if not (self._keep_all and self._lazy):
            for k, value in enumerate(values):
                recorder._append(self._entry(first + k, value, inputs[k], ends[k] - starts[k]))
            return
        plains, input_nodes = self.compiled.plain, self.compiled.inputs
        stamped = recorder._stamped.keys()
        slots: list[Any] = []
        for k, value in enumerate(values):
            i = first + k
            if (
                type(value) is _TENSOR
                and plains[i]
                and not _views_any(value, input_nodes[i], inputs[k], stamped)
            ):
                try:
                    version = value._version
                except RuntimeError:  # an inference tensor has no version: summarise now
                    pass
                else:
                    slots.append((i, value, inputs[k], ends[k] - starts[k], version))
                    continue
            slots.append(self._entry(i, value, inputs[k], ends[k] - starts[k]))
        recorder.defer(_Deferred(self.compiled, first, slots))

    def _entry(self, i: int, value: Any, given: tuple[Any, ...], elapsed: float) -> _Entry:
        """The entry of node ``i`` (which cannot write in place), described now."""
        recorder = self.recorder
        node = self.compiled.nodes[i]
        kept = self._keep_all or recorder._admit(node.op, value)
        entry = _Entry(node, value, kept, elapsed)
        if value is None:  # nothing to describe (torch.export's metadata checks give None)
            entry.outputs = ()
            return entry
        plain_op = self.compiled.plain[i]
        if not plain_op and self._lazy and (type(value) is _PARAMETER or type(value) is _TENSOR):
            # an input or a parameter (it outlives the run): what ``describe`` does, inlined
            entry.outputs = cached_summary(value)
            if not value.is_inference():  # which has no version
                recorder.stamp(entry, value._version)
            return entry
        # The common cases, inlined (the same result as the general one below, for less):
        # one plain tensor out, plain tensors or scalars in, and statistics that wait (or
        # none). Viewing none of its inputs, there is nothing to do but note its version;
        # viewing some (a view, a reshape, a no-op ``.to``), see ``_view``.
        plain = type(value) is _TENSOR and plain_op
        viewed: tuple[int, ...] | None = None
        if plain:
            viewed = _views(value, given)
            plain = viewed is not None
            viewed = viewed or None
        if plain and kept and self._lazy:
            try:
                version = value._version
            except RuntimeError:  # an inference tensor has no version: summarise now
                plain = False
            else:
                if viewed is None:
                    entry.versions = (version,)
                else:
                    inputs = self.compiled.inputs[i]
                    plain = self._view(entry, value, version, inputs, given, viewed)
        elif viewed is not None:
            plain = False
        if not plain or not (self._off or (kept and self._lazy)):
            before = tensor_inputs(self.compiled.inputs[i], given) if given else []
            recorder.describe(entry, value, before)
        return entry

    def _view(
        self,
        entry: _Entry,
        value: torch.Tensor,
        version: int,
        nodes: tuple[Any, ...],
        inputs: tuple[Any, ...],
        viewed: tuple[int, ...],
    ) -> bool:
        """What ``Recorder.describe`` does for a kept plain tensor (of version ``version``)
        that shares memory with its inputs at positions ``viewed``, statistics waiting:
        note which inputs it views, and take its statistics from those of an input it is a
        whole view of, when that input has them (a parameter, an input, a view of one);
        else note its version. Only inputs it views can lend it their statistics. ``False``
        (nothing done) when one of those is an inference tensor."""
        recorder = self.recorder
        bases = []
        for j in viewed:
            base = recorder._stamped.get(nodes[j])
            if base is not None and base.outputs:
                t = inputs[j]
                try:
                    if base.stamp == t._version and (
                        not recorder._written or recorder.unwritten(base, t)
                    ):
                        bases.append((t, base.outputs[0], base.stamp))
                except RuntimeError:  # an inference tensor: the general way
                    return False
        entry.aliases = tuple(dict.fromkeys(nodes[j].name for j in viewed))
        derived = view_summary(value, bases) if bases else None
        if derived is None:
            entry.versions = (version,)
        else:
            entry.outputs = derived
            recorder.stamp(entry, version)
        return True

    def tick(self, count: int) -> None:
        """Advance the progress bar (the generated code calls this every few nodes); with
        ``progress=None``, make it once the run has taken a second."""
        self._ticked += count
        bar = self.fxviz_progress
        if bar is None and self._progress is None and time.perf_counter() > self._show_at:
            bar = self._show(count=self._ticked)
        elif bar is not None:
            bar.update(count)

    def _show(self, count: int = 0) -> Any:
        from tqdm.auto import tqdm

        total = len(self.compiled.nodes)
        self.fxviz_progress = tqdm(total=total, desc="fxviz record", unit="node", initial=count)
        return self.fxviz_progress

    def pre(self, i: int, inputs: tuple[Any, ...], written: list[Any] | None) -> list[Any]:
        """Before node ``i`` may write in place: copy kept values it is foreseen to write,
        take pending statistics of inputs that unknown code gets, note versions."""
        recorder = self.recorder
        self.rebound()  # code it runs may rebind a module or attribute on a path
        self._foreseen = flat_tensors(written) if written is not None else []
        if self._foreseen:
            recorder._snapshot(self._foreseen)
        before = tensor_inputs(self.compiled.inputs[i], inputs)
        if self.compiled.unknown[i] and before and recorder.stats != "off":
            recorder.settle([t for _, t, _ in before], self.compiled.nodes[i])
        return before

    def post(
        self, i: int, value: Any, elapsed: float, inputs: tuple[Any, ...], before: list[Any]
    ) -> None:
        """Record node ``i`` after ``pre``: which inputs it wrote, warn where unforeseen."""
        compiled, recorder = self.compiled, self.recorder
        node = compiled.nodes[i]
        entry = recorder.entry_for(node, value, elapsed, before)
        if before:
            recorder.note_writes(
                entry,
                before,
                foreseen=lambda: self._foreseen,
                values=lambda: dict(zip((n.name for n in compiled.inputs[i]), inputs, strict=True)),
            )
        recorder._append(entry)

    # -- the run -------------------------------------------------------------------------
    def run(self, inputs: tuple[Any, ...], progress: bool | None = False) -> Any:
        """Run the graph on ``inputs`` and record it; ``progress`` as for ``fxviz.record``."""
        self._progress = progress
        self._show_at = time.perf_counter() + 1.0
        if progress:
            self._show()
        try:
            return self._run(inputs)
        finally:
            if self.fxviz_progress is not None:
                self.fxviz_progress.close()

    def _run(self, inputs: tuple[Any, ...]) -> Any:
        self.args_iter = iter(self.graph.process_inputs(*inputs))
        grad = torch.is_grad_enabled()  # a failure inside a no_grad region leaves it as it was
        try:
            output, frame_locals = self.compiled.function(self)
        except KeyboardInterrupt as interrupt:
            self._failed(interrupt)
            leave_stopped_run(grad, self.env)
            self.recorder.release()
            raise RecordingInterrupted(
                f"interrupted after {len(self.recorder.entries)} nodes; the partial "
                "recording is on this exception's .recording",
                recording=self.recorder.recording(),
            ) from interrupt
        except Exception as error:
            node_failed = self._failed(error)
            leave_stopped_run(grad, self.env)  # it may have stopped inside a region
            self.recorder.release()
            if not node_failed:
                raise  # fxviz's own recording code failed: never disguise it
            wrapped = wrap_node_failure(self.recorder, error, self.module)
            if wrapped is None:
                raise
            drop_own_frames(error)  # the run stops here: see drop_own_frames
            self._let_go()
            try:
                raise wrapped from error
            finally:
                wrapped = None  # this frame is on its traceback: no cycle through it
        self.env = self._env(frame_locals)
        self.tick(self.recorder.count - self._ticked)
        self.recorder.finish(self.graph.process_outputs(output))
        return output

    def _let_go(self) -> None:
        """The run stopped at a node: the frames of its code live on in the tracebacks of
        the node's error (each frame holds its caller's, and this run's holds this object),
        so this object lets go of the recorder and of every value it holds, which the
        recording keeps: dropped, they are freed at once, not by the garbage collector."""
        del self.recorder
        self.env, self._foreseen, self._owners = {}, [], {}

    def _failed(self, error: BaseException) -> bool:
        """Record the node that raised ``error`` (``True``), or ``False`` when the error
        came from outside a node's own call; fill ``env`` as the run left it."""
        tb = error.__traceback__
        code = self.compiled.function.__code__
        while tb is not None and tb.tb_frame.f_code is not code:
            tb = tb.tb_next
        if tb is None:
            return False
        frame_locals = dict(tb.tb_frame.f_locals)
        index = self.compiled.call_lines.get(tb.tb_lineno)
        self._flush_left(frame_locals, index)
        self.env = self._env(frame_locals)
        if index is None or not isinstance(error, Exception):
            return False
        compiled = self.compiled
        elapsed = time.perf_counter() - frame_locals[compiled.starts[index]]
        # ``pre`` ran for a node that may write: its inputs and their versions then
        checked = bool(compiled.writes[index]) or compiled.unknown[index]
        before = frame_locals.get("_fx_b", []) if checked else []
        names = [n.name for n in compiled.inputs[index]]
        values = [frame_locals.get(compiled.names[n]) for n in compiled.inputs[index]]
        self.recorder.failed(
            compiled.nodes[index],
            error,
            elapsed,
            before,
            foreseen=lambda: self._foreseen,
            values=lambda: dict(zip(names, values, strict=True)),
        )
        return True

    def _flush_left(self, frame_locals: dict[str, Any], stop: int | None) -> None:
        """Record the nodes that ran (before ``stop``, when known) but were not handed
        over yet: the run stopped before their batch's ``flush``."""
        compiled = self.compiled
        names, nodes = compiled.names, compiled.nodes
        i = self.recorder.count
        while i < len(nodes) and (stop is None or i < stop):
            start, end = compiled.starts.get(i), f"_fx_c{i}"
            if end not in frame_locals or start not in frame_locals:
                break  # not run, or recorded on its own (``ran``, ``post``)
            value = frame_locals[names[nodes[i]]]
            inputs = tuple(frame_locals[names[n]] for n in compiled.inputs[i])
            self.flush(i, (value,), (inputs,), (frame_locals[start],), (frame_locals[end],))
            i += 1

    def _env(self, frame_locals: dict[str, Any]) -> dict[torch.fx.Node, Any]:
        """Each node that ran, and its value (every node, after a whole run)."""
        compiled = self.compiled
        try:  # a whole run: one pass at C speed
            return dict(
                zip(compiled.nodes, map(frame_locals.__getitem__, compiled.locals), strict=True)
            )
        except KeyError:
            names = compiled.names
            return {n: frame_locals[names[n]] for n in compiled.nodes if names[n] in frame_locals}


class _Deferred:
    """Nodes ``first``, ``first + 1``, ... of a run, handed over by one ``flush``: each
    slot an entry made as it ran, or what its entry is made from when first needed (its
    value, inputs, time and version then: which inputs a value views is a matter of
    memory, which no later write changes)."""

    __slots__ = ("compiled", "nodes", "slots")

    def __init__(self, compiled: Compiled, first: int, slots: list[Any]) -> None:
        self.compiled, self.slots = compiled, slots
        self.nodes = compiled.nodes[first : first + len(slots)]

    def entry(self, k: int) -> _Entry:
        slot = self.slots[k]
        if type(slot) is tuple:
            i, value, given, elapsed, version = slot
            slot = self.slots[k] = _Entry(self.compiled.nodes[i], value, True, elapsed)
            slot.versions = (version,)
            if given:
                slot.aliases = _viewed(value, self.compiled.inputs[i], given)
        return slot

    def kept(self, k: int) -> Any:
        slot = self.slots[k]
        if type(slot) is tuple:
            return slot[1]
        return slot.value if slot.kept else None


def _views_any(
    value: torch.Tensor, nodes: tuple[Any, ...], inputs: tuple[Any, ...], among: Any
) -> bool:
    """Whether ``value`` shares memory with the value of an input node in ``among``."""
    if among.isdisjoint(nodes):
        return False
    for n, t in zip(nodes, inputs, strict=True):
        if n in among and isinstance(t, torch.Tensor) and is_alias_of(value, t):
            return True
    return False


def _views(value: torch.Tensor, inputs: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The positions of the inputs whose memory ``value`` shares, when the inputs are all
    plain tensors or scalars; ``None`` when one is a container or a tensor subclass."""
    found: tuple[int, ...] = ()
    for j, t in enumerate(inputs):
        kind = type(t)
        if kind is _TENSOR or kind is _PARAMETER:
            if is_alias_of(value, t):
                found += (j,)
        elif isinstance(t, _CONTAINERS):
            return None
    return found


def _viewed(
    value: torch.Tensor, nodes: tuple[Any, ...], inputs: tuple[Any, ...]
) -> tuple[str, ...]:
    """The names of the inputs whose memory ``value`` shares, as ``aliased_inputs`` finds
    them (inlined for inputs that are all plain tensors or scalars)."""
    found = _views(value, inputs)
    if found is None:
        return aliased_inputs(value, tensor_inputs(nodes, inputs))
    if not found:
        return ()
    return tuple(dict.fromkeys(nodes[j].name for j in found))


def record_compiled(
    gm: torch.fx.GraphModule,
    inputs: tuple[Any, ...],
    *,
    keep: Keep,
    stats: Any,
    progress: bool | None,
    engine: Engine = "compiled",
) -> Recording | None:
    """Record ``gm(*inputs)`` with generated code; ``None`` when ``engine`` is
    ``"interpreted"`` or this graph needs it (the caller then uses it)."""
    if engine != "compiled":
        return None
    compiled = compiled_for(
        gm.graph, keep_values=keep == "all", submodules=lambda: dict(gm.named_modules())
    )
    if compiled is None:
        return None
    run = _Run(gm, compiled, keep, stats)
    run.run(inputs, progress)
    return run.recorder.recording()
