"""Step through a graph node by node, forwards and back, with breakpoints and post-mortem."""

from __future__ import annotations

import contextlib
import functools
import html
import threading
import weakref
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import torch
import torch.fx

from fxviz._capture import JointGraph, bind_inputs, register_traceable
from fxviz._capture._cache import capture_once
from fxviz._nodes import is_parameter_fetch, is_stepped_over
from fxviz._record._breakpoints import (
    Breakpoint,
    call_predicate,
)
from fxviz._record._debugger_breaks import BreakpointCommands
from fxviz._record._debugger_state import DebuggerState, node_state, status_line
from fxviz._record._explain import describe_failure, drop_own_frames
from fxviz._record._interpreter import (
    as_recording_interpreter,
    check_inputs,
    reject_specs,
    reject_strided_nested,
)
from fxviz._record._joint import joint_backward_inputs
from fxviz._record._random import RandomStream, may_draw_random
from fxviz._record._recorder import Keep
from fxviz._record._records import NodeRecord, unknown_node_message
from fxviz._record._regions import close_open_regions, region_entries, reopen
from fxviz._record._restore import RestoreCommands, parameter_keys, tensor_version
from fxviz._record._stats import StatsOption
from fxviz._torch_compat import autocast_state, autocast_state_as, store_node_value
from fxviz.capture import trace
from fxviz.errors import (
    DebuggerError,
    RecordingInterrupted,
    UnknownNodeError,
)

__all__ = ["Breakpoint", "Debugger", "node_state", "status_line"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _lets_go_on_return(
    command: Callable[Concatenate[Debugger, _P], _R],
) -> Callable[Concatenate[Debugger, _P], _R]:
    """A command that runs nodes, whose frames hold no debugger once it returned.

    A node that failed in Python code keeps, in its error's traceback, the frames of the
    code it called, and each frame holds its caller's (``f_back``): the frames this
    command ran in, which were still running when the node failed (``drop_own_frames``
    could not clear them then). Holding the debugger, they would make the debugger, its
    recorder and every value recorded a cycle that only the garbage collector frees. On
    return, the frames below this one are done: they let go of their locals, and this
    one of the debugger."""

    @functools.wraps(command)
    def run(self: Debugger, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return command(self, *args, **kwargs)
        finally:
            failed = self.error
            if failed is not None:
                drop_own_frames(failed)
            del self, failed  # this frame is on the error's traceback too

    return run


def _alone(
    command: Callable[Concatenate[Debugger, _P], _R],
) -> Callable[Concatenate[Debugger, _P], _R]:
    """A command that moves the debugger, run while no other one is: a notebook's cell
    and the widget's buttons (whose messages a kernel subshell runs in a thread of its
    own) can both drive one debugger, and a step started in one waits for the other.
    An :meth:`Debugger.interrupt` asked before the command starts is not its own."""

    @functools.wraps(command)
    def run(self: Debugger, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._moving:
            self._interrupted.clear()
            return command(self, *args, **kwargs)

    return run


class Debugger(DebuggerState, BreakpointCommands, RestoreCommands):
    """Run a graph one node at a time, with time travel, breakpoints and post-mortem.

    No threads of its own: each call runs nodes and returns. Going ``back`` moves a cursor
    over what was recorded; stepping forward again replays those records instead of
    running the nodes twice, so values, random numbers and in-place writes stay exactly
    as they were. Random ops draw from generators of the debugger's own (seeded from the
    global state when it was made), never from or into torch's global random state, so
    debuggers in several threads are independent; one debugger driven from two threads
    (a cell and the widget's buttons) runs one command at a time. Editing the graph
    while stepping raises :class:`fxviz.DebuggerError` at the first changed node;
    ``restart()`` then runs the graph as it is now.

    Args:
        gm_or_module: a ``GraphModule`` or anything :func:`fxviz.trace` accepts or returns
            (a ``JointGraph``: its backward graph, fed the real saved tensors of a forward
            run on ``inputs``; ``backward=`` as for :func:`fxviz.record`); a Debugger:
            a new one over its graph.
        *inputs, **kwargs: the inputs, as for ``model(*inputs, **kwargs)``.
        interpreter: your own ``torch.fx.Interpreter`` subclass (or instance) to run with.
        keep, stats, method: as for :func:`fxviz.record` (``method``: how to capture a
            model that is not a graph yet).
        skip_fetches: the debugger starts past the graph's inputs, and ``step()`` and
            ``back()`` step over them and over nodes that only fetch a parameter, buffer
            or constant (``get_attr``; an exported graph starts with dozens): no step a
            person takes (:attr:`status` counts the inputs as run, and never counts the
            fetches). They still run and are recorded, and a breakpoint on one still stops.

    Examples:
        >>> import torch, fxviz
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
        >>> dbg = fxviz.Debugger(model, torch.ones(2, 4))
        >>> dbg.break_at("_1")
        >>> dbg.continue_().name, dbg.current.name
        ('_0', '_1')
        >>> dbg.step().shape
        (2, 3)
        >>> dbg.back(2).name, dbg.status
        ('input_1', "stopped at '_0' (back) — 1/4 nodes")
    """

    def __init__(
        self,
        gm_or_module: Any,
        *inputs: Any,
        interpreter: type[torch.fx.Interpreter] | torch.fx.Interpreter | None = None,
        keep: Keep = "all",
        stats: StatsOption = True,
        skip_fetches: bool = True,
        method: str = "auto",
        **kwargs: Any,
    ) -> None:
        self.skip_fetches = skip_fetches
        self._moving = threading.RLock()  # see _alone
        self._interrupted = threading.Event()  # see interrupt
        if _is_transformer(interpreter):
            raise TypeError(
                f"{_class_name(interpreter)} is a torch.fx.Transformer: it runs symbolically, "
                "so there is nothing to step through. Record it with "
                "fxviz.record(gm, interpreter=...) and debug the module it returns."
            )
        reject_specs(inputs, "fxviz.Debugger")
        reject_strided_nested((inputs, kwargs), "fxviz.Debugger")
        if isinstance(gm_or_module, JointGraph):  # the backward pass, fed real saved tensors
            backward = kwargs.pop("backward", True)
            inputs = gm_or_module.bind(inputs, kwargs)
            kwargs = {}
            inputs = tuple(joint_backward_inputs(gm_or_module, *inputs, backward=backward))
            gm_or_module = gm_or_module.backward
        self.graph_module = capture_once(trace, gm_or_module, inputs, kwargs, method)
        inputs = bind_inputs(self.graph_module, inputs, kwargs)
        self.graph: torch.fx.Graph = self.graph_module.graph
        check_inputs(self.graph_module, inputs)
        self._inputs = inputs
        self._options: dict[str, Any] = {"interpreter": interpreter, "keep": keep, "stats": stats}
        self._breakpoints: list[Breakpoint] = []
        # What a run changes besides its values, put back by restart(): the random stream
        # the run draws from (its own, never the caller's global one), the module's
        # buffers, and parameters the graph writes in place (copied just before).
        self._random = RandomStream()
        # the modes the run is in: the caller's when it was made (the capture's too), the
        # grad mode then as the graph's own _set_grad_enabled nodes make it; the caller's
        # are back between steps
        self._made_in = (
            torch.is_grad_enabled(),
            torch.is_inference_mode_enabled(),
            autocast_state(),
        )
        self._buffers = {name: b.detach().clone() for name, b in self.graph_module.named_buffers()}
        self._parameters = parameter_keys(self.graph_module)
        self._parameter_copies: dict[str, torch.Tensor] = {}
        self._start()

    # -- moving --------------------------------------------------------------------------
    @_lets_go_on_return
    @_alone
    def step(self, n: int = 1) -> NodeRecord | None:
        """Run the next ``n`` nodes; stops early at an error, the end or a breakpoint.

        Returns the record of the last node run (the failing one after an error).
        """
        if n < 1:
            raise ValueError(f"step() takes n >= 1, not {n}; use back(n) to go back")
        self._check_can_run("step")
        last = None
        for i in range(n):
            start = self._pos
            last = self._skip_fetches(last)
            if self.error is not None:
                self._reason = "error"
                break
            if self._pos != start and self._pos in self._fetches:  # a breakpoint on it
                self._reason = "breakpoint"
                break
            last = self._advance()
            if self._stopped(last, check_breakpoints=i < n - 1):
                break
        else:
            self._reason = "step"
            last = self._skip_fetches(last)
            if self.error is not None:
                self._reason = "error"
        return self._record(last)

    def interrupt(self) -> None:
        """Stop the command running in another thread after the node it is running: it
        returns there, with :attr:`stop_reason` ``interrupted``, and the debugger goes
        on from there as after any stop.

        A Debugger widget's toolbar (``continue``, ``step10``, ``run_to_selected``) runs
        on a kernel subshell's thread in JupyterLab with ipykernel 7, out of reach of the
        kernel's interrupt button: ``app.debugger.interrupt()`` in a cell stops it.

        Examples:
            >>> import torch, fxviz
            >>> dbg = fxviz.Debugger(torch.nn.Sequential(torch.nn.Linear(4, 3)), torch.ones(2, 4))
            >>> dbg.interrupt()  # nothing is running: the next command is not stopped
            >>> dbg.continue_() is not None, dbg.stop_reason
            (True, 'end')
        """
        self._interrupted.set()

    def is_fetch(self, name: str) -> bool:
        """Whether node ``name`` only fetches a parameter, buffer or constant, which
        ``step()``/``back()`` step over (with ``skip_fetches=True``), as they do inputs."""
        return is_parameter_fetch(self.graph_module, self._node(name))

    def _skip_fetches(self, last: int | None) -> int | None:
        """Run the parameter fetches at the cursor, up to one a breakpoint names."""
        while self.skip_fetches and self._pos in self._fetches and self.error is None:
            upcoming = self._nodes[self._pos]
            if any(bp.before is not None and bp.before(upcoming) for bp in self._breakpoints):
                break
            last = self._advance()
        return last

    @_lets_go_on_return
    @_alone
    def continue_(self) -> NodeRecord | None:
        """Run until a breakpoint, an error or the end; returns the last record run."""
        self._check_can_run("continue_")
        while True:
            last = self._advance()
            if self._stopped(last, check_breakpoints=True):
                return self._record(last)

    @_lets_go_on_return
    @_alone
    def run_to(self, name: str) -> NodeRecord | None:
        """Stop just before node ``name`` runs, going forward or back (breakpoints ignored)."""
        target = self._index[self._node(name).name]
        if target < self._pos:
            return self.back(self._pos - target)
        if target == self._pos:
            self._reason = f"run_to {name}"
            return self._last()
        self._check_can_run("run_to")
        last = None
        while self._pos < target:
            last = self._advance()
            if self._stopped(last, check_breakpoints=False):
                return self._record(last)
        self._reason = f"run_to {name}"
        return self._record(last)

    @_alone
    def back(self, n: int = 1) -> NodeRecord | None:
        """Go back ``n`` nodes in time; returns the record of the last node run before the cursor."""
        if n < 0:
            raise ValueError(f"back() takes n >= 0, not {n}")
        for _ in range(n):
            self._pos = max(0, self._pos - 1)
            while self.skip_fetches and self._pos > 0 and self._pos in self._fetches:
                self._pos -= 1
        if self.skip_fetches and self._pos < self._first:
            self._pos = self._first  # before that, only inputs and fetches: the start
        self._reason = "back"
        return self._last()

    @_lets_go_on_return
    @_alone
    def restart(self) -> None:
        """Start again from the first node with a fresh recording, of the graph as it is now.

        Inputs the graph wrote in place are put back from their recorded copies, module
        buffers (batch-norm statistics, caches) and parameters the graph wrote in place
        as they were when the debugger was made, and the random stream the run draws
        from starts over, so the run repeats exactly (dropout included). The caller's own
        random state is never touched: the debugger draws from generators of its own,
        seeded from the global state when it was made (thread-safe: see ``_random``).
        """
        self._restore_inputs()
        with torch.no_grad():
            for name, saved in self._buffers.items():
                self.graph_module.get_buffer(name).copy_(saved)
            for name, saved in self._parameter_copies.items():
                self.graph_module.get_parameter(name).copy_(saved)
        self._warn_unrestorable_parameters()
        self._random.reset()
        self._start()

    # -- display -------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<fxviz.Debugger: {self.status}>"

    def _repr_html_(self) -> str:
        body = self.recording._repr_html_()
        return f"<div><p><b>fxviz.Debugger</b>: {html.escape(self.status)}</p>{body}</div>"

    # -- internals -----------------------------------------------------------------------
    def _start(self) -> None:
        before = vars(self).get("_recorder")  # the run restarted, if any
        self._nodes = list(self.graph.nodes)
        # what each node looked like: torch.fx replaces args/kwargs tuples on every edit
        self._shapes = [_shape(n) for n in self._nodes]
        # whether a node may draw random numbers, found as it first runs (a pass over
        # every node here cost ~0.25 s before a 50,000-node graph's first step)
        self._draws: dict[int, bool] = {}
        self._submodules = dict(self.graph_module.named_modules())
        self._index = {n.name: i for i, n in enumerate(self._nodes)}
        self._fetches = {  # and inputs, telemetry calls: no step a person takes
            i for i, n in enumerate(self._nodes) if is_stepped_over(self.graph_module, n)
        }
        self._uncounted = frozenset(  # inputs are drawn, and count as run from the start
            i for i in self._fetches if self._nodes[i].op != "placeholder"
        )
        options = self._options
        self._interp: Any = as_recording_interpreter(
            self.graph_module, options["interpreter"], keep=options["keep"], stats=options["stats"]
        )
        self._interp.extra_traceback = False
        self._recorder = self._interp.fxviz_start()
        # the recorder and its interpreter hold each other (and the recorder a hook of
        # ours): the hook is weak, and the recorder lets go of the interpreter when this
        # debugger goes (or restarts), so no cycle keeps their values past it
        self._recorder.before_write = _weakly(self._save_parameters_before_write)
        released = vars(self).get("_release")
        if released is not None:
            failed = before.entries[-1].error if before is not None and before.entries else None
            if failed is not None:  # the frames that ran it have all returned by now
                drop_own_frames(failed)
            released()
        # (weakly: the recorder can hold this debugger, in a failed node's traceback)
        self._release = weakref.finalize(self, _release, weakref.ref(self._recorder))
        self._parameter_versions = {
            n: tensor_version(p) for n, p in self.graph_module.named_parameters()
        }
        self._interp.env = {}
        self._interp.args_iter = iter(self.graph.process_inputs(*self._inputs))
        # Version counters are shared by a tensor and all its views: a write into an input
        # through any chain of views (split, getitem, ...) shows in its counter.
        self._input_versions = [tensor_version(t) for t in self.graph.process_inputs(*self._inputs)]
        self._pos = 0
        self._grad = self._made_in[0]
        self._paused_regions: list[tuple[torch.fx.Node, Any]] = []
        self._region_entries = region_entries(self._nodes)
        self._output: Any = None
        self._reason = "start"
        self._skip_fetches(None)  # the inputs and leading fetches: run, recorded
        self._first = self._pos

    def _advance(self) -> int:
        """Run (or replay) the node at the cursor; move past it unless it failed.

        Returns the index of the node's record (built only when someone reads it).
        """
        recorder = self._recorder
        index = self._pos
        if index < len(recorder.entries):  # replay what was recorded before going back
            if recorder.entries[index].error is None:
                self._pos += 1
            return index
        node = self._nodes[self._pos]
        self._check_graph_unchanged(self._pos)
        interp = self._interp
        draws = self._draws.get(index)
        if draws is None:
            draws = self._draws[index] = may_draw_random(node, self._submodules)
        private = self._random.active() if draws else contextlib.nullcontext()
        modes = self._enter_the_runs_modes()
        try:
            with private:
                value = interp.run_node(node)
            store_node_value(interp, node, value)  # what Interpreter.run does next
        except KeyboardInterrupt as interrupt:
            self._reason = "interrupted"
            raise RecordingInterrupted(
                f"interrupted while running {node.name!r}; the debugger is still at it",
                recording=self.recording,
            ) from interrupt
        except Exception:
            if len(recorder.entries) > index and (failed := recorder.entries[index].error):
                drop_own_frames(failed)  # the run stops here: see drop_own_frames
                return index  # the node failed and is recorded: the cursor stays on it
            raise  # a failure outside the node (fxviz itself): never hide it
        finally:
            self._leave_the_runs_modes(*modes)
        if node.op == "output":
            self._output = self.graph.process_outputs(value)
            self._recorder.finish(self._output)
        self._pos += 1
        return index

    def _enter_the_runs_modes(self) -> tuple[bool, contextlib.ExitStack | None]:
        """Put this thread in the run's own modes for a node; what :meth:`_leave_the_runs_modes`
        needs to give the caller its own back: inference mode and autocast as when the
        debugger was made, the grad mode as the graph's ``_set_grad_enabled`` nodes left
        it, and the regions its nodes opened (a Dynamo graph's autocast or inference_mode)
        entered again. Usually the caller's modes are those: nothing but the grad mode."""
        _, made_in_inference, made_in_autocast = self._made_in
        others = None
        if torch.is_inference_mode_enabled() != made_in_inference or (
            autocast_state() != made_in_autocast
        ):
            others = contextlib.ExitStack()
            others.enter_context(torch.inference_mode(made_in_inference))
            others.enter_context(autocast_state_as(made_in_autocast))
        caller = torch.is_grad_enabled()
        torch._C._set_grad_enabled(self._grad)
        if self._paused_regions:
            reopen(self._paused_regions, self._interp.env)
        return caller, others

    def _leave_the_runs_modes(self, caller: bool, others: contextlib.ExitStack | None) -> None:
        if self._region_entries:
            self._paused_regions = close_open_regions(self._interp.env, self._region_entries)
        self._grad = torch.is_grad_enabled()
        torch._C._set_grad_enabled(caller)
        if others is not None:
            others.close()

    def _check_graph_unchanged(self, index: int) -> None:
        """Raise if the graph was edited where it has yet to run (O(1) per node)."""
        node = self._nodes[index]
        previous = self._nodes[index - 1].next if index else next(iter(self.graph.nodes), None)
        if previous is not node:
            if previous is None or previous.op == "root":
                what = f"node {node.name!r} was erased"
            elif (
                previous.name in self._index and previous is self._nodes[self._index[previous.name]]
            ):
                what = f"node {node.name!r} was erased or moved"
            else:
                what = f"node {previous.name!r} was inserted before {node.name!r}"
        elif _edited(node, self._shapes[index]):
            what = f"node {node.name!r} was edited (its target or arguments changed)"
        else:
            return
        raise DebuggerError(
            f"the graph changed since the debugger started: {what}. The debugger still "
            "holds the graph as it was; call dbg.restart() to run the graph as it is now."
        )

    def _record(self, index: int | None) -> NodeRecord | None:
        return None if index is None else self._recorder.record(index)

    def _stopped(self, last: int, *, check_breakpoints: bool) -> bool:
        """After node ``last`` ran: should we stop here? Sets the stop reason."""
        if self._recorder.entries[last].error is not None:
            self._reason = "error"
            return True
        if self.done:
            self._reason = "end"
            return True
        if self._interrupted.is_set():  # from another thread: see interrupt
            self._interrupted.clear()
            self._reason = "interrupted"
            return True
        if not check_breakpoints:
            return False
        for bp in self._breakpoints:
            if bp.after is None:
                continue
            record = self._recorder.record(last)
            try:
                hit = call_predicate(bp, record)
            except DebuggerError as error:
                cause = type(error.__cause__).__name__
                self._reason = f"breakpoint {bp.description!r} raised {cause} after {record.name!r}"
                raise
            if hit:
                self._reason = bp.description
                return True
        upcoming = self._nodes[self._pos]
        for bp in self._breakpoints:
            if bp.before is not None and bp.before(upcoming):
                self._reason = "breakpoint"
                return True
        return False

    def _check_can_run(self, command: str) -> None:
        if self.error is not None:
            failed = self._recorder.record(self._pos)
            raise DebuggerError(
                f"{command}(): the debugger is stopped at {failed.name!r}, which raised "
                f"{type(failed.error).__name__}. Look at dbg.inputs() and dbg.error, then "
                "back() to earlier nodes or restart() after fixing the cause.\n\n"
                + describe_failure(failed, self.graph_module)
            )
        if self.done:
            raise DebuggerError(
                f"{command}(): the graph has already finished ({len(self._nodes)} nodes); "
                "dbg.output holds the result. Use back(), run_to(name) or restart()."
            )

    def _last(self) -> NodeRecord | None:
        return self._recorder.record(self._pos - 1) if self._pos else None

    def _node(self, name: str) -> torch.fx.Node:
        if isinstance(name, torch.fx.Node):
            name = name.name
        if name not in self._index:
            raise UnknownNodeError(unknown_node_message(name, self._index))
        return self._nodes[self._index[name]]

    def _ran(self, name: str) -> NodeRecord:
        index = self._index[self._node(name).name]
        if index >= self._pos:
            where = self.current.name if self.current is not None else "the end"
            raise DebuggerError(
                f"node {name!r} has not run yet (the debugger is at {where!r}); "
                f"use dbg.run_to({name!r}) and dbg.step() first"
            )
        return self._recorder.record(index)


register_traceable(Debugger, lambda debugger: debugger.graph_module)  # every verb: its graph


def _shape(node: torch.fx.Node) -> tuple[Any, ...]:
    """What a node does, by identity: torch.fx makes new args/kwargs on every edit."""
    return (node.op, node.target, node.args, node.kwargs)


def _edited(node: torch.fx.Node, then: tuple[Any, ...]) -> bool:
    op, target, args, kwargs = then
    return (
        node.op != op or node.target != target or node.args is not args or node.kwargs is not kwargs
    )


def _is_transformer(interpreter: Any) -> bool:
    cls = interpreter if isinstance(interpreter, type) else type(interpreter)
    return isinstance(cls, type) and issubclass(cls, torch.fx.Transformer)


def _class_name(interpreter: Any) -> str:
    cls = interpreter if isinstance(interpreter, type) else type(interpreter)
    return cls.__name__


def _release(recorder: weakref.ref[Any]) -> None:
    found = recorder()
    if found is not None:
        found.release()


def _weakly(method: Callable[[Any], None]) -> Callable[[Any], None]:
    """``method`` called through a weak reference to its object (a no-op once it died)."""
    ref = weakref.WeakMethod(method)

    def call(arg: Any) -> None:
        found = ref()
        if found is not None:
            found(arg)

    return call
