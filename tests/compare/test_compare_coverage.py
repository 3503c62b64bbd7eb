"""A comparison is honest about coverage: each pair measured or said why not, and runs
never said to agree on what was not measured (issue 22)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

import fxviz
from fxviz._compare import measure
from fxviz._compare._view import inspector

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spectrum(x):
    return torch.fft.fft(x) * 2


def test_complex_values_are_measured_as_real_imaginary_pairs():
    torch.manual_seed(0)
    x = torch.randn(8, dtype=torch.complex64)
    cmp = fxviz.compare(fxviz.record(spectrum, x), fxviz.record(spectrum, x * 1.5))
    # before: "0 of 4 pairs compared ... the runs agree everywhere"
    assert all(p.measured_on == "values" for p in cmp.pairs)
    assert cmp.first_divergence.name == "x"
    assert "real/imaginary" in cmp["fft_fft"].reason
    assert not cmp.agree
    same = fxviz.compare(fxviz.record(spectrum, x), fxviz.record(spectrum, x.clone()))
    assert same.agree
    assert same["mul"].sqnr_db == math.inf
    a, b = torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64)
    as_pairs = measure(torch.view_as_real(a), torch.view_as_real(b))
    assert measure(a, b).sqnr_db == pytest.approx(as_pairs.sqnr_db, rel=1e-12)
    # a real value against a complex one: its imaginary part is zero
    assert measure(a.real, a).max_abs_error == pytest.approx(float(a.imag.abs().max()))


def relu_plus_one(x):
    return torch.relu(x) + 1


def test_statistics_only_recordings_compare_their_statistics_and_say_so():
    torch.manual_seed(0)
    x = torch.randn(64)
    a = fxviz.record(relu_plus_one, x, keep="stats")
    other = fxviz.compare(a, fxviz.record(relu_plus_one, x * 10, keep="stats"))
    # before: the recordings of different inputs "agree everywhere"
    assert other.first_divergence.name == "x"
    assert other["x"].measured_on == "statistics"
    assert other["x"].reason.startswith("statistics only: SQNR")
    assert "on statistics only" in other.summary()
    fields = dict(inspector(other, "x")["fields"])  # what the widget and report show
    assert fields["compared"] == "statistics only (values not kept)"
    assert fields["verdict"].startswith("diverges: statistics only: SQNR")
    same = fxviz.compare(a, fxviz.record(relu_plus_one, x.clone(), keep="stats"))
    assert same.first_divergence is None
    assert not same.agree  # statistics agree; values were never compared
    assert "agree everywhere" not in same.summary()
    assert "the runs agree on the 4 pairs compared" in same.summary()


def test_what_was_not_measured_is_counted_and_never_said_to_agree():
    x = torch.randn(16)
    a = fxviz.record(relu_plus_one, x, keep="stats", stats=False)
    b = fxviz.record(relu_plus_one, x * 3, keep="stats", stats=False)
    cmp = fxviz.compare(a, b)
    tensors = [p for p in cmp.pairs if p.op != "output"]
    assert tensors
    assert all(not p.measured for p in tensors)
    assert cmp["relu"].reason == "not measured: values not kept and no statistics"
    assert cmp.unmeasured
    assert not cmp.agree
    summary = cmp.summary()
    assert "the runs agree" not in summary
    assert "nothing was measured" in summary


def total(x):
    return x.sum() * 2


def test_zero_dim_and_empty_tensors_are_measured():
    x = torch.randn(5)
    same = fxviz.compare(
        fxviz.record(total, x), fxviz.record(total, x.clone())
    )  # IndexError before
    assert same.agree
    assert same["sum_1"].shape_a == ()
    assert same["sum_1"].sqnr_db == math.inf
    other = fxviz.compare(fxviz.record(total, x), fxviz.record(total, x + 1))
    assert other["sum_1"].diverged
    assert measure(torch.tensor(2.0), torch.tensor(3.0)).max_abs_error == 1.0
    empty = fxviz.compare(
        fxviz.record(relu_plus_one, torch.ones(0, 3)), fxviz.record(relu_plus_one, torch.ones(0, 3))
    )
    assert empty.agree
    assert all(p.measured for p in empty.pairs)


def test_plain_python_values_compare_for_equality():
    def width(x):
        return x.reshape(x.shape[0], -1) * x.shape[1]

    cmp = fxviz.compare(
        fxviz.record(width, torch.ones(2, 3)), fxviz.record(width, torch.ones(2, 4))
    )
    getitem = next(p for p in cmp.pairs if p.target.endswith("getitem") and p.reason != "equal")
    assert getitem.diverged
    assert getitem.reason == "3 vs 4"
    assert getitem.measured_on == "values"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("sqnr_db", float("nan")),
        ("sqnr_db", float("inf")),
        ("sqnr_db", -3.0),
        ("rtol", -1e-5),
        ("atol", -1.0),
        ("atol", float("nan")),
        ("min_cosine", 1.5),
        ("min_cosine", True),
    ],
)
def test_thresholds_are_validated(option, value):
    rec = fxviz.record(relu_plus_one, torch.randn(4))
    with pytest.raises(fxviz.InputError, match=f"{option} must be a finite number"):
        fxviz.compare(rec, rec, **{option: value})
    with pytest.raises(fxviz.InputError, match=f"{option} must be a finite number"):
        fxviz.diff(relu_plus_one, relu_plus_one, torch.randn(4), **{option: value})


def _fxviz(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "fxviz", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_cli_validates_thresholds_and_measures_zero_dim_outputs(tmp_path):
    x = torch.randn(5)
    fxviz.record(total, x).save(tmp_path / "a.fxrec")
    fxviz.record(total, -x).save(tmp_path / "b.fxrec")
    fxviz.record(relu_plus_one, x, keep="stats", stats=False).save(tmp_path / "blind.fxrec")
    same = _fxviz("compare", "a.fxrec", "a.fxrec", "-o", "same.html", cwd=tmp_path)
    assert same.returncode == 0, same.stderr  # before: IndexError, exit 1 ("diverged")
    assert "agree everywhere" in same.stdout
    nan = _fxviz("compare", "a.fxrec", "b.fxrec", "--sqnr-db", "nan", cwd=tmp_path)
    assert nan.returncode == 2, nan.stdout  # before: exit 0, the diverging runs "agree"
    assert "sqnr_db must be a finite number >= 0, not nan" in nan.stderr
    negative = _fxviz("compare", "a.fxrec", "b.fxrec", "--metric", "allclose", "--atol", "-1", cwd=tmp_path)  # fmt: skip
    assert negative.returncode == 2
    assert "atol must be a finite number" in negative.stderr
    cosine = _fxviz("compare", "a.fxrec", "b.fxrec", "--metric", "cosine", "--min-cosine", "1.5", cwd=tmp_path)  # fmt: skip
    assert cosine.returncode == 2
    assert "min_cosine must be a finite number within [-1, 1], not 1.5" in cosine.stderr
    blind = _fxviz("compare", "blind.fxrec", "blind.fxrec", "-o", "blind.html", cwd=tmp_path)
    assert blind.returncode == 3, blind.stderr  # nothing diverged, but nothing was measured
    assert "not measured" in blind.stdout
