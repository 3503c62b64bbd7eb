"""Messages that explain a failed node: which node, what it called, with which shapes."""

from __future__ import annotations

from typing import Any

import torch

from fxviz._record._records import NodeRecord
from fxviz._record._summary import dtype_name
from fxviz.errors import first_line

__all__ = ["describe_failure", "describe_input"]


def describe_input(name: str, shape: Any, dtype: torch.dtype | None) -> str:
    """``"relu: float32[64, 100]"``, or ``"k: (not a tensor)"``."""
    if shape is None:
        return f"{name}: (not a tensor)"
    return f"{name}: {dtype_name(dtype) if dtype else '?'}{list(shape)}"


def describe_failure(record: NodeRecord, module: torch.nn.Module | None = None) -> str:
    """Explain why ``record``'s node failed and what to do next."""
    error = record.error
    what = f"{record.op} {record.target}"
    if record.op == "call_module" and module is not None:
        what += f" = {_module_repr(module, record.target)}"
    first = first_line(error) if error is not None else ""
    lines = [f"node {record.name!r} ({what}) raised {type(error).__name__}: {first}"]
    if record.inputs:
        described = (
            describe_input(n, s, d)
            for n, s, d in zip(record.inputs, record.input_shapes, record.input_dtypes, strict=True)
        )
        lines.append("  inputs: " + ", ".join(described))
    if record.module:
        lines.append(f"  in module: {record.module}")
    if record.source:
        lines.append(f"  source: {record.source}")
    lines.append(
        "What to do: fix the shapes or dtypes above, or step to this node with "
        "fxviz.Debugger(model, *inputs).run_to(" + repr(record.name) + ") and look at "
        "dbg.inputs(); err.recording holds every node recorded before it."
    )
    return "\n".join(lines)


def _module_repr(root: torch.nn.Module, path: str) -> str:
    try:
        sub = root.get_submodule(path)
    except (AttributeError, KeyError):
        return "?"
    text = repr(sub).splitlines()[0]
    return text if len(text) <= 120 else text[:117] + "..."
