"""What the inspector and the table show about a node: plain JSON-ready values."""

from __future__ import annotations

from typing import Any

import torch

from fxviz._nodes import module_path, target_text
from fxviz._record._records import NodeRecord
from fxviz._record._summary import dtype_name
from fxviz._shapes._report import format_shape
from fxviz._torch_compat import functorch_unwrapped, stored_values

__all__ = ["inspector_data", "table_rows"]

_PREVIEW_VALUES = 64
_BINS = 20


def table_rows(records: list[NodeRecord]) -> list[dict[str, Any]]:
    """One small dict a node for the linked table: a projection of ``record.to_dict()``
    (the records' one serialized form).

    >>> import torch, fxviz
    >>> rec = fxviz.record(lambda x: x.log(), torch.tensor([-1.0, 1.0]))
    >>> {k: v for k, v in table_rows(rec.records())[1].items() if k != "ms"}
    {'name': 'log', 'op': 'call_method', 'target': 'log', 'shape': '2', 'dtype': 'float32', 'mean': 0.0, 'nonfinite': 1}
    """
    rows = []
    for r in records:
        d = r.to_dict()
        first = d["outputs"][0] if d["outputs"] else None
        mean = None if first is None or first["mean"] is None else float(f"{first['mean']:.4g}")
        nonfinite = sum(
            (o["nan"] or 0) + (o["posinf"] or 0) + (o["neginf"] or 0) for o in d["outputs"]
        )
        rows.append(
            {
                "name": d["name"],
                "op": d["op"],
                "target": d["target"],
                "shape": format_shape(tuple(first["shape"])) if first else "",
                "dtype": first["dtype"] if first else "",
                "mean": mean,
                "nonfinite": nonfinite or "",
                "ms": round(d["time_s"] * 1e3, 3),
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
                if shape is not None and dtype is not None
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
                fields.append(
                    ("NaN/Inf/zeros", f"{s.nan} / {(s.posinf or 0) + (s.neginf or 0)} / {s.zeros}")
                )
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
    """The first tensor, as what it holds when a vmap'd wrapper (no storage to read)."""
    if isinstance(value, (tuple, list)):
        value = next((v for v in value if isinstance(v, torch.Tensor)), None)
    return functorch_unwrapped(value) if isinstance(value, torch.Tensor) else None


def _histogram(t: torch.Tensor) -> dict[str, Any] | None:
    """Counts of the finite values in ``_BINS`` equal bins from their min to their max.

    Computed in float64 and on halves (``x/2 - low/2``), so values near the float32 or
    float64 limits neither overflow the bin arithmetic nor vanish (``torch.histc`` in
    float32 leaves every bin empty for a range of ±3e38).
    """
    if t.is_meta or t.numel() == 0 or t.is_complex() or t.layout != torch.strided:
        return None
    x = t.detach().flatten().to(torch.float64)
    x = x[torch.isfinite(x)]
    if x.numel() == 0:
        return None
    low, high = float(x.min()), float(x.max())
    span = high / 2 - low / 2
    if span > 0:
        index = ((x / 2 - low / 2) / span * _BINS).floor().clamp_(0, _BINS - 1).long()
    else:  # one distinct value: all in the first bin
        index = torch.zeros(x.numel(), dtype=torch.long)
    counts = torch.bincount(index, minlength=_BINS)
    return {"counts": [int(c) for c in counts.tolist()], "low": low, "high": high}


def _preview(t: torch.Tensor, limit: int = _PREVIEW_VALUES) -> str:
    """The first ``limit`` values in logical order; of a sparse tensor, the first values it
    stores (it has no cheap logical order to read them in).

    >>> _preview(torch.sparse_coo_tensor([[0, 2]], [5.0, 6.0], (4,)))
    '[5, 6] (the 2 values stored, sparse_coo)'
    """
    if t.is_meta:
        return ""
    if t.layout == torch.strided:
        return _listed(t.detach().flatten(), limit)
    stored = stored_values(t.detach())
    if stored is None:
        return ""
    layout = str(t.layout).removeprefix("torch.")
    return f"{_listed(stored.flatten(), limit)} (the {stored.numel():,} values stored, {layout})"


def _listed(flat: torch.Tensor, limit: int) -> str:
    shown = flat[:limit]
    values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in shown.tolist())
    more = f", … ({flat.numel() - shown.numel():,} more)" if flat.numel() > shown.numel() else ""
    return f"[{values}{more}]"
