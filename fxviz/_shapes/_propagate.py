"""Shape propagation in three modes: real tensors, fake tensors, or the meta device."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import torch
import torch.fx

from fxviz._capture import bind_inputs
from fxviz._record import RecordingInterpreter
from fxviz._record._interpreter import check_inputs, progress_bar
from fxviz._record._summary import iter_tensors
from fxviz._shapes._report import ShapeReport
from fxviz._shapes._spec import TensorSpec
from fxviz._torch_compat import (
    extract_tensor_metadata,
    fake_mode,
    fake_tensor,
    is_fake,
    reparametrize,
)
from fxviz.capture import trace
from fxviz.errors import (  # ShapeError re-exported
    FxvizError,
    NodeError,
    ShapeError,
    node_error_type,
)

__all__ = ["Mode", "ShapeError", "shapes"]

Mode = Literal["real", "fake", "meta"]
_MODES = ("real", "fake", "meta")


class _ShapeInterpreter(RecordingInterpreter):
    """Records shapes only, writes ``node.meta["tensor_meta"]`` like ShapeProp."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__(module, keep="stats", stats=False)

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        meta = [extract_tensor_metadata(t) for _, t in iter_tensors(value)]
        if meta:
            n.meta["tensor_meta"] = meta[0] if isinstance(value, torch.Tensor) else meta
        return value


def shapes(
    gm_or_module: Any,
    *inputs: Any,
    mode: Mode = "real",
    device: str | torch.device | None = None,
    progress: bool | None = None,
    **kwargs: Any,
) -> ShapeReport:
    """Every node's output shapes and dtypes, as a :class:`ShapeReport`.

    Args:
        gm_or_module: a ``GraphModule`` or anything :func:`fxviz.trace` accepts.
        *inputs: tensors (real, fake or meta) or :func:`fxviz.spec` specs;
            ``**kwargs`` keyword inputs, as for ``model(*inputs, **kwargs)``.
        mode: ``"real"`` runs the graph; ``"fake"`` runs it on ``FakeTensor``s (parameters
            too: nothing is computed or allocated); ``"meta"`` runs it on the meta device
            (the model may be built there: ``with torch.device("meta"): ...``).
        device: in ``"fake"`` mode, the device to pretend the model and inputs live on
            (``"cuda"`` checks a GPU placement without a GPU).
        progress: show a progress bar (default: only when a run takes over a second).

    Like ``torch.fx.passes.shape_prop.ShapeProp``, it also writes each node's
    ``node.meta["tensor_meta"]``.

    Raises:
        ShapeError: a node failed; the message names it, its op and its input shapes, and
            ``err.report`` holds the partial report.

    Examples:
        >>> import torch, fxviz
        >>> rep = fxviz.shapes(torch.nn.Linear(8, 2), fxviz.spec(4, 8), mode="fake")
        >>> rep["linear"].shape
        (4, 2)
    """
    if mode not in _MODES:
        raise ValueError(f"unknown mode: {mode!r} (must be one of {list(_MODES)})")
    if device is not None and mode != "fake":
        raise ValueError("device= pretends a placement, so it needs mode='fake'")
    model = gm_or_module
    if mode == "real" and isinstance(model, torch.nn.Module) and _on_meta(model):
        raise FxvizError(
            "the model's parameters are on the meta device and hold no values: use "
            "mode='meta' or mode='fake' to propagate shapes"
        )
    gm = trace(
        model,
        *(x.materialize("meta") if isinstance(x, TensorSpec) else x for x in inputs),
        **kwargs,
    )
    inputs = bind_inputs(gm, inputs, kwargs)
    with _mode_context(mode, model, device) as convert:
        converted = tuple(convert(x) for x in inputs)
        check_inputs(gm, converted)
        grad = torch.enable_grad() if mode == "real" else torch.no_grad()
        with grad, _parameters(mode, gm, convert):
            interp = _ShapeInterpreter(gm)
            try:
                with progress_bar(interp, progress, "fxviz shapes"):
                    interp.run(*converted)
            except NodeError as error:
                report = ShapeReport(gm, error.recording, mode=mode)
                cause = error.__cause__
                typed = ShapeError if cause is None else node_error_type(ShapeError, type(cause))
                raise typed(
                    _explain(str(error), mode, error.__cause__), node=error.node, report=report
                ) from error.__cause__
    return ShapeReport(gm, interp.recording, mode=mode)


@contextlib.contextmanager
def _mode_context(mode: str, model: Any, device: Any) -> Iterator[Any]:
    """Yields a function that turns one input into this mode's kind of tensor."""
    if mode == "real":
        yield lambda x: x.materialize() if isinstance(x, TensorSpec) else x
        return
    if mode == "meta":
        yield lambda x: _to_meta(x)
        return
    faking = fake_mode()
    target = torch.device(device) if device is not None else _home_device(model)

    def to_fake(x: Any) -> Any:
        if isinstance(x, TensorSpec):  # made inside the fake mode: a FakeTensor, no data
            return x.materialize(device if device is not None else x.device or target)
        if isinstance(x, torch.Tensor) and not is_fake(x):
            return fake_tensor(faking, x, target if (device or x.is_meta) else x.device)
        return x

    with faking:
        yield to_fake


@contextlib.contextmanager
def _parameters(mode: str, gm: torch.nn.Module, convert: Any) -> Iterator[None]:
    """In fake/meta mode, let the graph see fake/meta parameters and buffers (the
    module itself is left as it was)."""
    if mode == "real":
        yield
        return
    state = {
        name: convert(t)
        for name, t in [*gm.named_parameters(), *gm.named_buffers()]
        if not is_fake(t) and not (mode == "meta" and t.is_meta)
    }
    with reparametrize(gm, state):
        yield


def _to_meta(x: Any) -> Any:
    if isinstance(x, TensorSpec):
        return x.materialize("meta")
    if isinstance(x, torch.Tensor) and not x.is_meta:
        return x.detach().to("meta").requires_grad_(x.requires_grad and x.is_floating_point())
    return x


def _on_meta(model: torch.nn.Module) -> bool:
    return any(t.is_meta for t in [*model.parameters(), *model.buffers()])


def _home_device(model: Any) -> torch.device:
    """Where a fake run pretends to be: the model's own device, or the CPU for meta models."""
    if isinstance(model, torch.nn.Module):
        for t in [*model.parameters(), *model.buffers()]:
            if not t.is_meta:
                return t.device
    return torch.device("cpu")


_NO_KERNEL = ("fake impl", "'Meta' backend", "meta tensor", "meta kernel", "no fake")
_DEVICE_MISSING = ("is not linked with support for", "not compiled with")
_DATA_DEPENDENT = ("DataDependentOutputException", "DynamicOutputShapeException")


def _explain(message: str, mode: str, cause: BaseException | None) -> str:
    """Add what to do when the op cannot run without data in this mode."""
    if mode == "real" or cause is None:
        return message + "\nThe report of the nodes before it is on this error's .report."
    kind = type(cause).__name__
    text = str(cause)
    if mode == "fake" and any(marker in text for marker in _DEVICE_MISSING):
        # e.g. BatchNorm in training mode: its running-stat update calls Tensor.copy_,
        # whose Python binding sets a device guard even on fake tensors.
        head = message.split("\nWhat to do:")[0]
        return (
            f"{head}\nIn mode='fake' this op needs real support for the pretended device, "
            "which this PyTorch build lacks. What to do: put the model in eval mode (model.eval(); "
            "BatchNorm in training mode updates its running statistics on the device), "
            "run without device=, or run on a machine whose PyTorch has that device. "
            "The report of the nodes before it is on this error's .report."
        )
    if kind in _DATA_DEPENDENT or "data-dependent" in text or ".item()" in text:
        why = "its output shape depends on the tensor's values, which a {mode} run does not have"
    elif (
        isinstance(cause, NotImplementedError)
        or kind == "UnsupportedOperatorException"
        or any(marker in text for marker in _NO_KERNEL)
    ):
        why = "this op has no {mode} kernel, so it cannot run without data"
    else:
        return message + "\nThe report of the nodes before it is on this error's .report."
    return (
        f"{message}\nIn mode={mode!r} {why.format(mode=mode)}: use mode='real' (with real "
        "inputs) for this model. The report of the nodes before it is on this error's .report."
    )
