"""What the inspector and the table show about a node: plain JSON-ready values."""

from __future__ import annotations

from typing import Any

import torch

from fxviz._record._records import NodeRecord
from fxviz._record._summary import dtype_name
from fxviz._shapes._report import format_shape

__all__ = ["inspector_data", "table_rows"]

_PREVIEW_VALUES = 64
_BINS = 20


def table_rows(records: list[NodeRecord]) -> list[dict[str, Any]]:
    """One small dict a node for the linked table."""
    rows = []
    for r in records:
        first = r.outputs[0] if r.outputs else None
        rows.append(
            {
                "name": r.name,
                "op": r.op,
                "target": r.target,
                "shape": format_shape(first.shape) if first else "",
                "dtype": dtype_name(first.dtype) if first else "",
                "mean": None if first is None or first.mean is None else float(f"{first.mean:.4g}"),
                "nonfinite": r.nonfinite or "",
                "ms": round(r.time_s * 1e3, 3),
            }
        )
    return rows


def inspector_data(
    name: str,
    node: Any,
    record: NodeRecord | None,
    source: str = "",
    *,
    max_preview: int = _PREVIEW_VALUES,
    folded: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """Fields, a histogram and a capped preview of the node's value, and its error.

    ``folded``: the ``(name, shape)`` of parameters drawn inside the node (not as nodes of
    their own); listed as its parameter inputs when no record lists its inputs.
    """
    fields: list[tuple[str, str]] = []
    if node is not None:
        from fxviz._nodes import module_path, target_text

        fields += [
            ("op", node.op),
            ("target", target_text(node)),
            ("module", module_path(node) or "(top)"),
        ]
    if record is not None:
        for input_name, shape, dtype in zip(
            record.inputs, record.input_shapes, record.input_dtypes, strict=True
        ):
            kind = (
                f"{dtype_name(dtype)} {format_shape(shape)}"
                if shape is not None
                else "(not a tensor)"
            )
            fields.append((f"input {input_name}", kind))
        for s in record.outputs:
            fields.append(
                (f"output{s.path}", f"{dtype_name(s.dtype)} {format_shape(s.shape)} on {s.device}")
            )
            if s.mean is not None:
                fields.append(
                    (
                        "stats",
                        f"min {s.min:.4g} · max {s.max:.4g} · mean {s.mean:.4g} · std {_g(s.std)}",
                    )
                )
            if s.nan is not None:
                fields.append(("NaN/Inf/zeros", f"{s.nan} / {s.posinf + s.neginf} / {s.zeros}"))
        fields.append(("time", f"{record.time_s * 1e3:.3f} ms"))
        if record.mutates:
            fields.append(("writes in place", ", ".join(record.mutates)))
        if record.aliases:
            fields.append(("shares memory with", ", ".join(record.aliases)))
    else:
        fields += [(f"parameter {name}", shape or "?") for name, shape in folded]
        if node is not None:
            fields.append(("state", "not run yet"))
    if source:
        fields.append(("source", source))
    data: dict[str, Any] = {"name": name, "fields": [[k, v] for k, v in fields]}
    value = _first_tensor(record.value) if record is not None and record.kept else None
    if value is not None:
        data["histogram"] = _histogram(value)
        data["preview"] = _preview(value, max_preview)
    if record is not None and record.error is not None:
        data["error"] = f"{type(record.error).__name__}: {record.error}"
    return data


def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return next((v for v in value if isinstance(v, torch.Tensor)), None)
    return None


def _histogram(t: torch.Tensor) -> dict[str, Any] | None:
    if t.is_meta or t.numel() == 0 or t.is_complex() or t.layout != torch.strided:
        return None
    x = t.detach().float().flatten()
    x = x[torch.isfinite(x)]
    if x.numel() == 0:
        return None
    low, high = float(x.min()), float(x.max())
    if low == high:
        high = low + 1.0
    counts = torch.histc(x, bins=_BINS, min=low, max=high)
    return {"counts": [int(c) for c in counts.tolist()], "low": low, "high": high}


def _preview(t: torch.Tensor, limit: int = _PREVIEW_VALUES) -> str:
    if t.is_meta:
        return ""
    flat = t.detach().flatten()[:limit]
    values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat.tolist())
    more = f", … ({t.numel() - flat.numel():,} more)" if t.numel() > flat.numel() else ""
    return f"[{values}{more}]"
