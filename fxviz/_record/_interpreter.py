"""The recording interpreter, and ``fxviz.record`` that runs a graph through it."""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

from fxviz._capture import JointGraph, bind_inputs
from fxviz._capture._cache import capture_once
from fxviz._capture._gradient_check import gradients_differ
from fxviz._capture._segments import tensors_in
from fxviz._collector import old_objects_set_aside
from fxviz._record._engine import Engine, check_engine, record_compiled
from fxviz._record._explain import drop_own_frames, wrap_node_failure
from fxviz._record._grads import Backward, GradientWatcher
from fxviz._record._joint import JointRecording, output_gradients
from fxviz._record._recorder import Keep, Recorder, check_keep
from fxviz._record._records import Recording
from fxviz._record._regions import leave_stopped_run
from fxviz._record._stats import StatsOption, check_stats
from fxviz._record._writes import graph_module_target
from fxviz._torch_compat import has_plain_codegen, input_spec_mismatch
from fxviz.capture import trace
from fxviz.errors import InputError, NodeError, RecordingInterrupted, TraceError

__all__ = [
    "RecordingInterpreter",
    "RecordingMixin",
    "as_recording_interpreter",
    "check_inputs",
    "record",
    "recording_class",
    "reject_specs",
]


class RecordingMixin:
    """Adds recording to any ``torch.fx.Interpreter`` (or ``Transformer``) subclass.

    It overrides only ``run`` and ``run_node``, and calls ``super()`` for both, so the
    subclass it is mixed into keeps every behaviour it has::

        run()                      <- RecordingMixin: new Recorder, NodeError on failure
          +-- run_node()           <- RecordingMixin: time, summarise, keep, snapshot
                +-- run_node()     <- your class's override, if any
                      +-- placeholder() / get_attr() / call_function()
                          call_method() / call_module() / output()   <- yours or torch's

    Everything ``torch.fx.Interpreter`` does stays as it is: the constructor and its
    arguments, ``run(*args, initial_env=..., enable_io_processing=...)``, ``boxed_run``,
    ``run_node``, the ``env`` (collected after each value's last use when
    ``garbage_collect_values`` is true), ``extra_traceback``. Only two things are added:

    - ``self.recording``, the :class:`Recording` of the latest run. When the interpreter
      collects values (``garbage_collect_values=True``, torch's default) the recording
      drops them too and keeps their statistics, as ``keep="stats"`` does; with
      ``garbage_collect_values=False`` it keeps every value. ``fxviz_configure`` chooses.
    - A node that raises reaches the caller as a :class:`fxviz.NodeError` that is also an
      instance of the node's own exception type (``except TypeError`` still catches it),
      with the partial recording on ``err.recording`` and the original on ``__cause__``.

    To record one run of your interpreter, ``fxviz.record(gm, x, interpreter=Double)`` is
    enough; mix this class in when you drive the interpreter yourself.

    Examples:
        >>> import torch, fxviz
        >>> class Double(torch.fx.Interpreter):
        ...     def call_function(self, target, args, kwargs):
        ...         return super().call_function(target, args, kwargs) * 2
        >>> class RecordingDouble(fxviz.RecordingMixin, Double):
        ...     pass
        >>> gm = fxviz.trace(lambda x: x + 1, torch.ones(1))
        >>> interp = RecordingDouble(gm)
        >>> interp.run(torch.ones(1))
        tensor([4.])
        >>> interp.recording["add"].outputs[0].max
        4.0
    """

    _fxviz_recorder: Recorder | None = None
    # the NodeError that stopped the latest run, held weakly: its traceback holds run()'s
    # frame, and so this interpreter (its values with it) until the collector's next pass
    _fxviz_error: weakref.ref[BaseException] | None = None
    fxviz_progress: Any = None  # a tqdm bar to advance once a node, when set
    _fxviz_options: dict[str, Any] = {"keep": None, "stats": True}  # noqa: RUF012 (read-only default)
    _fxviz_gradients = False  # hook the outputs for record(..., backward=...)

    def fxviz_configure(self, *, keep: Keep | None = None, stats: StatsOption = True) -> None:
        """Set what later runs keep: ``keep="all" | "stats" | <bytes>`` (``None``: follow
        ``garbage_collect_values``); ``stats`` on (taken when first read), ``"eager"``
        (taken as each node runs) or off. The interpreter's own behaviour (its ``env``
        included) is not changed."""
        if keep is not None:
            check_keep(keep)
        check_stats(stats)
        self._fxviz_options = {"keep": keep, "stats": stats}

    def fxviz_start(self) -> Recorder:
        """Begin a fresh recording (called by ``run``; the Debugger calls it directly)."""
        interp: Any = self
        keep = self._fxviz_options["keep"]
        if keep is None:
            collects = interp.garbage_collect_values and not isinstance(
                interp, torch.fx.Transformer
            )
            keep = "stats" if collects else "all"
        recorder = Recorder(self, keep=keep, stats=self._fxviz_options["stats"])
        recorder.next_run_node = super().run_node  # type: ignore[misc]  # bound once a run
        if self._fxviz_gradients:
            recorder.grads = GradientWatcher(recorder, stats=recorder.stats != "off")
            recorder.grads.watch_parameters(self.module)  # type: ignore[attr-defined]
        self._fxviz_recorder, self._fxviz_error = recorder, None
        return recorder

    def _fxviz_let_go(self) -> None:
        """The run stopped at a failed node, whose call's frames live on in the error's
        traceback and hold this interpreter (``record``'s own): it lets go of the
        recorder and the values, which the error's recording keeps, so that one dropped
        is freed at once (as the generated code's run does, ``_Run._let_go``)."""
        self._fxviz_recorder, self.env = None, {}

    @property
    def recording(self) -> Recording:
        """The recording of the latest run (possibly partial)."""
        recorder = self._fxviz_recorder
        if recorder is None:
            raise AttributeError("nothing recorded yet: call run() first")
        error = None if self._fxviz_error is None else self._fxviz_error()
        if error is None and self._fxviz_error is not None:  # the one raised is gone: its like
            original = recorder.entries[-1].error
            error = wrap_node_failure(recorder, original, self.module)  # type: ignore[attr-defined]
            if error is not None:
                error.__cause__ = original
        return recorder.recording(error=error)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        recorder = self.fxviz_start()
        grad = torch.is_grad_enabled()  # a failure inside a no_grad region leaves it as it was
        try:
            output = super().run(*args, **kwargs)  # type: ignore[misc]
        except KeyboardInterrupt as interrupt:
            leave_stopped_run(grad, self.env)
            recorder.release()  # the run is over: see Recorder.release
            raise RecordingInterrupted(
                f"interrupted after {len(recorder.entries)} nodes; the partial recording "
                "is on this exception's .recording",
                recording=recorder.recording(),
            ) from interrupt
        except Exception as error:
            leave_stopped_run(grad, self.env)  # it may have stopped inside a region
            recorder.release()
            wrapped = wrap_node_failure(recorder, error, self.module)  # type: ignore[attr-defined]
            if wrapped is None:
                raise  # not a node's failure (bad inputs, the user's own run())
            self._fxviz_error = weakref.ref(wrapped)
            drop_own_frames(error)  # the run stops here: see drop_own_frames
            recorder = None  # this frame lives on in the error's frames (their f_back)
            try:
                raise wrapped from error
            finally:
                wrapped = None  # this frame is on its traceback: no cycle through it
        recorder.finish(output)
        return output

    def run_node(self, n: torch.fx.Node) -> Any:
        interp: Any = self
        recorder = self._fxviz_recorder
        if recorder is None or (recorder.env is not None and recorder.env is not interp.env):
            # a run that bypassed our run(): Transformer.transform() and
            # ShapeProp.propagate() call Interpreter.run directly; each run starts with
            # a fresh env, which tells one run from the next
            recorder = self.fxviz_start()
        if recorder.env is None:
            recorder.env = interp.env
        value = recorder.run_node(n, recorder.next_run_node)
        if n.op == "output" and not recorder.complete:
            recorder.output, recorder.complete = value, True  # run() may still process it
        if self.fxviz_progress is not None:
            self.fxviz_progress.update()
        return value


class RecordingInterpreter(RecordingMixin, torch.fx.Interpreter):
    """A ``torch.fx.Interpreter`` that records every node it runs: fxviz's own
    (``fxviz.RecordingInterpreter`` is a deprecated public name: use ``fxviz.record``, or
    mix :class:`RecordingMixin` into an interpreter class).

    A drop-in for ``torch.fx.Interpreter``: the same arguments, ``run``, ``boxed_run``,
    ``run_node``, ``env`` and exceptions (see :class:`RecordingMixin`).

    Args:
        module: the ``GraphModule`` to run.
        garbage_collect_values: as for ``torch.fx.Interpreter``: free each value from
            ``env`` after its last use. The recording then keeps statistics and drops
            values too (``keep="stats"``), unless ``keep`` says otherwise.
        graph: run this graph instead of ``module.graph``.
        keep: ``"all"`` keeps every value in the recording, ``"stats"`` statistics only,
            an ``int`` values up to that many bytes; default: ``"stats"`` when
            ``garbage_collect_values`` else ``"all"``. It never changes ``env``.
        stats: take statistics (min/max/mean/std/NaN counts) of every output: ``True``
            when first read (kept values) or when a value is dropped, ``"eager"`` as each
            node runs, ``False`` never.

    Examples:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Linear(3, 2))
        >>> from fxviz._record import RecordingInterpreter
        >>> interp = RecordingInterpreter(gm, garbage_collect_values=False)
        >>> out = interp.run(torch.ones(4, 3))
        >>> interp.recording["linear"].shape, interp.recording["linear"].kept
        ((4, 2), True)
    """

    def __init__(
        self,
        module: torch.nn.Module,
        garbage_collect_values: bool = True,
        graph: torch.fx.Graph | None = None,
        *,
        keep: Keep | None = None,
        stats: StatsOption = True,
    ) -> None:
        super().__init__(module, garbage_collect_values=garbage_collect_values, graph=graph)
        self.fxviz_configure(keep=keep, stats=stats)

    def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``torch.fx.Interpreter.call_function``, giving the value ``GraphModule``'s code
        gives (``obj[key] = value`` gives ``obj``: see ``graph_module_target``); a class of
        the user's (``interpreter=``) keeps its own."""
        if target is operator.setitem:  # else torch's, inlined (no extra frame a node)
            target = graph_module_target(target)
        assert not isinstance(target, str)
        return target(*args, **kwargs)


@functools.cache
def recording_class(interpreter: type[torch.fx.Interpreter]) -> type[torch.fx.Interpreter]:
    """The user's Interpreter/Transformer class with :class:`RecordingMixin` mixed in (made
    once per class; ``fxviz.recording_class`` is its deprecated public name).

    >>> import torch
    >>> recording_class(torch.fx.Interpreter).__name__
    'RecordingInterpreter'
    """
    if not (isinstance(interpreter, type) and issubclass(interpreter, torch.fx.Interpreter)):
        raise TypeError(
            f"interpreter must be a torch.fx.Interpreter subclass or instance, not {interpreter!r}"
        )
    if issubclass(interpreter, RecordingMixin):
        return interpreter
    name = f"Recording{interpreter.__name__}"
    return type(name, (RecordingMixin, interpreter), {"__module__": interpreter.__module__})


def as_recording_interpreter(
    gm: torch.nn.Module,
    interpreter: type[torch.fx.Interpreter] | torch.fx.Interpreter | None,
    *,
    keep: Keep,
    stats: StatsOption,
) -> Any:
    """An interpreter instance that records: fxviz's own, the user's class, or a copy of
    the user's instance (the original is left untouched).

    It is private to ``record`` and the Debugger, so it is set up for them: ``env`` keeps
    every value when ``keep="all"`` (``Recording.env``) and frees them otherwise, and
    torch's "While executing" text is not added to the node's exception (the NodeError
    says where it happened)."""
    if interpreter is None:
        instance: Any = RecordingInterpreter(gm, keep != "all", keep=keep, stats=stats)
    elif isinstance(interpreter, torch.fx.Interpreter):
        if interpreter.graph is not gm.graph:
            raise TypeError(
                f"this {type(interpreter).__name__} instance was made for another graph; pass "
                f"its class (interpreter={type(interpreter).__name__}) or an instance made for "
                "this GraphModule"
            )
        instance = copy.copy(interpreter)
        instance.__class__ = recording_class(type(interpreter))
    else:
        instance = recording_class(interpreter)(gm)
    instance.fxviz_configure(keep=keep, stats=stats)
    instance.extra_traceback = False
    if not isinstance(instance, torch.fx.Transformer):
        instance.garbage_collect_values = keep != "all"
        if instance.garbage_collect_values and not hasattr(instance, "user_to_last_uses"):
            instance.user_to_last_uses = _last_uses(instance.graph)
    return instance


def record(
    gm_or_module: Any,
    *inputs: Any,
    interpreter: type[torch.fx.Interpreter] | torch.fx.Interpreter | None = None,
    keep: Keep = "all",
    stats: StatsOption = True,
    progress: bool | None = None,
    backward: Backward = None,
    engine: Engine | None = None,
    method: str = "auto",
    **kwargs: Any,
) -> Recording:
    """Run a graph node by node and record what every node produced.

    The graph runs as recording code generated for it (like ``GraphModule.forward``, made
    once per graph), or through the recording interpreter when ``interpreter=`` or
    ``backward=`` is given; the recording is the same either way.

    Args:
        gm_or_module: a ``GraphModule``, or anything :func:`fxviz.trace` accepts (traced
            first, with ``inputs`` as example inputs) or returns: a ``JointGraph`` gives
            a ``JointRecording`` (the forward graph, then the backward graph on the real
            saved tensors; ``backward`` defaults to ``True`` there).
        *inputs, **kwargs: the inputs, as for ``model(*inputs, **kwargs)`` (keyword
            inputs named like the options below go to fxviz, not to the model).
        interpreter: run through your own ``torch.fx.Interpreter`` subclass (a class, or
            an instance, which is copied); its behaviour is unchanged. A ``Transformer``
            subclass is recorded symbolically: ``.output`` is the new ``GraphModule`` and each
            record's ``produced`` names the new nodes made from it.
        keep: ``"all"`` keeps every value; ``"stats"`` only statistics; an ``int`` keeps
            values up to that many bytes, then drops values (keeping statistics) and warns.
        stats: take statistics of every output (``False``: shapes, dtypes and timing
            only). ``True`` takes them when a record is first read, or as the node runs
            when its value is not kept; ``"eager"`` always as the node runs (the same
            numbers; only when they are computed differs). Inputs, parameters and buffers
            are measured as the graph runs, once per version of each tensor.
        progress: show a progress bar (``None``: only when the run takes over a second).
        backward: also run the backward pass and record every gradient: ``True``
            differentiates the sum of the output, a callable ``output -> scalar loss`` that
            loss, and tensor(s) are the gradients of the output tensors. ``rec[name].grad``
            then summarises the gradient with respect to that node's output (values kept
            under the same ``keep=`` budget) and ``rec.gradients`` lists them in backward
            order, parameters' included. Parameters' ``.grad`` is left untouched.
        engine: ``"compiled"`` (the default: generated recording code, about the cost of
            ``gm(*inputs)``) or ``"interpreted"`` (the recording interpreter, as the
            Debugger runs). Both give the same recording; ``interpreter=`` and
            ``backward=`` always use the interpreted one.
        method: how to capture a model that is not a graph yet, as for
            :func:`fxviz.trace`. A model recorded again with inputs of the same signature
            re-uses its capture while the model is unchanged (``fxviz.trace`` says more).

    Returns:
        A :class:`Recording`; ``rec.output`` is identical to ``gm(*inputs)``.

    Raises:
        NodeError: a node raised; the message names it, its target and its input shapes,
            and ``err.recording`` holds everything recorded until then.
        InputError: the inputs do not fit the graph's placeholders.
        RecordingInterrupted: Ctrl-C; ``err.recording`` holds the partial recording.

    Examples:
        >>> import torch, fxviz
        >>> rec = fxviz.record(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.ones(2, 4))
        >>> [(r.name, r.shape) for r in rec.values()]
        [('input_1', (2, 4)), ('_0', (2, 3)), ('_1', (2, 3)), ('output', (2, 3))]
        >>> rec["_1"].outputs[0].min >= 0
        True
    """
    reject_specs(inputs, "fxviz.record")
    reject_strided_nested((inputs, kwargs), "fxviz.record")
    if isinstance(gm_or_module, JointGraph):
        return _record_joint(  # type: ignore[return-value]  (a JointRecording)
            gm_or_module, inputs, kwargs, backward=True if backward is None else backward,
            interpreter=interpreter, keep=keep, stats=stats, progress=progress, engine=engine,
        )  # fmt: skip
    gm = capture_once(trace, gm_or_module, inputs, kwargs, method)
    if backward is not None and backward is not False:
        gm = _eager_gradients(gm, gm_or_module, inputs, kwargs, method)
    inputs = bind_inputs(gm, inputs, kwargs)
    with old_objects_set_aside(len(gm.graph.nodes)):  # a few objects a node
        return _record_graph(gm, inputs, interpreter, keep, stats, progress, backward, engine)


def _record_graph(
    gm: torch.fx.GraphModule,
    inputs: tuple[Any, ...],
    interpreter: type[torch.fx.Interpreter] | torch.fx.Interpreter | None,
    keep: Keep,
    stats: StatsOption,
    progress: bool | None,
    backward: Backward,
    engine: Engine | None,
) -> Recording:
    """:func:`record` of a graph and its bound inputs."""
    chosen = check_engine(engine)
    plain = interpreter is None and (backward is None or backward is False)
    if engine == "compiled" and not plain:
        raise InputError(
            "engine='compiled' cannot run interpreter= or backward=: leave engine out "
            "(they run on the interpreted engine)"
        )
    if plain:
        check_keep(keep)
        check_stats(stats)
        check_inputs(gm, inputs)
        compiled = record_compiled(
            gm, inputs, keep=keep, stats=stats, progress=progress, engine=chosen
        )
        if compiled is not None:
            return compiled
    instance = as_recording_interpreter(gm, interpreter, keep=keep, stats=stats)
    if isinstance(instance, torch.fx.Transformer):
        if backward is not None and backward is not False:
            raise InputError("backward= needs a real run: a Transformer runs symbolically")
        return _record_transformer(instance, inputs)
    check_inputs(gm, inputs)
    if backward is not None and backward is not False:
        return _record_with_backward(instance, inputs, backward, progress)
    with progress_bar(instance, progress, "fxviz record"):
        try:
            instance.run(*inputs)
        except NodeError:
            instance._fxviz_let_go()
            raise
    return instance.recording


def _eager_gradients(
    gm: torch.fx.GraphModule, obj: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], method: str
) -> torch.fx.GraphModule:
    """A capture whose backward pass is eager's: ``gm``, or, where its gradients are
    not eager's (a compile-only branch with eager's output), one real run when fxviz
    chose the capture (``method="auto"``); refused when the caller chose it."""
    why = gradients_differ(gm)
    if why is None:
        return gm
    if gm is not obj and method == "auto":
        return capture_once(trace, obj, inputs, kwargs, "real")
    raise TraceError(why)


def _record_joint(
    joint: JointGraph,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    backward: Backward,
    **options: Any,
) -> JointRecording:
    """Record the forward graph, then the backward graph on the real saved tensors."""
    inputs = joint.bind(inputs, kwargs)
    keep = options.pop("keep")
    primals = joint.primals(*inputs)
    fw_rec = record(joint.forward, *primals, keep="all", **options)
    fw_out = list(fw_rec.output)
    _, saved, _ = joint._split(fw_out)
    tangents, through_views = output_gradients(joint, fw_out, backward, primals)
    bw_rec = record(joint.backward, *saved, *tangents, keep=keep, **options)
    return JointRecording(joint, fw_rec, bw_rec, joint._grads(bw_rec.output, through_views))


@contextlib.contextmanager
def progress_bar(interp: Any, show: bool | None, desc: str) -> Iterator[None]:
    """fxviz's one progress bar: ``RecordingMixin.run_node`` advances it once a node.

    ``show``: ``True`` always, ``None`` only once a run takes over a second, ``False`` never.
    """
    if show is False:
        yield
        return
    from tqdm.auto import tqdm

    total = len(interp.graph.nodes)
    with tqdm(total=total, desc=desc, unit="node", delay=0 if show else 1.0) as bar:
        interp.fxviz_progress = bar
        try:
            yield
        finally:
            interp.fxviz_progress = None


def _record_with_backward(
    instance: Any, inputs: tuple[Any, ...], backward: Backward, progress: bool | None
) -> Recording:
    instance._fxviz_gradients = True
    try:
        with progress_bar(instance, progress, "fxviz record"):
            instance.run(*inputs)
    except BaseException:
        recorder = instance._fxviz_recorder
        if recorder is not None and recorder.grads is not None:
            recorder.grads.remove()  # the parameters' hooks must not outlive the run
        raise
    recorder = instance._fxviz_recorder
    recorder.grads.run_backward(recorder.output, backward)
    return instance.recording


def _record_transformer(instance: Any, inputs: tuple[Any, ...]) -> Recording:
    if inputs:
        raise InputError(
            f"{type(instance).__name__} is a Transformer: it runs symbolically and takes no "
            "inputs. Record the transformed module instead: "
            "fxviz.record(fxviz.record(gm, interpreter=Xformer).output, *inputs)"
        )
    recorder = instance.fxviz_start()
    new_gm = instance.transform()
    output_node = next(iter(reversed(new_gm.graph.nodes)))
    last = recorder.entries[-1]
    last.produced = (*last.produced, output_node.name)
    recorder.finish(new_gm)
    return recorder.recording()


def reject_specs(inputs: tuple[Any, ...], caller: str) -> None:
    """Raise :class:`InputError` for ``fxviz.spec(...)`` inputs: they have no values."""
    for i, value in enumerate(inputs):
        cls = type(value)
        if cls.__name__ == "TensorSpec" and cls.__module__.startswith("fxviz."):
            raise InputError(
                f"input {i} is {value!r}, a spec: it describes a shape and dtype but holds "
                f"no values, so {caller} cannot run the graph on it. Specs are for "
                "fxviz.shapes(model, spec, mode='fake' or 'meta'); to run on random "
                "values of that shape pass spec.materialize(), or pass a real tensor."
            )


def reject_strided_nested(inputs: Any, caller: str) -> None:
    """Raise :class:`InputError` for nested tensors of the strided layout among
    ``inputs``: they have no shape or strides to read (torch raises an internal error)."""
    for t in tensors_in(inputs):
        if t.is_nested and t.layout == torch.strided:
            raise InputError(
                f"an input is a nested tensor of layout torch.strided ({t.size(0)} components), "
                f"which has no shape or strides, so {caller} cannot describe its values. "
                "Make it with torch.nested.nested_tensor(..., layout=torch.jagged), which "
                f"{caller} takes, or pass its components as separate tensors."
            )


def check_inputs(gm: torch.nn.Module, inputs: tuple[Any, ...]) -> None:
    """Raise :class:`InputError` when ``inputs`` cannot fill the graph's placeholders."""
    graph: torch.fx.Graph = gm.graph  # type: ignore[assignment]
    if not any(node.op == "output" for node in reversed(graph.nodes)):
        raise TraceError(  # drawn and diffed as it is, but nothing to run
            f"the graph of {type(gm).__name__} has no output node, so it returns "
            "nothing to record: add one (gm.graph.output(node); gm.recompile())"
        )
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if not has_plain_codegen(graph):
        problem = input_spec_mismatch(graph, inputs)
        if problem is not None:
            raise InputError(
                f"the inputs do not fit this exported graph: {problem}. Pass them as for "
                "the model's forward (positionally; keyword inputs are not supported yet)."
            )
        return
    names = [str(n.target) for n in placeholders]
    if any(name.startswith("*") for name in names):
        return
    required = [n for n in placeholders if not n.args]
    if len(required) <= len(inputs) <= len(placeholders):
        return
    want = (
        f"{len(required)}"
        if len(required) == len(placeholders)
        else f"{len(required)} to {len(placeholders)}"
    )
    got = ", ".join(_describe_value(v) for v in inputs) or "nothing"
    raise InputError(
        f"the graph takes {want} input(s) ({', '.join(names)}) but {len(inputs)} were given: "
        f"{got}. Pass them as for gm(*inputs)."
    )


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}"
    return type(value).__name__


def _last_uses(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """For each node, the values whose last use it is (as ``Interpreter.__init__`` builds)."""
    seen: set[torch.fx.Node] = set()
    last_uses: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in reversed(graph.nodes):
        for used in node.all_input_nodes:
            if used not in seen:
                seen.add(used)
                last_uses.setdefault(node, []).append(used)
    return last_uses
