"""One call for the usual questions: right in fp32, wrong in bf16? right before my pass?"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch

from fxviz._capture._stitch import Capture
from fxviz._compare._comparison import Comparison, compare, engine
from fxviz._compare._thresholds import DEFAULT_SQNR_DB, Criterion
from fxviz._torch_compat import has_plain_codegen
from fxviz.errors import InputError
from fxviz.render._align import transformer_provenance

__all__ = ["compare_dtype", "compare_pass"]


def compare_dtype(
    model: Any,
    *args: Any,
    dtype: torch.dtype = torch.bfloat16,
    autocast: bool = False,
    metric: str = "sqnr",
    sqnr_db: float = DEFAULT_SQNR_DB,
    min_cosine: float = 0.999,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kwargs: Any,
) -> Comparison:
    """Run ``model`` as it is and again in ``dtype``, and compare the runs node by node.

    Inputs are given as for ``model(*args, **kwargs)`` (and :func:`fxviz.record`); the
    keywords named below are options, every other keyword is an input. Without
    ``autocast`` a deep copy of the *model* is converted with ``.to(dtype)``, its
    floating-point inputs with it, and the copy is captured again (a captured graph
    cannot be converted: Dynamo and export graphs keep the dtypes they were traced in);
    the original is left untouched. With ``autocast=True`` the same model runs under
    ``torch.autocast(device, dtype)`` (as mixed-precision training or inference does).
    ``metric``, ``sqnr_db``, ``min_cosine``, ``rtol`` and ``atol`` are the criterion of
    :func:`fxviz.compare`; ``comparison.what`` says what was compared.

    Example:
        >>> import torch, fxviz
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Softmax(-1))
        >>> cmp = fxviz.compare_dtype(model, torch.randn(4, 16), dtype=torch.float16)
        >>> cmp["_1"].dtype_b
        torch.float16
        >>> cmp.what
        'Sequential in float32 vs a copy converted to float16'
    """
    from fxviz._record import record

    criterion = Criterion(metric, sqnr_db, min_cosine, rtol, atol)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InputError(f"dtype must be a floating-point torch.dtype, not {dtype!r}")
    baked = _baked(model)
    if baked and not autocast:
        raise InputError(
            f"compare_dtype needs the model itself, not {baked}: it keeps the dtypes it "
            "was traced in, so a converted copy would mix dtypes. Pass the nn.Module (it "
            "is copied, converted and captured again), or use autocast=True"
        )
    if not callable(model):
        raise InputError(f"compare_dtype takes a model or function, not {type(model).__name__}")
    reference = record(model, *args, progress=False, **kwargs)
    name = _name(model)
    if autocast:
        device = next((t.device.type for t in _tensors((args, kwargs))), "cpu")
        with torch.autocast(device_type=device, dtype=dtype):
            other = record(model, *args, progress=False, **kwargs)
        what = f"{name} as it is vs under torch.autocast({device!r}, {_dtype(dtype)})"
    else:
        converted = _converted(model, dtype)
        other = record(converted, *_cast(args, dtype), progress=False, **_cast(kwargs, dtype))
        what = (
            f"{name} in {_own_dtype(model, (args, kwargs))} vs a copy converted to {_dtype(dtype)}"
        )
    return engine(reference, other, criterion, provenance={}, what=what)


def compare_pass(
    model: Any,
    transform: Callable[[torch.fx.GraphModule], Any] | torch.fx.GraphModule,
    *inputs: Any,
    metric: str = "sqnr",
    sqnr_db: float = DEFAULT_SQNR_DB,
    min_cosine: float = 0.999,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kwargs: Any,
) -> Comparison:
    """Run a graph before and after a pass on the same inputs, and compare node by node.

    ``transform`` is the pass: a ``torch.fx.Transformer`` subclass (its run says which
    new node came from which old one), a function given a copy of the traced graph and
    returning the new ``GraphModule`` (or ``None`` when it changed the copy in place), or
    the transformed ``GraphModule`` itself. Nodes are aligned by provenance (the
    Transformer's, or ``node.meta["from_node"]``), then name, then target, as
    :func:`fxviz.diff` aligns them (the same engine: ``diff`` says what the pass changed in
    the graph, ``compare_pass`` how the values moved); a node the pass inserted is
    measured against the value it displaced. ``inputs`` and ``kwargs`` are the model's
    (as for :func:`fxviz.record`); the thresholds are :func:`fxviz.compare`'s.

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
        >>> cmp.first_divergence.name  # the inserted node, against the relu it displaced
        'mul'
    """
    from fxviz._record import record
    from fxviz.capture import trace

    before = trace(model, *inputs, **kwargs)
    provenance: dict[str, str] = {}
    if isinstance(transform, type) and issubclass(transform, torch.fx.Transformer):
        made = record(_copy(before), interpreter=transform, progress=False)
        after, provenance = transformer_provenance(made)
    elif isinstance(transform, torch.nn.Module):
        after = trace(transform, *inputs, **kwargs)
    elif callable(transform):
        given = _copy(before)
        result = transform(given)
        after = trace(given if result is None else result, *inputs, **kwargs)
    else:
        raise InputError(
            f"transform must be a pass (a Transformer class or a function) or a GraphModule, not {type(transform).__name__}"
        )
    a = record(before, *inputs, progress=False, **kwargs)
    b = record(after, *inputs, progress=False, **kwargs)
    thresholds = {"metric": metric, "sqnr_db": sqnr_db, "min_cosine": min_cosine}
    return compare(a, b, provenance=provenance, rtol=rtol, atol=atol, **thresholds)


def _baked(model: Any) -> str:
    """What the model is when it is a capture whose graph fixes its dtypes, else ``""``."""
    if isinstance(model, torch.export.ExportedProgram):
        return "an ExportedProgram"
    if isinstance(model, torch.fx.GraphModule):
        method = model.meta.get("fxviz_method")
        if method in ("export", "dynamo", "real") or not has_plain_codegen(model.graph):
            return f"a graph captured with {method or 'torch.export'}"
    return ""


def _converted(model: Any, dtype: torch.dtype) -> Any:
    """A converted deep copy of a module (a GraphModule keeps its class name); a plain
    function has nothing to convert."""
    if isinstance(model, torch.fx.GraphModule):
        return _copy(model).to(dtype)
    if isinstance(model, torch.nn.Module):
        return copy.deepcopy(model).to(dtype)
    return model


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """Floating-point tensors in ``value`` (nested tuples, lists and dicts) as ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _own_dtype(model: Any, inputs: Any) -> str:
    """The floating-point dtype the model runs in: its parameters', else its inputs'."""
    params = model.parameters() if isinstance(model, torch.nn.Module) else ()
    for t in (*params, *_tensors(inputs)):
        if t.is_floating_point():
            return _dtype(t.dtype)
    return "its own dtypes"


def _name(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__name__", type(model).__name__)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A deep copy that keeps the model's class name (``deepcopy`` alone names it
    GraphModule), and a capture's Python between graphs (a copy of a Capture is one)."""
    if isinstance(gm, Capture):
        copied = copy.deepcopy(gm)
        type(copied).__name__ = type(gm).__name__  # its own class: GraphModule makes one each
        return copied
    return torch.fx.GraphModule(copy.deepcopy(gm), copy.deepcopy(gm.graph), type(gm).__name__)
