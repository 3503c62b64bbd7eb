"""FLOPs and multiply-adds per node, counted by torch's own ``FlopCounterMode``.

torch counts the ops that dominate compute (matmuls, convolutions, attention, their
backward) as ``2 × multiply-adds``; elementwise ops count 0, as in torch, torchinfo and
fvcore. Counting works on fake and meta tensors, so a model built on the meta device
has its FLOPs counted without memory or compute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

from fxviz._torch_compat import cpu_attention_kernel

__all__ = ["FlopCounter", "human_flops", "module_totals"]


class FlopCounter:
    """Counts each node's FLOPs while a graph runs: ``with counter.active(): ...`` around
    the run, ``counter.wrap(run_node)`` around the per-node call."""

    def __init__(self) -> None:
        self.flops: dict[str, int] = {}
        self._mode: Any = None
        self._credited = 0  # counted for calls that did not run (see credit)

    def total(self) -> int:
        """The FLOPs counted so far in this run."""
        return (self._mode.get_total_flops() if self._mode is not None else 0) + self._credited

    def credit(self, flops: int) -> None:
        """Count ``flops`` for a call answered without running it (an earlier call of
        the same op on inputs of the same metadata counted them: ``fxviz._shapes._memo``)."""
        self._credited += flops

    @contextlib.contextmanager
    def active(self) -> Iterator[FlopCounter]:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False, custom_mapping=_missing_formulas()) as mode:
            self._mode = mode
            try:
                yield self
            finally:
                self._mode = None

    def wrap(self, run: Callable[[torch.fx.Node], Any]) -> Callable[[torch.fx.Node], Any]:
        def counted(node: torch.fx.Node) -> Any:
            if self._mode is None:
                return run(node)
            before = self.total()
            try:
                return run(node)
            finally:
                self.flops[node.name] = self.total() - before

        return counted


def _missing_formulas() -> dict[Any, Any]:
    """Formulas torch's counter lacks: attention's CPU kernel (which real and fake CPU
    runs pick) counts as the other attention kernels do."""
    from torch.utils.flop_counter import sdpa_flop_count

    def cpu_attention(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
        return sdpa_flop_count(query, key, value)

    cpu_kernel = cpu_attention_kernel()
    return {cpu_kernel: cpu_attention} if cpu_kernel is not None else {}


def module_totals(flops: dict[str, int], modules: dict[str, str]) -> dict[str, int]:
    """FLOPs summed per module path, every enclosing module included.

    >>> module_totals({"a": 10, "b": 5, "c": 1}, {"a": "layers.0", "b": "layers.1", "c": ""})
    {'layers': 15, 'layers.0': 10, 'layers.1': 5}
    """
    totals: dict[str, int] = {}
    for name, count in flops.items():
        parts = (modules.get(name) or "").split(".") if modules.get(name) else []
        for i in range(1, len(parts) + 1):
            path = ".".join(parts[:i])
            totals[path] = totals.get(path, 0) + count
    return dict(sorted(totals.items()))


def human_flops(n: float) -> str:
    """``1.68 MFLOPs``.

    >>> human_flops(1_675_264), human_flops(12)
    ('1.68 MFLOPs', '12 FLOPs')
    """
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}FLOPs"
    return f"{int(n)} FLOPs"
