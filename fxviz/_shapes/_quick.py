"""Shapes for a drawing, as cheaply as they can be had.

The debugger widget labels every node with its output shape before anything runs. A fake
tensor pass did that, 0.7 ms a node on the 12-layer GPT (CPU, warm). A meta-device pass
gives the same labels for 0.2 ms a node when it also skips the ``torch.device("meta")``
mode every torch call would go through (only the graph's own factory calls need it); the
passes with that mode, then the fake one, stay as fallbacks for the graphs that need them.
Every pass imports ``torch._dynamo`` on its first use in a process (torch's Python meta
kernels are wrapped in its disable decorator): 1-4 s on a busy machine, once. torch
2.13's meta kernels cost 0.1-1.2 ms a call (Python), so the meta passes run each distinct
call once (:mod:`fxviz._shapes._memo`): a 3,000-node stack of repeated blocks is labelled
in ~0.35 s, against ~1.5 s running every call (``benchmarks/shapes.py``).
"""

from __future__ import annotations

from typing import Any

import torch.fx

from fxviz._shapes._propagate import Mode, propagate
from fxviz._shapes._report import ShapeReport

__all__ = ["drawn_shapes"]


def drawn_shapes(
    gm: torch.fx.GraphModule, inputs: tuple[Any, ...]
) -> torch.fx.GraphModule | ShapeReport:
    """What to draw so that each node shows its output shape for ``inputs`` (bound, one per
    placeholder): a meta pass's :class:`ShapeReport` (first without a default-device mode,
    then with one, for modules that make tensors; a call repeating an earlier one's op and
    input metadata not run again), else a fake pass's, else ``gm``.

    Example:
        >>> import torch, fxviz
        >>> gm = fxviz.trace(torch.nn.Linear(4, 2))
        >>> report = drawn_shapes(gm, (torch.ones(3, 4),))
        >>> report.mode, report["linear"].shape
        ('meta', (3, 2))
    """
    tries: tuple[tuple[Mode, bool], ...] = (("meta", False), ("meta", True), ("fake", True))
    for mode, default_meta in tries:  # cheapest first
        try:
            return propagate(
                gm, inputs, mode, progress=False, flops=False, suggest=False,
                default_meta=default_meta, memo=mode == "meta",
            )  # fmt: skip
        except Exception:  # labels are a help: a graph without them is still a graph
            continue
    return gm
