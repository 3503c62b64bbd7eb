"""A Lightning callback: the training watch inside ``trainer.fit()``.

    >>> from fxviz._training.lightning import FxvizCallback  # doctest: +SKIP
    >>> trainer = lightning.Trainer(callbacks=[FxvizCallback()])  # doctest: +SKIP

Each training batch is noted (the batch as given and the RNG states before it); the loss is
noted before ``backward`` and checked with the gradients in ``on_before_optimizer_step``
(one fused reduction, one host read); a non-finite one takes the gradients away, so the
optimizer's update is skipped, and at the end of the batch :class:`fxviz.NonFiniteStep` is
raised out of ``trainer.fit()`` (or a warning with ``on_nonfinite="skip"``). The incident
replays ``training_step(batch, batch_idx)`` and its ``backward()``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch

from fxviz._training._replay import REPLAYING
from fxviz._training._watch import OnNonFinite, Watch

__all__ = ["FxvizCallback"]


class FxvizCallback(pl.Callback):
    """Watch a Lightning run for NaN/Inf (see the module docstring).

    Attributes:
        watch: the :class:`fxviz._training.Watch` (``watch.incident`` after one).
    """

    def __init__(self, *, on_nonfinite: OnNonFinite = "raise") -> None:
        self.on_nonfinite: OnNonFinite = on_nonfinite
        self.watch: Watch | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        optimizer = getattr(optimizer, "optimizer", optimizer)
        self.watch = Watch(
            _step_and_backward(pl_module),
            pl_module,
            optimizer,
            on_nonfinite=self.on_nonfinite,
            hook_optimizer=False,  # the optimizer runs the closure inside step()
        )

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.watch is not None and not REPLAYING[0]:
            self.watch.begin((batch, batch_idx), {})

    def on_before_backward(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor
    ) -> None:
        if self.watch is not None and not REPLAYING[0]:
            self.watch._roots.append(loss.detach())

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any
    ) -> None:
        watch = self.watch
        if watch is None or REPLAYING[0]:
            return
        optimizer = getattr(optimizer, "optimizer", optimizer)
        if watch.check_update(optimizer) is not None:
            watch.hold_update(optimizer)
        watch._stepped = True

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.watch is not None and not REPLAYING[0]:
            self.watch.release_update()
            self.watch.end(outputs)


def _step_and_backward(module: pl.LightningModule) -> Any:
    """What replay runs for a batch: ``training_step``, then its loss's ``backward()``."""

    def step(batch: Any, batch_idx: int) -> Any:
        out: Any = module.training_step(batch, batch_idx)
        loss = out if isinstance(out, torch.Tensor) else out["loss"]
        loss.backward()
        return loss

    return step
