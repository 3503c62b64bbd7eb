"""Turn models, functions and exported programs into a ``torch.fx.GraphModule``.

``method`` picks how: ``symbolic`` and ``export`` make one graph that works for any
input; ``dynamo`` and ``real`` capture what one run actually did (a :class:`Capture`),
so they hold any model that runs.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import logging
import re
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
import torch.fx

from fxviz._capture import (
    Capture,
    GraphBreak,
    JointGraph,
    bind_inputs,
    capture_dynamo,
    capture_real,
    is_user_file,
    trace_joint,
    traced_forward,
)
from fxviz._capture._auto import auto_order, remember
from fxviz._capture._eager import eager_is_compiling
from fxviz._capture._gradient_check import UNCHECKED, GradientCheck
from fxviz._capture._real import tensors_in
from fxviz._capture._rebuild import RebuiltOutput, flat_output
from fxviz._capture._segments import attributes
from fxviz._capture._state import (
    ModelState,
    UnrestorableWrite,
    attribute_writes,
    restored_attributes,
    restored_state,
    state_value_reads,
)
from fxviz._capture._subject import traceable
from fxviz._capture._symbolic import SymbolicTraceRefused, watchful_symbolic_trace
from fxviz._collector import old_objects_set_aside
from fxviz._torch_compat import (
    OpOverload,
    built_output,
    op_written_arguments,
    positional_graph,
    same_bits,
    thread_scoped_fx_patches,
)
from fxviz.errors import TraceError

__all__ = ["Capture", "GraphBreak", "JointGraph", "trace"]

Method = Literal["auto", "symbolic", "export", "dynamo", "real", "joint"]
_AUTO_ORDER = ("symbolic", "export", "dynamo", "real")


def trace(
    obj: torch.nn.Module | Callable[..., Any] | torch.export.ExportedProgram,
    *example_inputs: Any,
    method: Method = "auto",
    concrete_args: dict[str, Any] | None = None,
    **example_kwargs: Any,
) -> torch.fx.GraphModule:
    """Capture ``obj`` as a ``torch.fx.GraphModule``.

    Args:
        obj: an ``nn.Module``, a plain function, a ``GraphModule`` (returned as is) or a
            ``torch.export.ExportedProgram`` (its runnable ``.module()``).
        *example_inputs, **example_kwargs: inputs, exactly as for ``obj(*args, **kwargs)``
            (needed by every method but ``symbolic``).
        method: ``"symbolic"`` (``torch.fx.symbolic_trace``); ``"export"``
            (``torch.export.export``); ``"dynamo"`` (``torch.compile``'s graphs of one
            run, with the graph breaks between them); ``"real"`` (one graph of the ops
            one run executed, branches and loop counts as taken); ``"auto"``: symbolic,
            then export, then dynamo, then real, the first that holds the model (the
            graph's ``meta["fxviz_method"]`` says which; the method that held a model
            is tried first for the next model of its class with inputs of the same
            structure, so a failed export is paid once a process). ``"joint"`` returns a
            ``JointGraph`` instead: AOTAutograd's forward and backward ATen graphs, with
            the saved tensors between them and links from backward to forward nodes.
        concrete_args: passed to ``symbolic_trace`` to specialise arguments (for example
            a flag that drives Python control flow).

    Returns:
        A ``GraphModule``; for ``dynamo`` and ``real``, a :class:`fxviz.Capture` (a
        GraphModule of that one run: ``.breaks``, ``.graphs``, ``.calls``).

    Raises:
        TraceError: nothing could capture the object; the message names each method
            tried, why it failed, the offending line of the user's code and what to try.

    Examples:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'call_module', 'call_module', 'output']
        >>> def clip(x):
        ...     return x if x.sum() > 0 else -x  # a Python `if` on a tensor's value
        >>> capture = fxviz.trace(clip, torch.ones(2))
        >>> capture.meta["fxviz_method"], [b.reason for b in capture.breaks][:1]
        ('dynamo', ['generic_jump TensorVariable()'])
    """
    obj = traceable(obj)  # a Debugger's graph, or a one-line refusal (_capture/_subject.py)
    if method not in ("auto", "joint", *_CAPTURES):
        raise ValueError(
            f"unknown method: {method!r} (must be one of {['auto', *_CAPTURES, 'joint']})"
        )
    if method == "joint":
        if not (example_inputs or example_kwargs):
            raise TraceError(
                "method='joint' needs example inputs: fxviz.trace(model, x, method='joint')"
            )
        model = trace(obj, *example_inputs, **example_kwargs)
        flat = bind_inputs(model, example_inputs, example_kwargs)  # keyword inputs included
        return trace_joint(obj, model, *flat)  # type: ignore[return-value]
    if isinstance(obj, torch.fx.GraphModule):
        return obj
    if isinstance(obj, torch.export.ExportedProgram):
        return obj.module()
    if not (isinstance(obj, torch.nn.Module) or callable(obj)):
        raise TraceError(
            f"cannot trace an object of type {type(obj).__name__}: pass an nn.Module, a "
            "function, a GraphModule or a torch.export.ExportedProgram"
        )
    if _is_script(obj):
        raise TraceError(
            f"{_name(obj)} is TorchScript: fxviz draws it as it is, without tracing. Use "
            "fxviz.show(scripted) or fxviz.to_dot(scripted) for the TorchScript view."
        )
    # Tracing patches globals (nn.Module.__call__, wrapped functions), and torch.export and
    # Dynamo use process-wide state: one trace at a time, and the patches act only in the
    # tracing thread, so other threads' plain forwards are never disturbed.
    # Tracing runs forward on proxies or fake tensors: attributes it assigns are put back.
    # The objects a trace makes are collected apart from the rest of the heap.
    with (
        _TRACE_LOCK,
        thread_scoped_fx_patches(),
        restored_attributes(obj),
        old_objects_set_aside(),
    ):
        return _capture(obj, (example_inputs, example_kwargs), method, concrete_args)


_TRACE_LOCK = threading.RLock()


def _capture(
    obj: Any, inputs: tuple[tuple[Any, ...], dict[str, Any]], method: str, concrete_args: Any
) -> torch.fx.GraphModule:
    if method != "auto":
        try:
            return _tagged(_faithful(method, _CAPTURES[method], obj, inputs, concrete_args), method)
        except TraceError:
            raise
        except Exception as error:
            raise TraceError(_describe_failure(method, obj, error, inputs)) from error
    failures: list[tuple[str, BaseException]] = []
    order = _AUTO_ORDER if (inputs[0] or inputs[1]) else ("symbolic",)
    for name in auto_order(obj, inputs, order):
        capture = _dynamo_of_forward if name == "dynamo" else _CAPTURES[name]
        try:
            gm = _tagged(_faithful(name, capture, obj, inputs, concrete_args), name)
        except UnrestorableWrite:
            raise  # the model is as the run left it: no other method may run it again
        except Exception as error:
            failures.append((name, error))
            continue
        remember(obj, inputs, name)
        return gm
    failures.sort(key=lambda failure: order.index(failure[0]))  # reported in auto's order
    raise TraceError(_describe_failures(obj, failures, inputs)) from failures[-1][1]


def _faithful(
    method: str, capture: Callable[..., Any], obj: Any, inputs: Any, concrete_args: Any
) -> torch.fx.GraphModule:
    """Capture, then leave the model exactly as it was; refuse a graph that would not do
    what ``obj(*args, **kwargs)`` does (the next method of ``auto`` is then tried)."""
    if method in ("dynamo", "real"):  # one run, whose state they restore themselves
        return capture(obj, *inputs, concrete_args)
    if method == "symbolic":
        _refuse_root_hooks(obj)
        _refuse_instance_forward(obj)
    # Tracing runs no parameter for real: only the buffers' values are copied.
    with restored_state(obj, ModelState(obj, parameters=False)) as state:
        with state_value_reads(obj if method == "symbolic" else None) as read:
            gm = capture(obj, *inputs, concrete_args)
        # symbolic tracing keeps tensor constants as root attributes (_tensor_constant0):
        # its own bookkeeping (the graph holds copies; restore takes them off the model)
        changes = [c for c in state.changes() if not _TRACER_CONSTANT.match(c)]
    # What the graph cannot hold: symbolic tracing ran the writes instead of recording
    # them; an exported graph holds its tensor writes but no Python attribute.
    refused = changes if method == "symbolic" else [c for c in changes if "in place" not in c]
    if refused:
        raise TraceError(
            f"{_name(obj)}.forward changes the model ({', '.join(refused)}): "
            f"{_HOW[method]} would run that write while tracing instead of recording it, "
            "so the graph would not do what a call does. Capture one run instead: "
            "fxviz.trace(model, *args, method='dynamo') (or method='real')"
        )
    if read:
        raise TraceError(
            f"{_name(obj)}.forward reads the value of {', '.join(read)} in Python (.item(), "
            "an if on it): torch.fx.symbolic_trace runs that Python once, on the value it "
            "had then (before the graph's own writes), and the graph keeps the branch it "
            "took. Capture one run instead: fxviz.trace(model, *args, method='dynamo') "
            "(or method='real')"
        )
    _refuse_parameter_writes(gm, obj, method)
    return gm


_TRACER_CONSTANT = re.compile(r"_tensor_constant\d+ \(set\)$")


def _refuse_parameter_writes(gm: torch.fx.GraphModule, obj: Any, method: str) -> None:
    """An in-place write to a parameter runs in eager only under ``torch.no_grad()``,
    which symbolic tracing does not record, and which ``torch.export`` can lose (the
    ``no_grad`` inside ``nn.init.normal_`` right after a ``no_grad`` block: its graph
    keeps the first block's ``wrap_with_set_grad_enabled`` only). Written in the
    graph's own grad mode, the graph would raise where the call did not."""
    for node in gm.graph.nodes:
        for written in _written_arguments(node):
            if not (isinstance(written, torch.fx.Node) and written.op == "get_attr"):
                continue
            value = _attribute(gm, str(written.target))
            if isinstance(value, torch.nn.Parameter) and value.requires_grad:
                lost = "does not record" if method == "symbolic" else "left out of its graph"
                raise TraceError(
                    f"{_name(obj)}.forward writes the parameter {written.target} in place "
                    f"({node.target}): eager runs that only under torch.no_grad(), which "
                    f"{_HOW[method]} {lost}. Capture one run instead: "
                    "fxviz.trace(model, *args, method='dynamo') (or method='real')"
                )


def _written_arguments(node: torch.fx.Node) -> list[Any]:
    """The arguments ``node`` writes in place: a method named like ``add_`` writes its
    tensor; an ATen op, those its schema marks written (``Tensor(a!)``)."""
    target = node.target
    if node.op == "call_method" and isinstance(target, str):
        inplace = target.endswith("_") and not target.startswith("_")
        return list(node.args[:1]) if inplace else []
    if node.op == "call_function" and isinstance(target, OpOverload):
        return [
            node.kwargs.get(name) if keyword or i >= len(node.args) else node.args[i]
            for i, name, keyword in op_written_arguments(target)
        ]
    return []


def _attribute(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _refuse_root_hooks(obj: Any) -> None:
    """``symbolic_trace`` traces ``forward``, not ``__call__``: the root's hooks never run."""
    if not isinstance(obj, torch.nn.Module):
        return
    from torch.nn.modules import module as nn_module

    hooks = [
        kind
        for kind, found in (
            ("forward", obj._forward_hooks or _users(nn_module._global_forward_hooks)),
            ("forward-pre", obj._forward_pre_hooks or _users(nn_module._global_forward_pre_hooks)),
        )
        if found
    ]
    if hooks:
        raise TraceError(
            f"{_name(obj)} has {' and '.join(hooks)} hooks of its own: symbolic tracing "
            "traces forward and never runs them, so the graph would not give the model's "
            "output. Pass example inputs (export, Dynamo and a real run call the model "
            "with its hooks): fxviz.trace(model, x)"
        )


def _refuse_instance_forward(obj: Any) -> None:
    """``symbolic_trace`` traces the class's ``forward``: one set on the instance (a
    patched ``model.forward``), which a call runs, would not be in the graph. fxviz's own
    (a training replay's, which records the forward it wraps) is no user code."""
    patched = vars(obj).get("forward") if isinstance(obj, torch.nn.Module) else None
    own = getattr(getattr(patched, "__func__", patched), "__module__", None) or ""
    if patched is not None and not own.startswith("fxviz."):
        raise TraceError(
            f"{_name(obj)}.forward is set on the instance: symbolic tracing traces the "
            f"class's forward ({type(obj).__name__}.forward) instead, so the graph would not "
            "give the model's output. Pass example inputs (export, Dynamo and a real run call "
            "the model): fxviz.trace(model, x)"
        )


def _users(hooks: dict[int, Any]) -> list[Any]:
    """Global module hooks but fxviz's and torch's own (a real-run capture or a
    ``FlopCounterMode`` in another thread holds some while it runs; they only watch)."""
    return [
        h for h in hooks.values()
        if not getattr(getattr(h, "__func__", h), "__module__", "").startswith(("fxviz.", "torch."))
    ]  # fmt: skip


def _tagged(gm: torch.fx.GraphModule, method: str) -> torch.fx.GraphModule:
    gm.meta["fxviz_method"] = method
    return gm


def _symbolic(obj: Any, args: tuple, kwargs: dict, concrete_args: Any) -> torch.fx.GraphModule:
    gm = watchful_symbolic_trace(obj, concrete_args)
    _refuse_packed_inputs(gm, obj)
    nones = _none_inputs_traced(gm, obj, args, kwargs)
    if nones:  # traced as tensors: the graph took the branch of a call that passes them
        gm = watchful_symbolic_trace(obj, {**(concrete_args or {}), **nones})
        _keep_input_names(gm, nones)
    output = next(iter(reversed(gm.graph.nodes)))
    held = _object_holding_proxy(output.args)
    if held is not None:
        raise TraceError(
            f"{_name(obj)}.forward returns a {type(held).__qualname__} holding traced "
            "values: torch.fx.symbolic_trace keeps the object itself in the graph, with "
            "the tracer's Proxy objects inside, not this call's tensors"
        )
    return gm


def _refuse_packed_inputs(gm: torch.fx.GraphModule, obj: Any) -> None:
    """``forward(self, x, **kwargs)``: symbolic tracing hands ``kwargs`` one Proxy, so
    what forward does with it (``kwargs.get("mask")``, then an ``if`` on what it got) is
    traced on that Proxy, not on the call's own inputs. Unused, it does no harm; a
    ``*args`` tuple is indexed as the call's own (a ``len`` of it fails the trace)."""
    packed = [
        str(n.target)
        for n in gm.graph.find_nodes(op="placeholder")
        if str(n.target).startswith("**") and n.users
    ]
    if packed:
        raise SymbolicTraceRefused(
            f"{_name(obj)}.forward reads {packed[0]}: symbolic tracing hands it one traced "
            "value, not the call's own inputs, so the graph would not do what a call "
            "does. Pass example inputs (torch.export binds them): fxviz.trace(model, x)"
        )


def _none_inputs_traced(
    gm: torch.fx.GraphModule, obj: Any, args: tuple, kwargs: dict
) -> dict[str, None]:
    """The inputs that are ``None`` in this call (given so, or left to a ``None`` default)
    yet were traced as tensors: symbolic tracing hands every input a Proxy, so
    ``forward(x, mask=None)`` took its ``mask is not None`` branch and the graph would
    compute with ``None``. Without example inputs there is no call to follow: none."""
    if not (args or kwargs):
        return {}
    try:
        bound = inspect.signature(obj.forward if isinstance(obj, torch.nn.Module) else obj)
        call = bound.bind(*args, **kwargs)
    except (TypeError, ValueError):  # no signature, or not this call's: traced as it is
        return {}
    call.apply_defaults()
    return {
        name: None
        for n in gm.graph.find_nodes(op="placeholder")
        if (name := str(n.target)) in call.arguments and call.arguments[name] is None and n.users
    }


def _keep_input_names(gm: torch.fx.GraphModule, names: dict[str, None]) -> None:
    """Give the inputs ``symbolic_trace`` renamed for their ``concrete_args`` (``mask_1``)
    their own names back, so that ``record(gm, x, mask=None)`` still binds them."""
    for n in gm.graph.find_nodes(op="placeholder"):
        base, _, suffix = str(n.target).rpartition("_")
        if base in names and suffix.isdigit():
            n.target = base
    gm.recompile()


def _object_holding_proxy(value: Any, seen: set[int] | None = None, inside: Any = None) -> Any:
    """The first object (not a container fx rebuilds) in a node's arguments that holds a
    ``torch.fx.Proxy`` left by tracing, or ``None``."""
    seen = set() if seen is None else seen
    if id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return None
    seen.add(id(value))
    if isinstance(value, torch.fx.Proxy):
        return inside
    if isinstance(value, (torch.fx.Node, torch.Tensor, torch.nn.Module, type)):
        return None
    plain = type(value) in (tuple, list, dict)  # fx rebuilds these from their nodes
    items = list(value.values()) if isinstance(value, dict) else []
    items += list(value) if isinstance(value, (tuple, list, set, frozenset)) else []
    items += attributes(value).values()
    for item in items:
        found = _object_holding_proxy(item, seen, inside if plain else value)
        if found is not None:
            return found
    return None


def _export(obj: Any, args: tuple, kwargs: dict, concrete_args: Any) -> torch.fx.GraphModule:
    if not (args or kwargs):
        raise TraceError(
            f"method='export' needs example inputs: fxviz.trace({_name(obj)}, x, method='export')"
        )
    module = obj if isinstance(obj, torch.nn.Module) else _FunctionModule(obj)
    # torch.export prints the partial graph to stderr when it fails: fxviz reports instead
    with (
        warnings.catch_warnings(),
        _quiet_torch_logs(),
        contextlib.redirect_stderr(io.StringIO()),
        eager_is_compiling(dynamo=False),
    ):
        warnings.simplefilter("ignore")
        # an output pytree cannot hold (a DynamicCache) leaves the graph as its tensors
        hooked = bool(_users(torch.nn.modules.module._global_forward_hooks))
        with flat_output(module, hooked) as traced, attribute_writes(obj) as written:
            program = torch.export.export(module, tuple(args), kwargs or None)
    if written:
        raise TraceError(
            f"{_name(obj)}.forward sets {', '.join(sorted(set(written)))}: an exported "
            "graph keeps the value it saw and never sets it. Capture one run instead: "
            "fxviz.trace(model, *args, method='dynamo') (or method='real')"
        )
    _refuse_lost_inference_mode(program, obj)
    gm = program.module()
    if isinstance(obj, torch.nn.Module) and any(p.requires_grad for p in obj.parameters()):
        # a library may have traced a branch eager does not take (transformers' causal
        # mask): checked on the first backward pass asked of the graph
        gm.meta[UNCHECKED] = GradientCheck(obj, args, kwargs, [], why="", kind="export")
    build = None if traced.output is None else RebuiltOutput(traced.output)
    if kwargs:
        positional_graph(gm, build)  # placeholders named after the keyword inputs
        _check_same_output(gm, obj, args, kwargs)
    elif build is not None:
        built_output(gm, build)
    return gm


def _refuse_lost_inference_mode(program: torch.export.ExportedProgram, obj: Any) -> None:
    """``torch.export`` runs a ``torch.inference_mode()`` region but keeps no trace of it:
    its nodes' example values are inference tensors, the graph's are not (its output
    would require grad where the call's does not). Dynamo keeps the region."""
    if torch.is_inference_mode_enabled():
        return  # the caller's own mode: the graph runs in it too
    inside = [n.name for n in program.graph.nodes if _made_inference(n)]
    if inside:
        raise TraceError(
            f"{_name(obj)}.forward enters torch.inference_mode() (node {inside[0]!r} ran "
            "inside it): torch.export drops that region, so the graph's values would "
            "require grad where the call's do not. Capture it with Dynamo, which keeps "
            "the region: fxviz.trace(model, *args, method='dynamo')"
        )


def _made_inference(node: torch.fx.Node) -> bool:
    """Whether ``node`` made an inference tensor from none (an input made under
    ``inference_mode``, and its views, are inference tensors outside the region too)."""

    def inference(n: Any) -> bool:
        value = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        return isinstance(value, torch.Tensor) and value.is_inference()

    return (
        node.op == "call_function"
        and inference(node)
        and not any(inference(n) for n in node.all_input_nodes)
    )


def _dynamo(obj: Any, args: tuple, kwargs: dict, concrete_args: Any) -> Capture:
    _need_inputs("dynamo", obj, args, kwargs)
    capture = capture_dynamo(obj, args, kwargs)
    if not capture.calls:
        raise TraceError(
            "Dynamo captured no graph of it (every frame ran as plain Python): "
            f"{capture.breaks[-1]}"
        )
    return capture


def _dynamo_of_forward(obj: Any, args: tuple, kwargs: dict, concrete_args: Any) -> Capture:
    """``auto``'s Dynamo step: only when Dynamo traced the model's own forward; when it
    ran it as Python (a ``torch.jit.fork``, a break inside a loop) and captured only
    the submodules it called, one real run shows more of the model."""
    capture = _dynamo(obj, args, kwargs, concrete_args)
    if not traced_forward(capture, obj):
        raise TraceError(
            f"Dynamo ran {_name(obj)}.forward as plain Python and captured only "
            f"{len(capture.graphs)} graph(s) of what it called"
        )
    return capture


def _real(obj: Any, args: tuple, kwargs: dict, concrete_args: Any) -> Capture:
    _need_inputs("real", obj, args, kwargs)
    return capture_real(obj, args, kwargs)


# How each method captures; "auto" tries them in _AUTO_ORDER. One entry a method.
_CAPTURES: dict[str, Callable[..., torch.fx.GraphModule]] = {
    "symbolic": _symbolic,
    "export": _export,
    "dynamo": _dynamo,
    "real": _real,
}


def _need_inputs(method: str, obj: Any, args: tuple, kwargs: dict) -> None:
    if not (args or kwargs):
        raise TraceError(
            f"method={method!r} captures one run and needs its inputs: "
            f"fxviz.trace({_name(obj)}, x, method={method!r})"
        )


def _check_same_output(gm: Any, obj: Any, args: tuple, kwargs: dict) -> None:
    """An exported graph called with keyword inputs must still give the model's output."""
    inputs = tensors_in([args, kwargs])
    with restored_state(obj, inputs=inputs):  # both run for real: neither may change a thing
        got = tensors_in(gm(*bind_inputs(gm, args, kwargs)))
    with restored_state(obj, inputs=inputs):
        want = tensors_in(obj(*args, **kwargs))
    if len(got) != len(want) or not all(
        a.shape == b.shape and (torch.equal(a, b) or same_bits(a, b))  # NaN too
        for a, b in zip(got, want, strict=True)
    ):
        raise TraceError("the exported graph does not reproduce the model's output")


def _is_script(obj: Any) -> bool:
    return isinstance(obj, (torch.jit.ScriptModule, torch.jit.ScriptFunction))


@contextlib.contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """torch.export logs graph dumps and guard warnings on failure; fxviz reports instead."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


class _FunctionModule(torch.nn.Module):
    """Wraps a plain function so ``torch.export`` can take it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _name(obj: Any) -> str:
    return (
        type(obj).__name__ if isinstance(obj, torch.nn.Module) else getattr(obj, "__name__", "fn")
    )


_HOW = {
    "symbolic": "torch.fx.symbolic_trace",
    "export": "torch.export.export",
    "dynamo": "torch.compile (Dynamo)",
    "real": "one real run (make_fx)",
}


def _describe_failures(obj: Any, failures: list[tuple[str, BaseException]], inputs: Any) -> str:
    """Every method tried, why each failed, the user's line, and what to try."""
    if len(failures) == 1:
        return _describe_failure(failures[0][0], obj, failures[0][1], inputs)
    lines = [f"fxviz could not capture {_name(obj)}; tried {', '.join(n for n, _ in failures)}:"]
    for name, error in failures:
        lines.append(f"  - {_HOW[name]}: {type(error).__name__}: {_first_line(error)}")
    where = next((w for w in (_user_frame(e) for _, e in reversed(failures)) if w), None)
    if where:
        lines.append(f'  File "{where[0]}", line {where[1]}:\n    {where[2]}')
    if all(name in ("dynamo", "real") for name, _ in failures[2:]) and len(failures) >= 3:
        lines.append(
            "What to try: call the model directly with these inputs. If it raises too, the "
            "error is the model's (every capture runs it): fix the inputs or the model. If "
            "it runs, each capture method failed on it for the reason given above; a "
            "submodule that captures can be recorded on its own."
        )
    return "\n".join(lines)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    if "Explanation:" in text:
        text = text.split("Explanation:")[0]
    return (text.splitlines() or [type(error).__name__])[0].strip()


def _describe_failure(method: str, obj: Any, error: BaseException, inputs: Any) -> str:
    """One message: what failed, the user's offending line, and what to try instead."""
    has_inputs = bool(inputs[0] or inputs[1])
    lines = [
        f"{_HOW[method]} could not capture {_name(obj)}: "
        f"{type(error).__name__}: {_first_line(error)}"
    ]
    where = _user_frame(error)
    if where:
        path, lineno, code = where
        lines.append(f'  File "{path}", line {lineno}:\n    {code}')
    lines.append("What to try:")
    lines.extend(f"  - {hint}" for hint in _hints(method, error, has_inputs, where))
    return "\n".join(lines)


_TENSOR_CONDITION = re.compile(
    r"data.dependent|symbolically traced variables cannot be used as inputs to control flow"
    r"|GuardOnDataDependent|Could not guard|\.item\(\)|_local_scalar_dense",
    re.IGNORECASE,
)


def _hints(
    method: str, error: BaseException, has_inputs: bool, where: tuple[str, int, str] | None
) -> list[str]:
    text = str(error)
    code = where[2] if where else ""
    tensor_condition = bool(_TENSOR_CONDITION.search(text)) and not re.search(
        r"\b(shape|size|len|ndim|dim)\b", code
    )
    capture_run = "fxviz.trace(model, *args, method='dynamo') (or method='real')"
    hints = []
    if method == "symbolic":
        if not tensor_condition and ("control flow" in text or "iteration" in text):
            hints.append(
                "if a plain Python argument (a flag, a size) drives that line, fix it with "
                "concrete_args={'name': value}"
            )
        if tensor_condition:
            hints.append(
                f"the line branches on a tensor's value: capture one run with {capture_run}"
            )
        hints.append(
            "method='export' (traces with the example inputs you gave)"
            if has_inputs
            else "method='export' with example inputs: fxviz.trace(model, x, method='export')"
        )
    elif method == "export":
        if "register a pytree" in text or "not a known type" in text:
            hints.append(
                "the inputs (or a hook's output) hold a type torch.export cannot flatten "
                f"(a cache object): {capture_run} records it as it is"
            )
        hints.append("method='symbolic' if the model has no data-dependent shapes")
        hints.append(f"for data-dependent control flow, capture one run with {capture_run}")
    else:
        other = "real" if method == "dynamo" else "dynamo"
        hints.append(
            "call the model directly with the same inputs: if it raises too, the error is "
            "the model's (every capture runs it); if it runs, capture it with "
            f"method='{other}' or method='auto'"
        )
    return hints


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _user_frame(error: BaseException) -> tuple[str, int, str] | None:
    """The last frame of user code in the traceback (or in the error's message)."""
    candidates = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(error.__traceback__)]
    candidates += [(path, int(line)) for path, line in _FILE_LINE.findall(str(error))]
    for path, lineno in reversed(candidates):
        if not is_user_file(path):
            continue
        code = linecache.getline(path, lineno).strip()
        if code:
            return path, lineno, code
    return None
