"""Replaying a training step with every model call recorded, forward and backward.

While the user's own step runs again, the model's ``forward`` is swapped for a recording of
the eager module (``torch.fx`` graph run node by node, each output tensor hooked for its
gradient, as ``fxviz.record(..., backward=)`` does); the step's own ``backward()`` fires the
hooks, and the optimizer's update of each parameter is taken around its ``step()``. The
same ATen ops run in the same order from the same RNG state, so values and dropout masks
are the original step's, bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from fxviz._record import Recording, RecordingInterpreter
from fxviz._record._summary import iter_tensors
from fxviz._training._state import eager_module, parameter_names, rng_state, set_rng_state
from fxviz.capture import trace

__all__ = ["REPLAYING", "ModelCall", "record_model_calls", "record_step", "updates_of"]

# True while a replay runs (the callbacks' hooks then note nothing): a one-item list.
REPLAYING = [False]


@dataclasses.dataclass
class ModelCall:
    """One call of the model inside a step: its inputs, the RNG states right before it and
    the gradient that reached each output tensor (what a saved incident replays)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: dict[str, Any]
    output_grads: list[torch.Tensor]
    recording: Recording | None = None
    path: str = ""  # the module called: "" the model, else a child's name


def _record_forward(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``module`` on the inputs as a recorded graph whose outputs are hooked for their
    gradients; returns ``(interpreter, output)``."""
    from fxviz._capture import bind_inputs

    gm = trace(module, *args, **kwargs)
    inputs = bind_inputs(gm, args, kwargs)
    interp: Any = RecordingInterpreter(gm, False, keep="all", stats=True)
    interp._fxviz_gradients = True  # hook the outputs, as record(..., backward=) does
    output = interp.run(*inputs)
    return interp, output


@contextlib.contextmanager
def record_model_calls(model: torch.nn.Module, calls: list[ModelCall]) -> Iterator[None]:
    """While inside, every call of ``model`` runs recorded; each is appended to ``calls``.

    A step that calls a child of the model directly (a LightningModule's ``training_step``
    calling ``self.net``) gets that child recorded; calls made inside a recorded call
    are part of its recording."""
    interps: list[Any] = []
    depth = [0]
    outputs: list[tuple[ModelCall, list[torch.Tensor | None], list[torch.Tensor]]] = []

    def recording(path: str, module: torch.nn.Module, plain: Callable[..., Any]) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return plain(*args, **kwargs)
            rng = rng_state()
            depth[0] += 1
            try:
                interp, output = _record_forward(module, args, kwargs)
            finally:
                depth[0] -= 1
            interps.append(interp)
            call = ModelCall(args, kwargs, rng, [], interp.recording, path)
            grads: list[torch.Tensor | None] = []
            tensors = [t for _, t in iter_tensors(output) if t.requires_grad]
            for t in tensors:
                grads.append(None)
                t.register_hook(_keeper(grads, len(grads) - 1))
            outputs.append((call, grads, tensors))
            calls.append(call)
            return output

        return forward

    eager = eager_module(model)
    patched = [(model, "", eager)] + [
        (child, name, child) for name, child in eager.named_children()
    ]
    saved = []
    for module, path, target in patched:
        saved.append((module, "forward" in module.__dict__, module.__dict__.get("forward")))
        module.forward = recording(path, target, module.forward)
    try:
        yield
    finally:
        for module, had, before in saved:
            if had:
                module.forward = before
            else:
                del module.forward
        for call, grads, tensors in outputs:  # an output no loss reached: a zero gradient
            call.output_grads = [
                g if g is not None else torch.zeros_like(t)
                for g, t in zip(grads, tensors, strict=True)
            ]
        for interp in interps:
            watcher = interp._fxviz_recorder.grads
            if watcher is not None:  # the recordings keep the gradients that arrived
                watcher.remove()


def _keeper(slots: list[torch.Tensor | None], i: int) -> Callable[[torch.Tensor], None]:
    def keep(grad: torch.Tensor) -> None:
        slots[i] = grad.detach().clone() if slots[i] is None else slots[i] + grad  # type: ignore[operator]

    return keep


@contextlib.contextmanager
def updates_of(
    model: torch.nn.Module, optimizer: Any, into: dict[str, torch.Tensor]
) -> Iterator[None]:
    """While inside, each ``optimizer.step()`` adds its update (``after - before``) of every
    parameter to ``into``, by parameter name."""
    if optimizer is None:
        yield
        return
    names = parameter_names(model)
    before: dict[str, torch.Tensor] = {}

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        for group in opt.param_groups:
            for p in group["params"]:
                before[names.get(id(p), "?")] = p.detach().clone()

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        for group in opt.param_groups:
            for p in group["params"]:
                name = names.get(id(p), "?")
                delta = p.detach() - before[name]
                into[name] = into[name] + delta if name in into else delta

    handles = [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def record_step(
    step_fn: Callable[..., Any],
    model: torch.nn.Module,
    optimizer: Any,
    calls: list[Any],
) -> tuple[list[ModelCall], dict[str, torch.Tensor], list[Any]]:
    """Run ``step_fn`` again on each of ``calls`` (batch and RNG states) with the model's
    calls recorded; returns the model calls, the optimizer's updates and what each step
    returned."""
    model_calls: list[ModelCall] = []
    updates: dict[str, torch.Tensor] = {}
    outs = []
    REPLAYING[0] = True
    try:
        with record_model_calls(model, model_calls), updates_of(model, optimizer, updates):
            for call in calls:
                set_rng_state(call.rng)
                outs.append(step_fn(*call.args, **call.kwargs))
    finally:
        REPLAYING[0] = False
    return model_calls, updates, outs
