"""Shapes for a drawing, as cheaply as they can be had.

The debugger widget labels every node with its output shape before anything runs. A fake
tensor pass did that: 0.7 ms a node warm, and its first use in a process imports
``torch._dynamo`` for FakeTensorMode, 1-4 s on a busy machine; the widget waited for both. A
meta-device pass gives the same labels for about a third of the time (0.2 ms a node); the
fake pass stays for graphs with an op the meta device cannot run.
"""

from __future__ import annotations

from typing import Any

import torch.fx

from fxviz._shapes._propagate import propagate
from fxviz._shapes._report import ShapeReport

__all__ = ["drawn_shapes"]


def drawn_shapes(
    gm: torch.fx.GraphModule, inputs: tuple[Any, ...]
) -> torch.fx.GraphModule | ShapeReport:
    """What to draw so that each node shows its output shape for ``inputs`` (bound, one per
    placeholder): a meta pass's :class:`ShapeReport`, else a fake pass's, else ``gm``.

    Example:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Linear(4, 2))
        >>> report = drawn_shapes(gm, (torch.ones(3, 4),))
        >>> report.mode, report["linear"].shape
        ('meta', (3, 2))
    """
    for mode in ("meta", "fake"):
        try:
            return propagate(gm, inputs, mode, progress=False, flops=False, suggest=False)
        except Exception:  # labels are a help: a graph without them is still a graph
            continue
    return gm
