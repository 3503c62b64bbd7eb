"""One call for the usual questions: right in fp32, wrong in bf16? right before my pass?"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from fxviz._compare._comparison import Comparison, compare
from fxviz.errors import InputError

__all__ = ["compare_dtype", "compare_pass"]


def compare_dtype(
    model: Any,
    *inputs: Any,
    dtype: torch.dtype = torch.bfloat16,
    autocast: bool = False,
    **options: Any,
) -> Comparison:
    """Run ``model`` as it is and again in ``dtype``, and compare the runs node by node.

    Without ``autocast`` a copy of the model is converted with ``.to(dtype)`` and the
    floating-point inputs with it; with ``autocast=True`` the same model runs under
    ``torch.autocast(device, dtype)`` (as mixed-precision training or inference does).
    ``options`` go to :func:`fxviz.compare` (``metric``, ``sqnr_db``...).

    Example:
        >>> import torch, fxviz
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Softmax(-1))
        >>> cmp = fxviz.compare_dtype(model, torch.randn(4, 16), dtype=torch.float16)
        >>> cmp["_1"].dtype_b
        torch.float16
    """
    from fxviz._record import record
    from fxviz.capture import trace

    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InputError(f"dtype must be a floating-point torch.dtype, not {dtype!r}")
    gm = trace(model, *inputs)
    reference = record(gm, *inputs, progress=False)
    if autocast:
        device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        with torch.autocast(device_type=device, dtype=dtype):
            other = record(gm, *inputs, progress=False)
    else:
        converted = _copy(gm).to(dtype)
        cast = [
            t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
            for t in inputs
        ]
        other = record(converted, *cast, progress=False)
    return compare(reference, other, **options)


def compare_pass(
    model: Any,
    transform: Callable[[torch.fx.GraphModule], Any] | torch.fx.GraphModule,
    *inputs: Any,
    **options: Any,
) -> Comparison:
    """Run a graph before and after a pass on the same inputs, and compare node by node.

    ``transform`` is the pass: a ``torch.fx.Transformer`` subclass (its run says which
    new node came from which old one), a function given a copy of the traced graph and
    returning the new ``GraphModule`` (or ``None`` when it changed the copy in place), or
    the transformed ``GraphModule`` itself. Nodes are aligned by provenance (the
    Transformer's, or ``node.meta["from_node"]``), then name, then target. ``options`` go to
    :func:`fxviz.compare`.

    Example:
        >>> import torch, fxviz
        >>> def halve_relu(gm):
        ...     for node in gm.graph.nodes:
        ...         if node.target is torch.relu:
        ...             with gm.graph.inserting_after(node):
        ...                 half = gm.graph.call_function(torch.mul, (node, 0.5))
        ...             node.replace_all_uses_with(half, delete_user_cb=lambda u: u is not half)
        ...     gm.recompile()
        >>> cmp = fxviz.compare_pass(lambda x: torch.relu(x) + 1, halve_relu, torch.randn(8))
        >>> cmp.first_divergence.name
        'add'
    """
    from fxviz._record import record
    from fxviz.capture import trace

    before = trace(model, *inputs)
    provenance: dict[str, str] = {}
    if isinstance(transform, type) and issubclass(transform, torch.fx.Transformer):
        made = record(_copy(before), interpreter=transform, progress=False)
        provenance = {new: r.name for r in made.values() for new in r.produced}
        after = made.output
    elif isinstance(transform, torch.nn.Module):
        after = trace(transform, *inputs)
    elif callable(transform):
        given = _copy(before)
        result = transform(given)
        after = trace(given if result is None else result, *inputs)
    else:
        raise InputError(
            f"transform must be a pass (a Transformer class or a function) or a GraphModule, not {type(transform).__name__}"
        )
    a = record(before, *inputs, progress=False)
    b = record(after, *inputs, progress=False)
    return compare(a, b, provenance=provenance, **options)


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A deep copy that keeps the model's class name (``deepcopy`` alone names it GraphModule)."""
    return torch.fx.GraphModule(copy.deepcopy(gm), copy.deepcopy(gm.graph), type(gm).__name__)
