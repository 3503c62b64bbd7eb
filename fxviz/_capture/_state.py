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

__all__ = ["restored_attributes", "restored_state"]


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


@contextlib.contextmanager
def restored_attributes(model: Any) -> Iterator[None]:
    """Run the block, then put back every module's plain attributes as they were.

    Tracing runs ``forward`` on proxies, fake or meta tensors; a forward that assigns an
    attribute (torchvision's anchor generator replaces its list of cell anchors with
    moved copies) would otherwise leave those on the user's model.
    """
    saved = (
        [(m, dict(vars(m))) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    )
    try:
        yield
    finally:
        for module, attributes in saved:
            state = vars(module)
            changed = state.keys() != attributes.keys() or any(
                state[k] is not v for k, v in attributes.items()
            )  # by identity: == would compare tensors (or proxies) by value
            if changed:
                state.clear()
                state.update(attributes)
