"""A Hugging Face ``Trainer`` callback: the training watch inside ``trainer.train()``.

    >>> from fxviz._training.hf import FxvizCallback  # doctest: +SKIP
    >>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[FxvizCallback()])  # doctest: +SKIP

Each training forward is noted (its inputs and the RNG states before it, by a forward
pre-hook: a reference, no copy); the gradients are checked before ``optimizer.step()``
(after clipping) by the optimizer pre-hook of :func:`fxviz.watch`; a non-finite one skips
the update and, at the end of that step, raises :class:`fxviz.NonFiniteStep` out of
``trainer.train()`` (or warns and goes on with ``on_nonfinite="skip"``). The callback's
``incident.replay()`` re-runs the forward and ``backward()`` of the micro-batches of that
step (the Trainer's loss scaling for gradient accumulation is not applied, so gradients
may differ by that factor; forward values are the original's).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback

from fxviz._training._replay import REPLAYING
from fxviz._training._watch import OnNonFinite, Watch

__all__ = ["FxvizCallback"]


class FxvizCallback(TrainerCallback):
    """Watch a ``transformers.Trainer`` run for NaN/Inf (see the module docstring).

    Attributes:
        watch: the :class:`fxviz._training.Watch` (``watch.incident`` after one).
    """

    def __init__(self, *, on_nonfinite: OnNonFinite = "raise") -> None:
        self.on_nonfinite: OnNonFinite = on_nonfinite
        self.watch: Watch | None = None
        self._handle: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model: torch.nn.Module = kwargs["model"]
        optimizer = kwargs["optimizer"]
        optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps it
        self.watch = Watch(
            _forward_backward(model), model, optimizer, on_nonfinite=self.on_nonfinite
        )
        watch = self.watch

        def noted(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
            if module.training and not REPLAYING[0]:
                watch.begin(args, kwargs)

        self._handle = model.register_forward_pre_hook(noted, with_kwargs=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watch is not None:
            found = self.watch._found
            if found is not None:
                found.step = state.global_step - 1  # the Trainer's optimizer step
            self.watch.end(None)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.remove()

    def remove(self) -> None:
        """Take the hooks off the model and the optimizer."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if self.watch is not None:
            self.watch.remove()


def _forward_backward(model: torch.nn.Module) -> Any:
    """What replay runs for one micro-batch: the model's forward, then its loss's backward."""

    def step(*args: Any, **kwargs: Any) -> Any:
        out = model(*args, **kwargs)
        loss = out["loss"] if isinstance(out, dict) or hasattr(out, "keys") else out[0]
        loss.backward()
        return loss

    return step
