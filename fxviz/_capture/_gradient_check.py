"""Whether a capture's parameter gradients are eager's, where its forward is.

A library may take, while it is traced, a branch that eager code does not take, and reach
the same output by another path whose gradients differ: transformers builds an explicit
causal mask when ``torch.compiler.is_compiling()`` or ``is_exporting()`` says so, or when
it sees fake tensors, where eager has SDPA skip an all-ones mask. A capture that may
hold such a branch carries a :class:`GradientCheck` in its ``meta``, run on the first
backward pass asked of it (:func:`gradients_differ`): a forward-only capture never pays
for it. One that failed says why in ``meta[GRADIENTS_DIFFER]``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch
import torch.fx

from fxviz._capture._bind import bind_inputs
from fxviz._capture._eager import eager_output, gradient_divergence
from fxviz._capture._segments import tensors_in
from fxviz._capture._state import restored_state

__all__ = [
    "GRADIENTS_DIFFER",
    "UNCHECKED",
    "GradientCheck",
    "capture_gradients",
    "gradients_differ",
    "gradients_differ_message",
]

# A capture's ``meta`` key: why its gradients are not eager's (its forward is)
GRADIENTS_DIFFER = "fxviz_gradients_differ"
# A capture's ``meta`` key: its gradient check, run on the first backward pass asked for
UNCHECKED = "fxviz_gradients_unchecked"


def gradients_differ_message(kind: str, grads: str, asked: str, why: str) -> str:
    """What ``meta[GRADIENTS_DIFFER]`` says of a ``kind`` capture ("Dynamo", "export"):
    how the gradients differ (``grads``), which frames were told True (``asked``), and
    what capturing again did (``why``; "": nothing was tried)."""
    if kind == "Dynamo":
        branch = f"a branch only compiled code takes (torch.compiler.is_compiling(){asked})"
    else:  # torch.export: is_exporting(), or fake tensors a library can see
        branch = "a branch only traced code takes (torch.compiler.is_exporting(), or a library that sees fake tensors)"
    again = f"; with {why}" if why else ""
    return (
        f"the gradients of this {kind} capture are not eager's ({grads}): the code takes "
        f"{branch}, with the same output{again}. Record the backward pass of one real run: "
        "fxviz.record(fxviz.trace(model, *args, method='real'), *args, backward=...) "
        "(fxviz.record(model, ..., backward=...) does)"
    )


class GradientCheck:
    """A capture's gradient check, not yet run: the model (weakly: a capture kept by the
    captures' cache must not keep its model alive through it), the inputs it ran on, and
    the library frames told ``is_compiling()`` True.

    >>> model = torch.nn.Linear(2, 1)
    >>> gm = torch.fx.symbolic_trace(model)
    >>> gm.meta[UNCHECKED] = GradientCheck(model, (torch.ones(1, 2),), {}, [], kind="export")
    >>> gradients_differ(gm) is None  # the same gradients: nothing to say
    True
    """

    __slots__ = ("args", "kind", "kwargs", "model", "told_true", "why")

    def __init__(
        self,
        model: torch.nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        told: list[str],
        why: str = "no file of its modules asked",
        kind: str = "Dynamo",
    ) -> None:
        self.model = weakref.ref(model)
        self.args, self.kwargs, self.told_true = args, kwargs, list(told)
        self.why = why  # what capturing again did (or why it was not tried)
        self.kind = kind

    def run(self, capture: torch.fx.GraphModule) -> str | None:
        """Why the capture's gradients are not eager's (``None``: they are)."""
        model = self.model()
        if model is None:  # nothing to compare with: no backward pass is said to be eager's
            return (
                f"the gradients of this {self.kind} capture cannot be checked against "
                "eager's: its model is gone. Capture the model again: fxviz.trace(model, *args)"
            )
        grads = capture_gradients(model, capture, None, None, self.args, self.kwargs)
        if not grads:
            return None
        asked = f"; library code told it True: {', '.join(self.told_true)}"
        return gradients_differ_message(self.kind, grads, asked, self.why)


def gradients_differ(gm: torch.fx.GraphModule) -> str | None:
    """Why ``gm``'s parameter gradients are not eager's, or ``None`` (they are, or ``gm``
    is no capture whose gradients can differ). A capture whose check waits for a backward
    pass runs it on the first call; the answer is kept with the capture."""
    with _CHECK_LOCK:
        check = gm.meta.pop(UNCHECKED, None)
        if check is not None:
            why = check.run(gm)
            if why is not None:
                gm.meta[GRADIENTS_DIFFER] = why
    return gm.meta.get(GRADIENTS_DIFFER)


_CHECK_LOCK = threading.Lock()


def capture_gradients(
    model: Any,
    capture: torch.fx.GraphModule,
    got: Any,
    want: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str:
    """How the capture's parameter gradients differ from eager's: those of the runs made
    (``got``, ``want``), or, where they hold none (grad mode off, or no runs: ``None``),
    of the capture and the model run again with it on."""
    if not any(t.requires_grad for t in tensors_in(got)):
        if not isinstance(model, torch.nn.Module) or not any(
            p.requires_grad for p in model.parameters()
        ):
            return ""
        with torch.enable_grad():
            flat = bind_inputs(capture, args, kwargs)
            with restored_state(model, inputs=flat):
                got = capture(*flat)
            want = eager_output(model, args, kwargs)
    return gradient_divergence(got, want, model)
