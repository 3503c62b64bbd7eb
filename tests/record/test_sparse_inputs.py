"""Sparse tensors (COO, CSR) as inputs: every verb runs on them, their statistics count
the implicit zeros, and nothing fails on a tensor that has no strides or data pointer."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fxviz
from fxviz._record._moments import _statistics
from fxviz._record._summary import summarize
from fxviz.errors import TraceError

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")


class SparseMix(torch.nn.Module):
    """A sparse matrix times a dense one, then a dense layer."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.sparse.mm(s, y)).relu()


def _sparse(layout: str, values=(1.0, -2.0)) -> torch.Tensor:
    coo = torch.sparse_coo_tensor([[0, 1], [1, 0]], list(values), (2, 2))
    return coo if layout == "coo" else coo.to_sparse_csr()


@pytest.fixture(params=["coo", "csr"])
def case(request):
    torch.manual_seed(0)
    return SparseMix().eval(), _sparse(request.param), torch.randn(2, 3)


def test_record_table_and_statistics_of_a_sparse_input(case):
    model, s, y = case
    rec = fxviz.record(model, s, y)
    assert torch.equal(rec.output, model(s, y))
    (summary,) = rec["s"].outputs
    assert summary.stride is None  # no strides to show
    # the two stored values and the two implicit zeros: [[0, 1], [-2, 0]]
    assert (summary.min, summary.max, summary.zeros) == (-2.0, 1.0, 2)
    assert summary.mean == pytest.approx(-0.25)
    assert summary.std == pytest.approx(float(s.to_dense().std()))
    row = rec.table().loc["s"]
    assert row["min"] == -2.0
    assert row["zeros"] == 2
    assert fxviz.record(model, s, y).method == rec.method  # the cached capture again


def test_the_other_verbs_on_a_sparse_input(case, tmp_path):
    model, s, y = case
    gm = fxviz.trace(model, s, y)
    dbg = fxviz.Debugger(gm, s, y)
    dbg.step(3)
    dbg.back(1)
    assert dbg.current.name == "relu"  # stepped back to before it ran
    assert fxviz.shapes(gm, s, y, mode="fake")["_sparse_mm"].shape == (2, 3)
    assert fxviz.shapes(gm, s, y, mode="real")["relu"].shape == (2, 3)
    rec = fxviz.record(model, s, y)
    assert '"s"' in fxviz.to_dot(rec).source or "s [" in fxviz.to_dot(rec).source
    page = tmp_path / "run.html"
    fxviz.report(rec, page)
    html = page.read_text()
    # the inspector's preview of a sparse value: what it stores
    assert (
        f"(the 2 values stored, sparse_{'coo' if s.layout == torch.sparse_coo else 'csr'})" in html
    )


def test_comparisons_measure_sparse_pairs(case):
    model, s, y = case
    a, b = fxviz.record(model, s, y), fxviz.record(model, s, y)
    same = fxviz.compare(a, b)
    assert same["s"].measured_on == "values"
    assert not same.unmeasured
    assert same.agree
    other = fxviz.compare(a, fxviz.record(model, s * 3, y))
    assert other.first_divergence.name == "s"
    assert not other.agree
    assert fxviz.compare_dtype(model, s, y, dtype=torch.float64)["s"].measured_on == "values"


def test_a_saved_recording_compares_the_sparse_value_by_its_statistics(case, tmp_path):
    model, s, y = case
    rec = fxviz.record(model, s, y)
    path = tmp_path / "run.fxrec"
    fxviz.save(rec, path)
    loaded = fxviz.load(path)
    assert loaded["s"].outputs == rec["s"].outputs
    cmp = fxviz.compare(rec, loaded)  # the file holds no sparse values: its statistics
    assert cmp["s"].measured_on == "statistics"
    assert cmp["y"].measured_on == "values"
    assert cmp.diverged() == []
    assert not cmp.unmeasured


def test_nonfinite_stored_values_are_found():
    model, y = SparseMix(), torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = fxviz.record(model, _sparse("coo", (1.0, math.inf)), y, stats=False)
    assert fxviz.has_nonfinite(rec["s"])  # read off the kept value: no statistics taken
    assert not fxviz.has_nonfinite(rec["y"])


def test_dynamo_refuses_a_sparse_input_by_name(case):
    model, s, y = case
    with pytest.raises(TraceError, match="Dynamo") as refused:
        fxviz.record(model, s, y, method="dynamo")
    # the capture's own state check compares the sparse input (it failed on ``equal``)
    assert "aten::equal" not in str(refused.value)


_LAYOUTS = st.sampled_from(["coo", "coo uncoalesced", "csr", "csc"])
_VALUES = st.one_of(
    st.floats(-1e6, 1e6, width=32), st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan])
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    cols=st.integers(1, 6),
    data=st.data(),
    layout=_LAYOUTS,
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int64]),
)
def test_sparse_statistics_are_those_of_the_dense_tensor(rows, cols, data, layout, dtype):
    """Generated sparse tensors: the statistics of their dense equivalent, implicit zeros
    counted (duplicate COO indices added up, as the dense tensor adds them)."""
    n = data.draw(st.integers(0, rows * cols + (3 if layout == "coo uncoalesced" else 0)))
    index = [
        data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n))
        for size in (rows, cols)
    ]
    unique = layout != "coo uncoalesced"
    if unique:  # one value an index
        pairs = sorted(set(zip(*index, strict=True)))
        index = [[p[0] for p in pairs], [p[1] for p in pairs]]
    floats = dtype.is_floating_point
    values = data.draw(
        st.lists(_VALUES if floats else st.integers(-1000, 1000), min_size=len(index[0]),
                 max_size=len(index[0]))
    )  # fmt: skip
    t = torch.sparse_coo_tensor(index, values, (rows, cols), dtype=dtype)
    if layout == "csr":
        t = t.coalesce().to_sparse_csr()
    elif layout == "csc":
        t = t.coalesce().to_sparse_csc()
    (got,) = summarize(t)
    low, high, mean, std, absmax, nan, posinf, neginf, zeros = _statistics(t.to_dense())
    assert (got.min, got.max, got.absmax) == (low, high, absmax)
    assert (got.nan, got.posinf, got.neginf, got.zeros) == (nan, posinf, neginf, zeros)
    # the dense tensor's float32 sums round where these (float64) do not: to float32's
    # rounding of the largest value
    scale = (absmax or 1) * (1e-5 if dtype == torch.float32 else 1e-9)
    for found, expected in ((got.mean, mean), (got.std, std)):
        if expected is None or found is None:
            assert found is expected
        else:
            assert math.isclose(found, expected, rel_tol=1e-6, abs_tol=scale)


def test_sparse_gradients_are_recorded():
    """A sparse input that requires grad, and nn.Embedding(sparse=True): the gradients
    autograd makes are sparse (the backward pass failed on their data pointer)."""
    torch.manual_seed(0)
    model, y = SparseMix(), torch.randn(2, 3)
    s = _sparse("coo").coalesce().requires_grad_()
    rec = fxviz.record(model, s, y, backward=True)
    model(s, y).sum().backward()
    (grad,) = rec["s"].grads
    assert grad.value.layout == torch.sparse_coo
    assert torch.equal(grad.value.to_dense(), s.grad.to_dense())
    assert grad.summary.max == float(s.grad.to_dense().max())

    emb = torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True), torch.nn.Linear(4, 2))
    ids = torch.tensor([[1, 2, 1]])
    rec = fxviz.record(emb, ids, backward=True)
    weight = rec.gradients.parameters["0.weight"]
    emb(ids).sum().backward()
    assert torch.equal(weight.value.to_dense(), emb[0].weight.grad.to_dense())


class DataDependent(SparseMix):
    """Branches on a value: only one real run captures it."""

    def forward(self, s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.sparse.mm(s, y)
        return self.lin(h) if h.sum() > 0 else -h


def test_a_real_capture_takes_a_sparse_input_again():
    # COO: torch's make_fx reads the strides of a CSR value (it has none) as it traces
    torch.manual_seed(0)
    model, s, y = DataDependent(), _sparse("coo"), torch.randn(2, 3)
    rec = fxviz.record(model, s, y)  # auto: symbolic and export cannot, Dynamo refuses
    assert rec.method == "real"
    assert torch.equal(rec.output, model(s, y))
    again = fxviz.record(model, s, y)  # the inputs checked the same (no equal of sparse)
    assert torch.equal(again.output, rec.output)
    with pytest.raises(fxviz.InputError, match="not the one this capture was made with"):
        fxviz.record(fxviz.trace(model, s, y, method="real"), s * 2, y)


class Propagate(torch.nn.Module):
    """A graph layer: a huge sparse adjacency as a buffer."""

    def __init__(self, n: int, nan: bool = False) -> None:
        super().__init__()
        values = [1.0, math.nan if nan else 2.0]
        self.register_buffer("adj", torch.sparse_coo_tensor([[0, 1], [1, 0]], values, (n, n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(self.adj, x).relu()


def test_a_huge_sparse_buffer_is_never_made_dense():
    # 10**6 x 10**6: 4 TB dense; the capture's checks compare its indices and values
    model, x = Propagate(10**6), torch.randn(10**6, 2)
    rec = fxviz.record(model, x)
    assert torch.equal(rec.output, model(x))
    assert rec["adj"].outputs[0].zeros == 10**12 - 2


def test_a_sparse_buffer_holding_nan_is_not_seen_as_written():
    model, x = Propagate(4, nan=True), torch.randn(4, 2)
    assert fxviz.record(model, x, method="symbolic").method == "symbolic"
    assert fxviz.record(model, x).method == "symbolic"  # auto took it (not a fallback)


def test_sparse_pairs_are_compared_each_on_its_own_values():
    # dense copies of one pair are freed before the next: their addresses are reused
    torch.manual_seed(0)
    parts = [torch.randn(300, 300).relu().to_sparse() for _ in range(4)]
    changed = [parts[0], parts[1] * 3, parts[2], parts[3] + parts[3]]

    def four(a, b, c, d):
        return a + b + c + d

    cmp = fxviz.compare(fxviz.record(four, *parts), fxviz.record(four, *changed))
    assert [p.name for p in cmp.diverged()] == ["b", "d", "add", "add_1", "add_2", "output"]


def test_nested_inputs_strided_refused_by_name_jagged_recorded():
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    strided = torch.nested.nested_tensor([a, b], layout=torch.strided)
    with pytest.raises(fxviz.InputError, match=r"layout=torch\.jagged"):
        fxviz.record(torch.nn.ReLU(), strided)
    with pytest.raises(fxviz.InputError, match=r"layout=torch\.jagged"):
        fxviz.Debugger(torch.nn.ReLU(), strided)
    jagged = torch.nested.nested_tensor([a, b], layout=torch.jagged)
    rec = fxviz.record(torch.nn.ReLU(), jagged)
    assert torch.equal(rec.output.values(), jagged.values().relu())
    cmp = fxviz.compare(rec, fxviz.record(torch.nn.ReLU(), jagged))
    assert "jagged" in cmp.unmeasured[0].reason  # said, not called equal


def test_statistics_of_huge_sparse_values_do_not_overflow():
    t = torch.sparse_coo_tensor([[0, 1]], torch.tensor([1e200, 2e200], dtype=torch.float64), (3,))
    (got,) = summarize(t)  # [1e200, 2e200, 0]: std 1e200 (torch's std of it overflows)
    assert got.std == pytest.approx(1e200, rel=1e-12)
    assert (got.min, got.mean) == (0.0, pytest.approx(1e200))
    assert isinstance(got.min, float)
