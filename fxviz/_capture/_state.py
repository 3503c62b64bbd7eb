"""Leave the model as the capture found it: the recording that follows is *the* run.

A capture runs the model once; recording the capture runs its graphs again. Buffers the
run updates (batch-norm statistics, caches) and the random stream it draws from are put
back afterwards, so the recorded run starts from the same state as the captured one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["restored_state"]


@contextlib.contextmanager
def restored_state(model: Any) -> Iterator[None]:
    """Run the block, then restore ``model``'s buffers and the CPU (and CUDA) RNG."""
    buffers = (
        [(b, b.detach().clone()) for b in model.buffers()]
        if isinstance(model, torch.nn.Module)
        else []
    )
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                if buffer.shape == saved.shape:
                    buffer.copy_(saved)
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
