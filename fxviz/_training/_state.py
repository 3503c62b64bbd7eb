"""What a replay starts from: RNG states, and copies of parameters, buffers and optimizer state."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

__all__ = [
    "Snapshot",
    "eager_module",
    "parameter_names",
    "rng_state",
    "set_rng_state",
    "take_snapshot",
]


def eager_module(model: torch.nn.Module) -> torch.nn.Module:
    """The module that runs eagerly: ``model._orig_mod`` for a ``torch.compile``'d one."""
    return getattr(model, "_orig_mod", model)


def rng_state() -> dict[str, Any]:
    """The CPU generator's state and, where CUDA has started, every device's (cheap: a
    few kilobytes copied on the host, no device sync)."""
    cuda: list[torch.Tensor] = []
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = torch.cuda.get_rng_state_all()
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict[str, Any]) -> None:
    """Put the generators back where :func:`rng_state` found them."""
    torch.set_rng_state(state["cpu"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def parameter_names(model: torch.nn.Module) -> dict[int, str]:
    """``id(parameter) -> name`` in the eager module (no ``_orig_mod.`` prefix)."""
    return {id(p): name for name, p in eager_module(model).named_parameters()}


@dataclasses.dataclass
class Snapshot:
    """Copies of a model's parameters and buffers and of an optimizer's state.

    Attributes:
        params: ``{name: tensor}``, detached copies.
        buffers: ``{name: tensor}``, detached copies.
        optimizer: the optimizer's ``state_dict()`` with its tensors copied and its
            parameter indices replaced by parameter names (``None``: no optimizer).
    """

    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    optimizer: dict[str, Any] | None

    @property
    def nbytes(self) -> int:
        """The memory the copies take."""
        tensors = [*self.params.values(), *self.buffers.values()]
        if self.optimizer is not None:
            for state in self.optimizer["state"].values():
                tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        return sum(t.numel() * t.element_size() for t in tensors)

    def restore(self, model: torch.nn.Module, optimizer: Any = None) -> None:
        """Copy the snapshot back into ``model`` (and ``optimizer``), bit for bit."""
        eager = eager_module(model)
        params = dict(eager.named_parameters())
        buffers = dict(eager.named_buffers())
        missing = sorted(set(self.params) - set(params))
        if missing:
            from fxviz.errors import InputError

            raise InputError(
                f"the model has no parameter(s) {missing[:5]} that the incident saved: "
                f"pass a model of the same class and configuration as the watched one"
            )
        with torch.no_grad():
            for name, value in self.params.items():
                params[name].copy_(value)
            for name, value in self.buffers.items():
                if name in buffers:
                    buffers[name].copy_(value)
        if optimizer is not None and self.optimizer is not None:
            optimizer.load_state_dict(_by_index(self.optimizer, optimizer, model))


def take_snapshot(model: torch.nn.Module, optimizer: Any = None) -> Snapshot:
    """Copy ``model``'s parameters and buffers and ``optimizer``'s state as they are now."""
    eager = eager_module(model)
    with torch.no_grad():
        params = {n: p.detach().clone() for n, p in eager.named_parameters()}
        buffers = {n: b.detach().clone() for n, b in eager.named_buffers()}
    state = None
    if optimizer is not None:
        state = _by_name(optimizer.state_dict(), optimizer, model)
    return Snapshot(params, buffers, state)


def _optimizer_names(optimizer: Any, model: torch.nn.Module) -> list[str]:
    """The name of each optimizer parameter, in ``state_dict()`` index order."""
    names = parameter_names(model)
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            out.append(names.get(id(p), f"<not in the model #{len(out)}>"))
    return out


def _by_name(state_dict: dict[str, Any], optimizer: Any, model: torch.nn.Module) -> dict[str, Any]:
    names = _optimizer_names(optimizer, model)
    state = {
        names[i]: {k: _copy(v) for k, v in per.items()} for i, per in state_dict["state"].items()
    }
    groups = []
    for group in state_dict["param_groups"]:
        g = {k: _copy(v) for k, v in group.items() if k != "params"}
        g["params"] = [names[i] for i in group["params"]]
        groups.append(g)
    return {"state": state, "param_groups": groups}


def _by_index(saved: dict[str, Any], optimizer: Any, model: torch.nn.Module) -> dict[str, Any]:
    index = {name: i for i, name in enumerate(_optimizer_names(optimizer, model))}
    state = {index[n]: {k: _copy(v) for k, v in per.items()} for n, per in saved["state"].items()}
    groups = []
    for group in saved["param_groups"]:
        g = {k: _copy(v) for k, v in group.items() if k != "params"}
        g["params"] = [index[n] for n in group["params"]]
        groups.append(g)
    return {"state": state, "param_groups": groups}


def _copy(value: Any) -> Any:
    # load_state_dict keeps tensors it need not cast: a copy keeps the snapshot unchanged
    return value.detach().clone() if isinstance(value, torch.Tensor) else value
