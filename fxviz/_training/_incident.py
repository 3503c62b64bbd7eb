"""An incident: the step where a watched run went non-finite, and what replaying it needs."""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Callable
from typing import Any

import torch

from fxviz._record import Recording, record
from fxviz._training._file import save_incident
from fxviz._training._replay import ModelCall, record_step, updates_of
from fxviz._training._state import Snapshot, eager_module, set_rng_state, take_snapshot
from fxviz.errors import InputError

__all__ = ["Call", "Incident"]


@dataclasses.dataclass
class Call:
    """One call of the watched step: its index, the batch as given, the RNG states before."""

    index: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: dict[str, Any]


class Incident:
    """The step of a watched run that produced a NaN or an infinity.

    Attributes:
        step: 0-based index of the call of the watched step.
        what: ``"loss"``, ``"gradient"``, ``"parameter"``, ``"loss spike"``, or ``"rank"``
            when another rank of a distributed run failed (``names``: ``("rank 1",)``).
        names: what was non-finite: ``"loss"`` and/or parameter names.
        loss: the loss the check saw (``nan`` when none), when known.
        snapshot: the parameters, buffers and optimizer state the step started from
            (memory: one copy of each).
        calls: the calls replay re-runs (the batch as given and the RNG states before
            it): this step's, and with gradient accumulation the micro-batches since the
            optimizer last stepped.
        model_calls: after a replay (or loaded from a file), each model call inside the
            step: inputs, RNG states, the gradients that reached its outputs.
    """

    def __init__(
        self,
        *,
        step: int,
        what: str,
        names: tuple[str, ...],
        loss: float | None,
        calls: list[Call],
        snapshot: Snapshot,
        model: torch.nn.Module | None,
        optimizer: Any,
        train_step: Callable[..., Any] | None,
        model_calls: list[ModelCall] | None = None,
        optimizer_class: str = "",
    ) -> None:
        self.step = step
        self.what = what
        self.names = names
        self.loss = loss
        self.calls = calls
        self.snapshot = snapshot
        self.model = model
        self.optimizer = optimizer
        self.train_step = train_step
        self.model_calls = model_calls
        self.optimizer_class = optimizer_class or (
            f"{type(optimizer).__module__}.{type(optimizer).__qualname__}" if optimizer else ""
        )

    def _described(self, most: int) -> str:
        """``non-finite gradient (fc1.weight, fc1.bias)``, ``non-finite values on rank 1``."""
        if self.what == "rank":
            return f"non-finite values on {self.names[0]}"
        names = ", ".join(self.names[:most]) + (", ..." if len(self.names) > most else "")
        return f"non-finite {self.what}" + (f" ({names})" if names else "")

    @property
    def message(self) -> str:
        """One paragraph: the step, what was non-finite, and what to do next."""
        applied = "restored" if self.what == "parameter" else "not applied"
        return (
            f"step {self.step}: {self._described(6)}; the optimizer's update of this step was "
            f"{applied}. incident.replay() records this exact step (rec.first_nonfinite(), "
            "rec.first_nonfinite(grad=True)); fxviz.debug(incident) opens it, "
            "incident.save(path) keeps it"
        )

    @property
    def headline(self) -> str:
        """``training step 3: non-finite gradient (fc1.weight, fc1.bias)``."""
        return f"training step {self.step}: {self._described(4)}"

    def debugger(self, model: torch.nn.Module | None = None) -> Any:
        """A :class:`fxviz.Debugger` on the model's call in this step, stopped just after
        the first node that went non-finite (forward, else the first whose gradient did).

        The step is replayed first (see :meth:`replay`); the debugger then runs on the
        model as the replay leaves it, from the RNG states of that call (the dropout
        masks of the nodes run now are the original's)."""
        from fxviz._record import Debugger

        rec = self.replay(model)
        call = next(c for c in self.model_calls or [] if c.recording is rec)
        eager = eager_module(model if model is not None else self.model)  # type: ignore[arg-type]
        module = eager.get_submodule(call.path) if call.path else eager
        set_rng_state(call.rng)
        dbg = Debugger(module, *call.args, **call.kwargs)
        bad = rec.first_nonfinite() or rec.first_nonfinite(grad=True)
        if bad is not None:
            dbg.run_to(bad.name)
            dbg.step()
        return dbg

    def __repr__(self) -> str:
        return f"<fxviz.Incident: step {self.step}, {self._described(4)}>"

    def replay(self, model: torch.nn.Module | None = None, optimizer: Any = None) -> Recording:
        """Run the step again, exactly, with every node recorded forward and backward.

        The model (the watched one by default) is set to the state the step started from
        and the RNG states are restored, so the values, the dropout masks and the loss are
        the original step's, bit for bit (for a ``torch.compile``'d model the eager module
        is recorded: close to the compiled kernels' values, not bitwise). The model and
        optimizer are left as they were before the call.

        Args:
            model: the model to replay on: by default the watched one; for an incident
                loaded from a file, a model of the same class and configuration (its
                parameters, buffers and optimizer state are set from the file first).
            optimizer: for a loaded incident, an optimizer over ``model`` to take the
                update with (by default one of the saved ``torch.optim`` class is made).

        Returns:
            The :class:`fxviz.Recording` of the model's call (the first one that went
            non-finite, forward or backward, when the step called it several times), with
            ``rec[name].grad`` filled. ``rec.updates`` maps each parameter name to the
            update the optimizer would have applied (``{}`` without an optimizer).
        """
        if model is None:
            model = self.model
        if model is None:
            raise InputError(
                "this incident was loaded from a file: pass a model of the watched class, "
                "incident.replay(model)"
            )
        if self.train_step is not None and model is self.model:
            return self._replay_step(model)
        return self._replay_calls(model, optimizer)

    def _replay_step(self, model: torch.nn.Module) -> Recording:
        optimizer = self.optimizer
        now = take_snapshot(model, optimizer)
        grads = [(p, p.grad) for p in eager_module(model).parameters()]
        self.snapshot.restore(model, optimizer)
        for p, _ in grads:  # the first call replayed started after a zero_grad
            p.grad = None
        try:
            calls, updates, _ = record_step(self.train_step, model, optimizer, self.calls)  # type: ignore[arg-type]
        finally:
            now.restore(model, optimizer)
            for p, g in grads:
                p.grad = g
        self.model_calls = calls
        return _pick([c.recording for c in calls], updates)  # type: ignore[misc]

    def _replay_calls(self, model: torch.nn.Module, optimizer: Any) -> Recording:
        if not self.model_calls:
            raise InputError(
                "this incident holds no model calls to replay on another model: replay it "
                "on the watched model first (incident.replay()), or save it after a replay"
            )
        optimizer = optimizer if optimizer is not None else self._make_optimizer(model)
        eager = eager_module(model)
        self.snapshot.restore(model, optimizer)
        recordings, updates = [], {}
        try:
            for call in self.model_calls:
                set_rng_state(call.rng)
                module = eager.get_submodule(call.path) if call.path else eager
                grads = call.output_grads
                rec = record(module, *call.args, backward=grads, **call.kwargs)
                call.recording = rec
                recordings.append(rec)
            if optimizer is not None:
                params = dict(eager.named_parameters())
                with torch.no_grad():
                    for name, p in params.items():
                        got = [
                            r.gradients.parameters.get(_within(name, c.path))
                            for r, c in zip(recordings, self.model_calls, strict=True)
                        ]
                        values = [g.value for g in got if g is not None and g.value is not None]
                        p.grad = sum(values[1:], values[0].clone()) if values else None
                with updates_of(model, optimizer, updates):
                    optimizer.step()
        finally:
            self.snapshot.restore(model, optimizer)
            for p in eager.parameters():
                p.grad = None
        return _pick(recordings, updates)

    def _make_optimizer(self, model: torch.nn.Module) -> Any:
        module, _, name = self.optimizer_class.rpartition(".")
        saved = self.snapshot.optimizer
        if not module.startswith("torch.optim") or saved is None:
            return None
        cls = getattr(torch.optim, name, None)
        if cls is None:
            return None
        params = dict(eager_module(model).named_parameters())
        groups = []
        for group in saved["param_groups"]:
            g = {k: v for k, v in group.items() if k != "params"}
            g["params"] = [params[n] for n in group["params"]]
            groups.append(g)
        return cls(groups)

    def save(self, path: str | os.PathLike[str]) -> pathlib.Path:
        """Write what replaying this step needs to one file (safetensors and JSON, no
        pickle): the step's parameters, buffers and optimizer state, the model's inputs,
        RNG states and output gradients. ``fxviz.load(path).replay(model)`` replays it in
        another process, given a model of the same class.

        The step is replayed first when it was not yet (to learn the model's inputs)."""
        if self.model_calls is None:
            self.replay()
        return save_incident(self, path)


def _within(name: str, path: str) -> str:
    """A parameter's name inside the called module ``path`` (its own name when ``""``)."""
    if not path:
        return name
    return name[len(path) + 1 :] if name.startswith(path + ".") else "<elsewhere>"


def _pick(recordings: list[Recording], updates: dict[str, torch.Tensor]) -> Recording:
    """The first recording that went non-finite, forward or backward (else the last)."""
    if not recordings:
        raise InputError(
            "the step never called the model: watch the module your step calls "
            "(fxviz.watch(train_step, model, optimizer))"
        )
    chosen = next(
        (r for r in recordings if r.first_nonfinite() or r.first_nonfinite(grad=True)),
        recordings[-1],
    )
    chosen.updates = updates  # type: ignore[attr-defined]
    return chosen
