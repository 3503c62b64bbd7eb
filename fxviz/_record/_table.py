"""A Recording as a table: one pandas row a node (``Recording.table()``), and as HTML."""

from __future__ import annotations

import html
import operator
from typing import TYPE_CHECKING, Any

from fxviz._providers import provider
from fxviz._record._grads import summary_norm
from fxviz._record._summary import dtype_name

if TYPE_CHECKING:
    import pandas as pd

    from fxviz._record._records import NodeRecord, Recording

__all__ = ["recording_html", "recording_table"]


def recording_table(recording: Recording) -> pd.DataFrame:
    """What :meth:`Recording.table` returns (its docstring lists the columns).

    Built a column at a time (one list each): pandas reads a dict of lists several times
    faster than a list of row dicts, with the same columns and dtypes.
    """
    import pandas as pd

    flops = provider("recording.flops")(recording)  # the shape pass's count (a higher layer)
    records = recording.records()
    firsts = [r.outputs[0] if r.outputs else None for r in records]
    dtypes = {d: dtype_name(d) for d in {f.dtype for f in firsts if f is not None}}
    names = [r.name for r in records]
    columns: dict[str, list[Any]] = {
        "index": [r.index for r in records],
        "op": [r.op for r in records],
        "target": [r.target for r in records],
        "module": [r.module for r in records],
        "inputs": [", ".join(r.inputs) for r in records],
        "shape": [None if f is None else f.shape for f in firsts],
        "dtype": [None if f is None else dtypes[f.dtype] for f in firsts],
        "outputs": [len(r.outputs) for r in records],
        "numel": [None if f is None else f.numel for f in firsts],
        "nbytes": [None if f is None else f.nbytes for f in firsts],
    }
    nothing = (None,) * len(_STATS)
    by_row = [nothing if f is None else _STAT_VALUES(f) for f in firsts]
    for stat, values in zip(
        _STATS, zip(*by_row, strict=True) if by_row else [()] * len(_STATS), strict=True
    ):
        columns[stat] = list(values)
    columns["time_s"] = [r.time_s for r in records]
    columns["flops"] = [flops.get(r.name) for r in records]
    columns["mutates"] = [", ".join(r.mutates) for r in records]
    columns["aliases"] = [", ".join(r.aliases) for r in records]
    columns["error"] = [
        "" if r.error is None else f"{type(r.error).__name__}: {r.error}" for r in records
    ]
    columns["kept"] = [r.kept for r in records]
    order = _VALUE_COLUMNS
    if recording.gradients is not None:
        grads = [_grad_columns(r) for r in records]
        for column in _GRAD_COLUMNS:
            columns[column] = [g[column] for g in grads]
        order = _VALUE_COLUMNS + _GRAD_COLUMNS
    # indexed by name from the start (set_index would copy every column); no rows:
    # empty object columns, as pandas makes them (empty lists would be float)
    index = pd.Index(names, name="name")
    return pd.DataFrame(columns if records else None, index=index, columns=order)


def recording_html(recording: Recording) -> str:
    """The notebook's HTML of a Recording: its summary line and table."""
    table = recording.table().drop(columns=["index"])
    body = table.to_html(max_rows=80, float_format=lambda v: f"{v:.4g}", escape=True)
    return f"<div><p><b>fxviz.Recording</b>: {html.escape(recording.summary())}</p>{body}</div>"


_STATS = ("min", "max", "mean", "std", "absmax", "nan", "posinf", "neginf", "zeros")
_COLUMNS = [
    *("index", "name", "op", "target", "module", "inputs"),
    *("shape", "dtype", "outputs", "numel", "nbytes"),
    *_STATS,
    *("time_s", "flops", "mutates", "aliases", "error", "kept"),
]
_VALUE_COLUMNS = [c for c in _COLUMNS if c != "name"]  # "name" is the index
_STAT_VALUES = operator.attrgetter(*_STATS)


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
