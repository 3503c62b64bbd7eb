"""The per-step checks: one fused reduction over many tensors, read with one host sync."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fxviz._torch_compat import foreach_norms

__all__ = ["nonfinite_names", "total_norm"]


def total_norm(tensors: list[torch.Tensor], scalars: Iterable[torch.Tensor] = ()) -> torch.Tensor:
    """A float32 scalar that is finite when every entry of ``tensors`` and every value of
    ``scalars`` (losses) is: the sum of the tensors' norms plus the scalars. Nothing is
    read back to the host here; a NaN or an infinity anywhere makes the sum non-finite
    (so can norms past float32's range: :func:`nonfinite_names` tells which it was).
    """
    parts = foreach_norms(tensors) if tensors else []
    parts += [s.detach().float().sum() for s in scalars]
    if not parts:
        return torch.zeros(())
    device = parts[0].device
    if any(p.device != device for p in parts):
        parts = [p.to(device) for p in parts]
    return torch.stack(parts).sum()


def nonfinite_names(named: Iterable[tuple[str, torch.Tensor]]) -> list[str]:
    """The names whose tensor holds a NaN or an infinity (exact; the slow path, taken
    only once :func:`total_norm` was not finite)."""
    return [name for name, t in named if not bool(torch.isfinite(t).all())]
