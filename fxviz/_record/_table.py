"""A Recording as a table: one pandas row a node (``Recording.table()``), and as HTML."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from fxviz._providers import provider
from fxviz._record._grads import summary_norm
from fxviz._record._summary import dtype_name

if TYPE_CHECKING:
    import pandas as pd

    from fxviz._record._records import NodeRecord, Recording

__all__ = ["recording_html", "recording_table"]


def recording_table(recording: Recording) -> pd.DataFrame:
    """What :meth:`Recording.table` returns (its docstring lists the columns)."""
    import pandas as pd

    flops = provider("recording.flops")(recording)  # the shape pass's count (a higher layer)
    rows = []
    for r in recording.records():
        first = r.outputs[0] if r.outputs else None
        row: dict[str, Any] = {
            "index": r.index,
            "name": r.name,
            "op": r.op,
            "target": r.target,
            "module": r.module,
            "inputs": ", ".join(r.inputs),
            "shape": first.shape if first else None,
            "dtype": dtype_name(first.dtype) if first else None,
            "outputs": len(r.outputs),
            "numel": first.numel if first else None,
            "nbytes": first.nbytes if first else None,
        }
        for stat in ("min", "max", "mean", "std", "absmax", "nan", "posinf", "neginf", "zeros"):
            row[stat] = getattr(first, stat) if first else None
        row.update(
            time_s=r.time_s,
            flops=flops.get(r.name),
            mutates=", ".join(r.mutates),
            aliases=", ".join(r.aliases),
            error="" if r.error is None else f"{type(r.error).__name__}: {r.error}",
            kept=r.kept,
        )
        if recording.gradients is not None:
            row.update(_grad_columns(r))
        rows.append(row)
    columns = _COLUMNS + (_GRAD_COLUMNS if recording.gradients is not None else [])
    return pd.DataFrame(rows, columns=columns).set_index("name")


def recording_html(recording: Recording) -> str:
    """The notebook's HTML of a Recording: its summary line and table."""
    table = recording.table().drop(columns=["index"])
    body = table.to_html(max_rows=80, float_format=lambda v: f"{v:.4g}", escape=True)
    return f"<div><p><b>fxviz.Recording</b>: {html.escape(recording.summary())}</p>{body}</div>"


_COLUMNS = [
    *("index", "name", "op", "target", "module", "inputs"),
    *("shape", "dtype", "outputs", "numel", "nbytes"),
    *("min", "max", "mean", "std", "absmax", "nan", "posinf", "neginf", "zeros"),
    *("time_s", "flops", "mutates", "aliases", "error", "kept"),
]


_GRAD_COLUMNS = [
    *("grad_order", "grad_time_s", "grad_norm", "grad_absmax", "grad_mean", "grad_std"),
    *("grad_nan", "grad_inf", "grad_ratio"),
]


def _grad_columns(r: NodeRecord) -> dict[str, Any]:
    grads = r.grads
    if not grads:
        return dict.fromkeys(_GRAD_COLUMNS)
    g = grads[0].summary
    norm = summary_norm(g)
    out_norm = summary_norm(r.outputs[0]) if r.outputs else None
    return {
        "grad_order": grads[0].order,
        "grad_time_s": grads[0].time_s,
        "grad_norm": norm,
        "grad_absmax": g.absmax,
        "grad_mean": g.mean,
        "grad_std": g.std,
        "grad_nan": g.nan,
        "grad_inf": None if g.posinf is None else g.posinf + (g.neginf or 0),
        "grad_ratio": norm / out_norm if norm is not None and out_norm else None,
    }
