"""The recording interpreter, and ``fxviz.record`` that runs a graph through it."""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch
import torch.fx

from fxviz._record._explain import describe_failure
from fxviz._record._grads import Backward, GradientWatcher
from fxviz._record._recorder import Keep, Recorder
from fxviz._record._records import Recording
from fxviz._torch_compat import has_plain_codegen, input_spec_mismatch
from fxviz.capture import trace
from fxviz.errors import InputError, NodeError, RecordingInterrupted

__all__ = [
    "RecordingInterpreter",
    "RecordingMixin",
    "as_recording_interpreter",
    "check_inputs",
    "record",
    "recording_class",
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

    After a run, ``self.recording`` is the :class:`Recording`.
    """

    _fxviz_recorder: Recorder | None = None
    fxviz_progress: Any = None  # a tqdm bar to advance once a node, when set
    _fxviz_options: dict[str, Any] = {"keep": "all", "stats": True}  # noqa: RUF012 (read-only default)
    _fxviz_gradients = False  # hook the outputs for record(..., backward=...)

    def fxviz_configure(self, *, keep: Keep = "all", stats: bool = True) -> None:
        """Set what later runs keep: ``keep="all" | "stats" | <bytes>``; ``stats`` on/off."""
        interp: Any = self
        self._fxviz_options = {"keep": keep, "stats": stats}
        if isinstance(interp, torch.fx.Transformer):
            interp.garbage_collect_values = False
            return
        interp.garbage_collect_values = keep != "all"
        if interp.garbage_collect_values and not hasattr(interp, "user_to_last_uses"):
            interp.user_to_last_uses = _last_uses(interp.graph)

    def fxviz_start(self) -> Recorder:
        """Begin a fresh recording (called by ``run``; the Debugger calls it directly)."""
        recorder = Recorder(self, **self._fxviz_options)  # type: ignore[arg-type]
        recorder.next_run_node = super().run_node  # type: ignore[misc]  # bound once a run
        if self._fxviz_gradients:
            recorder.grads = GradientWatcher(recorder, stats=recorder.stats)
            recorder.grads.watch_parameters(self.module)  # type: ignore[attr-defined]
        self._fxviz_recorder = recorder
        return recorder

    @property
    def recording(self) -> Recording:
        """The recording of the latest run (possibly partial)."""
        if self._fxviz_recorder is None:
            raise AttributeError("nothing recorded yet: call run() first")
        return self._fxviz_recorder.recording()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        recorder = self.fxviz_start()
        interp: Any = self
        interp.extra_traceback = False  # fxviz's NodeError carries the node context
        try:
            output = super().run(*args, **kwargs)  # type: ignore[misc]
        except KeyboardInterrupt as interrupt:
            raise RecordingInterrupted(
                f"interrupted after {len(recorder.entries)} nodes; the partial recording "
                "is on this exception's .recording",
                recording=recorder.recording(),
            ) from interrupt
        except Exception as error:
            failed = recorder.records[-1] if recorder.entries else None
            if failed is None or failed.error is not error:
                raise  # not a node's failure (bad inputs, the user's own run())
            wrapped = NodeError(
                describe_failure(failed, interp.module),
                node=failed.name,
                recording=recorder.recording(error=error),
            )
            recorder.error = wrapped
            raise wrapped from error
        recorder.finish(output)
        return output

    def run_node(self, n: torch.fx.Node) -> Any:
        recorder = self._fxviz_recorder
        if recorder is None:  # Transformer.transform() bypasses run(): start lazily
            recorder = self.fxviz_start()
        value = recorder.run_node(n, recorder.next_run_node)
        if self.fxviz_progress is not None:
            self.fxviz_progress.update()
        return value


class RecordingInterpreter(RecordingMixin, torch.fx.Interpreter):
    """A ``torch.fx.Interpreter`` that records every node it runs.

    Args:
        module: the ``GraphModule`` to run.
        keep: ``"all"`` keeps every value (``garbage_collect_values=False``), ``"stats"``
            keeps statistics only, an ``int`` keeps values up to that many bytes.
        stats: take statistics (min/max/mean/std/NaN counts) of every output.
        graph: run this graph instead of ``module.graph``.

    Example:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Linear(3, 2))
        >>> interp = fxviz.RecordingInterpreter(gm)
        >>> out = interp.run(torch.ones(4, 3))
        >>> interp.recording["linear"].shape
        (4, 2)
    """

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        keep: Keep = "all",
        stats: bool = True,
        graph: torch.fx.Graph | None = None,
    ) -> None:
        super().__init__(module, garbage_collect_values=keep != "all", graph=graph)
        self.fxviz_configure(keep=keep, stats=stats)


@functools.cache
def recording_class(interpreter: type[torch.fx.Interpreter]) -> type[torch.fx.Interpreter]:
    """The user's Interpreter/Transformer class with :class:`RecordingMixin` mixed in."""
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
    stats: bool,
) -> Any:
    """An interpreter instance that records: fxviz's own, the user's class, or a copy of
    the user's instance (the original is left untouched)."""
    if interpreter is None:
        return RecordingInterpreter(gm, keep=keep, stats=stats)
    if isinstance(interpreter, torch.fx.Interpreter):
        if interpreter.graph is not gm.graph:
            raise TypeError(
                f"this {type(interpreter).__name__} instance was made for another graph; pass "
                f"its class (interpreter={type(interpreter).__name__}) or an instance made for "
                "this GraphModule"
            )
        instance: Any = copy.copy(interpreter)
        instance.__class__ = recording_class(type(interpreter))
    else:
        instance = recording_class(interpreter)(gm)
    instance.fxviz_configure(keep=keep, stats=stats)
    return instance


def record(
    gm_or_module: Any,
    *inputs: Any,
    interpreter: type[torch.fx.Interpreter] | torch.fx.Interpreter | None = None,
    keep: Keep = "all",
    stats: bool = True,
    progress: bool | None = False,
    backward: Backward = None,
) -> Recording:
    """Run a graph node by node and record what every node produced.

    Args:
        gm_or_module: a ``GraphModule``, or anything :func:`fxviz.trace` accepts (traced
            first, with ``inputs`` as example inputs).
        *inputs: the graph's inputs, as for ``gm(*inputs)``.
        interpreter: run through your own ``torch.fx.Interpreter`` subclass (a class, or
            an instance, which is copied); its behaviour is unchanged. A ``Transformer``
            subclass is recorded symbolically: ``.output`` is the new ``GraphModule`` and each
            record's ``produced`` names the new nodes made from it.
        keep: ``"all"`` keeps every value; ``"stats"`` only statistics; an ``int`` keeps
            values up to that many bytes, then drops values (keeping statistics) and warns.
        stats: take statistics of every output (off: shapes, dtypes and timing only).
        progress: show a progress bar (``None``: only when the run takes over a second).
        backward: also run the backward pass and record every gradient: ``True``
            differentiates the sum of the output, a callable ``output -> scalar loss`` that
            loss, and tensor(s) are the gradients of the output tensors. ``rec[name].grad``
            then summarises the gradient with respect to that node's output (values kept
            under the same ``keep=`` budget) and ``rec.gradients`` lists them in backward
            order, parameters' included. Parameters' ``.grad`` is left untouched.

    Returns:
        A :class:`Recording`; ``rec.output`` is identical to ``gm(*inputs)``.

    Raises:
        NodeError: a node raised; the message names it, its target and its input shapes,
            and ``err.recording`` holds everything recorded until then.
        InputError: the inputs do not fit the graph's placeholders.
        RecordingInterrupted: Ctrl-C; ``err.recording`` holds the partial recording.

    Example:
        >>> import torch, fxviz
        >>> rec = fxviz.record(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.ones(2, 4))
        >>> [(r.name, r.shape) for r in rec.values()]
        [('input_1', (2, 4)), ('_0', (2, 3)), ('_1', (2, 3)), ('output', (2, 3))]
        >>> rec["_1"].outputs[0].min >= 0
        True
    """
    gm = trace(gm_or_module, *inputs)
    instance = as_recording_interpreter(gm, interpreter, keep=keep, stats=stats)
    if isinstance(instance, torch.fx.Transformer):
        if backward is not None and backward is not False:
            raise InputError("backward= needs a real run: a Transformer runs symbolically")
        return _record_transformer(instance, inputs)
    check_inputs(gm, inputs)
    if backward is not None and backward is not False:
        return _record_with_backward(instance, inputs, backward, progress)
    _run(instance, inputs, progress)
    return instance.recording


def _run(instance: Any, inputs: tuple[Any, ...], progress: bool | None) -> None:
    if progress is False:
        instance.run(*inputs)
        return
    from tqdm.auto import tqdm

    total = len(instance.graph.nodes)
    with tqdm(total=total, desc="fxviz record", unit="node", delay=0 if progress else 1.0) as bar:
        instance.fxviz_progress = bar
        try:
            instance.run(*inputs)
        finally:
            instance.fxviz_progress = None


def _record_with_backward(
    instance: Any, inputs: tuple[Any, ...], backward: Backward, progress: bool | None
) -> Recording:
    instance._fxviz_gradients = True
    try:
        _run(instance, inputs, progress)
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


def check_inputs(gm: torch.nn.Module, inputs: tuple[Any, ...]) -> None:
    """Raise :class:`InputError` when ``inputs`` cannot fill the graph's placeholders."""
    graph: torch.fx.Graph = gm.graph  # type: ignore[assignment]
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
