"""``fxviz.watch``: a training step checked for NaN/Inf at almost no cost, stopped before its
update is applied.

Per call the watch keeps (memory) a reference to the batch as given and the RNG states
taken before the step (about 5 KB on CPU, plus a few bytes per CUDA device), for every call
since the optimizer last stepped (one call, or the micro-batches of gradient accumulation).
Per optimizer step it runs one fused reduction over the gradients and the losses seen by
``backward`` (``torch._foreach_norm``, float32) and reads it back once: that is the one host
sync. Nothing is hooked per node and nothing is copied on a good step.

Copies are made on demand: when the check fails, the parameters, buffers and optimizer state
are copied before the update is skipped (one copy of each, kept in ``incident``); when the
gradients are finite but so large that the update may overflow (``norm × lr`` past the square
root of float32's range), the same copy is taken before the update and the parameters are
checked after it (a second sync, on such steps only), so a parameter that became non-finite
is restored. A parameter that overflows on a step not flagged so shows up as a non-finite
loss or gradient at the next step.

With AMP's ``GradScaler`` the check runs only when the scaler lets the optimizer step: its
own skips (gradients overflowed at the current scale) are not incidents; a non-finite loss
is one (checked unscaled, as the step returns it).
"""

from __future__ import annotations

import collections
import contextlib
import math
import statistics
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
import torch.distributed

from fxviz._training._checks import nonfinite_names, total_norm
from fxviz._training._incident import Call, Incident
from fxviz._training._state import Snapshot, parameter_names, rng_state, take_snapshot
from fxviz.errors import FxvizWarning, InputError, NonFiniteStep

__all__ = ["Watch", "watch"]

OnNonFinite = Literal["raise", "skip"] | Callable[[Incident], Any]
_RISK = float(torch.finfo(torch.float32).max) ** 0.5


def watch(
    train_step: Callable[..., Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    on_nonfinite: OnNonFinite = "raise",
    spike: float | None = None,
    window: int = 100,
    distributed: bool | None = None,
) -> Watch:
    """Wrap ``train_step`` so that each call is checked for NaN and infinity.

    ``step = fxviz.watch(train_step, model, optimizer)`` is called as ``train_step`` is
    and returns what it returns. On the first call whose loss or gradients hold a NaN or
    an infinity, the optimizer's update is not applied (its ``step()`` sees no gradients:
    the rest of your step still runs) and :class:`fxviz.NonFiniteStep` is raised, holding
    the :class:`Incident` (also ``step.incident``): ``incident.replay()`` records that
    exact step, forward and backward, node by node.

    Args:
        train_step: your step, ``train_step(batch) -> loss``: forward, loss,
            ``backward()``, ``optimizer.step()``.
        model: the module it trains (``torch.compile``'d ones too: replay records
            ``model._orig_mod``).
        optimizer: the optimizer it steps (without one only the loss is checked).
        on_nonfinite: ``"raise"``; ``"skip"``: warn (:class:`fxviz.FxvizWarning`), skip the
            update, clear the gradients and go on; or a callable given the
            :class:`Incident` (the update is skipped, the gradients cleared).
        spike: also treat a loss above ``spike ×`` the median of the last ``window``
            losses as an incident (``what == "loss spike"``), before its update.
        window: how many recent losses the spike check compares with.
        distributed: under ``torch.distributed`` every rank checks and the ranks agree
            (one ``all_reduce`` of a flag), so all stop at the same step; ``None``: when
            a process group is initialised.

    Example:
        >>> import torch, fxviz
        >>> model = torch.nn.Linear(2, 1)
        >>> with torch.no_grad():  # the first step's output is then -2
        ...     _ = model.weight.fill_(1.0), model.bias.zero_()
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> def train_step(x):
        ...     opt.zero_grad()
        ...     loss = model(x).log().sum()  # log of a negative number: NaN
        ...     loss.backward()
        ...     opt.step()
        ...     return loss
        >>> step = fxviz.watch(train_step, model, opt)
        >>> before = model.weight.detach().clone()
        >>> try:
        ...     for i in range(3):
        ...         _ = step(torch.full((1, 2), float(i)) - 1)
        ... except fxviz.NonFiniteStep as e:
        ...     print(e.incident.step, e.incident.what, torch.equal(model.weight, before))
        0 loss True
    """
    if not (on_nonfinite in ("raise", "skip") or callable(on_nonfinite)):
        raise InputError(
            f"on_nonfinite={on_nonfinite!r}: must be 'raise', 'skip' or a callable taking the "
            "incident"
        )
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise InputError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    return Watch(
        train_step,
        model,
        optimizer,
        on_nonfinite=on_nonfinite,
        spike=spike,
        window=window,
        distributed=distributed,
    )


class Watch:
    """A watched training step (made by :func:`fxviz.watch`).

    Attributes:
        calls: how many times the step has been called.
        incident: the last :class:`Incident` (``None`` until one happens).
        skipped: how many updates were not applied.
    """

    def __init__(
        self,
        train_step: Callable[..., Any] | None,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None,
        *,
        on_nonfinite: OnNonFinite = "raise",
        spike: float | None = None,
        window: int = 100,
        distributed: bool | None = None,
        hook_optimizer: bool = True,
    ) -> None:
        self.train_step = train_step
        self.model = model
        self.optimizer = optimizer
        self.on_nonfinite = on_nonfinite
        self.spike = spike
        self.calls = 0
        self.incident: Incident | None = None
        self.skipped = 0
        self._losses: collections.deque[float] = collections.deque(maxlen=window)
        self._distributed = distributed
        self._pending: list[Call] = []
        self._active = False
        self._roots: list[torch.Tensor] = []
        self._found: Incident | None = None
        self._checked = self._stepped = False
        self._stash: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        self._risky: Snapshot | None = None
        self._handles: list[Any] = []
        if optimizer is not None and hook_optimizer:
            self._handles.append(optimizer.register_step_pre_hook(self._pre_hook))
            self._handles.append(optimizer.register_step_post_hook(self._post_hook))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.train_step is None:
            raise InputError("this watch has no step function (it serves a callback)")
        self.begin(args, kwargs)
        try:
            with _observe_backward(self._roots):
                out = self.train_step(*args, **kwargs)
        finally:
            self._active = False
            self._unstash()
        return self.end(out)

    def remove(self) -> None:
        """Take the optimizer hooks off (the watch checks nothing after this)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __repr__(self) -> str:
        state = f"incident at step {self.incident.step}" if self.incident else "no incident"
        return f"<fxviz.Watch: {self.calls} call(s), {state}>"

    # -- one call, in three parts (the callbacks call them from their framework's events) --
    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A call starts: note its batch and the RNG states before it."""
        if self._stepped:
            self._pending.clear()
        self._pending.append(Call(self.calls, args, kwargs, rng_state()))
        self.calls += 1
        self._roots.clear()
        self._found = None
        self._checked = self._stepped = False
        self._active = True

    def check_update(self, optimizer: Any) -> Incident | None:
        """Before ``optimizer`` applies its update: check the gradients and the losses seen.

        Returns the :class:`Incident` found (the update must then not be applied)."""
        self._checked = True
        params = [p for group in optimizer.param_groups for p in group["params"]]
        total = total_norm([p.grad for p in params if p.grad is not None])
        loss = _loss_sum(self._roots)
        total_v, loss_v, bad = self._read(total, loss)
        has_loss = bool(self._roots)
        if not bad and has_loss and self._spiked(loss_v):
            self._found = self._incident("loss spike", (f"loss {loss_v:.4g}",), loss_v)
            return self._found
        if not bad:
            lr = max((float(g.get("lr", 0.0)) for g in optimizer.param_groups), default=0.0)
            if total_v * max(lr, 1e-30) > _RISK:
                self._risky = take_snapshot(self.model, optimizer)
            if has_loss:
                self._note_loss(loss_v)
            return None
        return self._on_bad(bad, params, loss_v, optimizer)

    def end(self, out: Any) -> Any:
        """A call ended with ``out``: check its loss when no update was checked, and act on
        an incident."""
        self._active = False
        if self._found is None and not self._checked:
            loss = _loss_of(out)  # unscaled, where the losses seen by backward may be
            scalars = self._roots if loss is None else [loss]  # scaled (GradScaler)
            if scalars:
                _, loss_v, bad = self._read(torch.zeros(()), _loss_sum(scalars))
                if bad:
                    names = ("loss",) if bad < 0 else (f"rank {bad - 1}",)
                    self._found = self._incident("loss" if bad < 0 else "rank", names, loss_v)
                elif self._spiked(loss_v):
                    self._found = self._incident("loss spike", (f"loss {loss_v:.4g}",), loss_v)
                else:
                    self._note_loss(loss_v)
        if self._found is None:
            return out
        return self._handle(self._found, out)

    # -- optimizer hooks ------------------------------------------------------------------
    def hold_update(self, optimizer: Any) -> None:
        """Make ``optimizer.step()`` a no-op: take the gradients away (an optimizer skips
        parameters without one) until :meth:`release_update`."""
        self._stash = [(p, p.grad) for group in optimizer.param_groups for p in group["params"]]
        for p, _ in self._stash:
            p.grad = None

    def release_update(self) -> None:
        """Give back the gradients :meth:`hold_update` took."""
        self._unstash()

    def _pre_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._active or self._checked:
            return
        if self.check_update(optimizer) is not None:
            self.hold_update(optimizer)

    def _post_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._active:
            return
        self._stepped = True
        self._unstash()
        risky, self._risky = self._risky, None
        if risky is None or self._found is not None:
            return
        params = [(n, p) for n, p in _named(self.model) if p.requires_grad]
        if torch.isfinite(total_norm([p.detach() for _, p in params])):
            return
        bad = nonfinite_names(params)
        if bad:
            risky.restore(self.model, optimizer)
            self._found = self._incident("parameter", tuple(bad), None, snapshot=risky)

    # -- helpers --------------------------------------------------------------------------
    def _read(self, total: torch.Tensor, loss: torch.Tensor) -> tuple[float, float, int]:
        """One host read: the norm, the loss and who failed (0 nobody, -1 this process,
        ``r + 1`` rank ``r``); under torch.distributed the ranks agree first."""
        loss = loss.to(total.device)
        dist = _process_group(self._distributed)
        if dist is None:  # the common case: two numbers, one read, judged here
            total_v, loss_v = torch.stack([total, loss]).tolist()
            return total_v, loss_v, 0 if math.isfinite(total_v + loss_v) else -1
        bad = (~torch.isfinite(total + loss)).to(torch.int64)
        rank, world = dist.get_rank(), dist.get_world_size()
        code = bad * (world - rank)  # MAX picks the lowest failing rank
        dist.all_reduce(code, op=dist.ReduceOp.MAX)
        total_v, loss_v, code_v = torch.stack([total, loss, code.to(total.device).float()]).tolist()
        if not code_v:
            return total_v, loss_v, 0
        failed = world - int(code_v)
        return total_v, loss_v, -1 if failed == rank else failed + 1

    def _on_bad(self, bad: int, params: list[Any], loss_v: float, optimizer: Any) -> Incident:
        if bad > 0:
            self._found = self._incident("rank", (f"rank {bad - 1}",), loss_v)
            return self._found
        named = parameter_names(self.model)
        names = nonfinite_names(
            (named.get(id(p), "?"), p.grad) for p in params if p.grad is not None
        )
        if nonfinite_names((f"loss {i}", r.detach()) for i, r in enumerate(self._roots)):
            self._found = self._incident("loss", ("loss", *names), loss_v)
        elif names:
            self._found = self._incident("gradient", tuple(names), loss_v)
        else:  # finite, but norms past float32's range: the update may overflow
            self._risky = take_snapshot(self.model, optimizer)
            self._checked = True
            return None  # type: ignore[return-value]
        return self._found

    def _incident(
        self, what: str, names: tuple[str, ...], loss: float | None, snapshot: Any = None
    ) -> Incident:
        if snapshot is None:
            snapshot = take_snapshot(self.model, self.optimizer)
        return Incident(
            step=self._pending[-1].index,
            what=what,
            names=names,
            loss=loss,
            calls=list(self._pending),
            snapshot=snapshot,
            model=self.model,
            optimizer=self.optimizer,
            train_step=self.train_step,
        )

    def _spiked(self, loss: float) -> bool:
        if self.spike is None or len(self._losses) < min(10, self._losses.maxlen or 10):
            return False
        return loss > self.spike * statistics.median(self._losses)

    def _note_loss(self, loss: float) -> None:
        if self.spike is not None:
            self._losses.append(loss)

    def _unstash(self) -> None:
        for p, grad in self._stash:
            p.grad = grad
        self._stash = []

    def _handle(self, incident: Incident, out: Any) -> Any:
        self.incident = incident
        self.skipped += 1
        if self.on_nonfinite == "raise":
            raise NonFiniteStep(incident.message, incident=incident)
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        if self.on_nonfinite == "skip":
            warnings.warn(incident.message, FxvizWarning, stacklevel=3)
        else:
            self.on_nonfinite(incident)  # type: ignore[operator]
        return out


def _named(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return list(getattr(model, "_orig_mod", model).named_parameters())


def _loss_sum(roots: list[torch.Tensor]) -> torch.Tensor:
    if not roots:
        return torch.zeros(())
    if len(roots) == 1:
        return roots[0].detach().float().sum()
    return torch.stack([r.detach().float().sum() for r in roots]).sum()


def _loss_of(out: Any) -> torch.Tensor | None:
    """The loss in what a step returned: a tensor, ``out["loss"]``, ``out.loss`` or
    ``out[0]``."""
    if isinstance(out, torch.Tensor):
        return out.detach() if out.is_floating_point() else None
    if isinstance(out, dict):
        return _loss_of(out.get("loss"))
    if hasattr(out, "loss"):
        return _loss_of(out.loss)
    if isinstance(out, (tuple, list)) and out:
        return _loss_of(out[0])
    return None


def _process_group(distributed: bool | None) -> Any:
    if distributed is False:
        return None
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist
    if distributed:
        raise InputError("distributed=True but no torch.distributed process group is initialised")
    return None


@contextlib.contextmanager
def _observe_backward(roots: list[torch.Tensor]) -> Iterator[None]:
    """Note the tensors ``backward()`` starts from (the losses), so that the check before
    the update sees them. ``Tensor.backward`` calls ``torch.autograd.backward``; the call
    is passed on unchanged."""
    original = torch.autograd.backward

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        items = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        roots.extend(t for t in items if isinstance(t, torch.Tensor) and t.numel() <= 16)
        return original(tensors, *args, **kwargs)

    torch.autograd.backward = backward
    try:
        yield
    finally:
        torch.autograd.backward = original
