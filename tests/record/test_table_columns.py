"""``Recording.table()`` built a column at a time is the table built a row at a time (one
dict a node, as it was built before): the same index, columns, dtypes and values, on
generated graphs (NaN/Inf, errors, in-place writes, multi-output ops) and with gradients."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from torch import nn

import fxviz
from fxviz._providers import provider
from fxviz._record._summary import dtype_name
from fxviz._record._table import _COLUMNS, _GRAD_COLUMNS, _STATS, _grad_columns
from tests.test_generated_graphs import graphs


def _row_by_row(recording: fxviz.Recording) -> pd.DataFrame:
    """The table as fxviz built it before: a list of row dicts handed to pandas."""
    flops = provider("recording.flops")(recording)
    rows = []
    for r in recording.records():
        first = r.outputs[0] if r.outputs else None
        row = {
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
        for stat in _STATS:
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


def _check(recording: fxviz.Recording) -> None:
    pd.testing.assert_frame_equal(recording.table(), _row_by_row(recording))


def test_the_table_of_generated_graphs_is_the_row_by_row_one():
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check(fxviz.record(gm, *[i.clone() for i in inputs]))

    check()


def test_the_table_with_gradients_an_error_and_no_rows_is_the_row_by_row_one():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    _check(fxviz.record(model, torch.randn(5, 4), backward=True))

    def fails(x):
        return torch.mm(torch.log(x), x)  # mm of 1-d tensors raises: its record holds it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(fxviz.NodeError) as raised:
            fxviz.record(fails, torch.tensor([0.0, -1.0]))
    failed = raised.value.recording
    assert failed["mm"].error is not None
    assert failed["log"].outputs[0].neginf == 1
    _check(failed)
    _check(failed.__class__(failed.graph_module, []))  # no rows at all
