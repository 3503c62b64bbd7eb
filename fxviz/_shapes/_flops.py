"""A recorded run's FLOPs per node: counted from the recorded shapes
(:mod:`fxviz._shapes._analytic`), else by a fake re-run of the recorded input shapes."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from fxviz._shapes._analytic import analytic_flops, remember_flops
from fxviz._shapes._counting import FlopCounter, human_flops, module_totals
from fxviz._shapes._propagate import shapes
from fxviz._shapes._spec import TensorSpec
from fxviz.errors import ShapeError

if TYPE_CHECKING:
    from fxviz._record._records import Recording

__all__ = ["FlopCounter", "human_flops", "module_totals", "recording_flops"]


def recording_flops(recording: Recording) -> dict[str, int]:
    """Each node's FLOPs for a recorded run, from the recorded shapes and targets (cached on
    the graph per input signature); when one node cannot be counted so (a user's leaf
    module), from a fake re-run on the recorded input shapes (nothing computed; cached on
    the graph too). ``{}`` when the graph cannot run on fake tensors."""
    cached = getattr(recording, "_fxviz_flops", None)
    if cached is not None:
        return cached
    counted = analytic_flops(recording)  # from the recorded shapes, cached on the graph
    if counted is not None:
        with contextlib.suppress(AttributeError):
            recording._fxviz_flops = counted  # type: ignore[attr-defined]
        return counted
    gm = recording.graph_module
    inputs = []
    for node in gm.graph.nodes:  # type: ignore[union-attr]
        if node.op != "placeholder" or node.name not in recording:
            continue
        record = recording[node.name]
        if record.kept:
            inputs.append(record.value)
        elif record.shape is not None and record.dtype is not None:
            if not all(isinstance(d, int) for d in record.shape):  # a symbolic size
                inputs = None
                break
            inputs.append(TensorSpec(tuple(int(d) for d in record.shape), record.dtype))
        else:
            inputs = None
            break
    found: dict[str, int] = {}
    if inputs is not None:
        try:
            found = shapes(gm, *inputs, mode="fake", progress=False).flops
        except ShapeError as error:  # the nodes before the failing one are counted
            found = error.report.flops
        except Exception:
            found = {}
        else:
            remember_flops(recording, found)
    with contextlib.suppress(AttributeError):
        recording._fxviz_flops = found  # type: ignore[attr-defined]
    return found
