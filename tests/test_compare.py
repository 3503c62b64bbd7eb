"""fxviz.compare: two runs (live or loaded) aligned node by node, measured in float64."""

from __future__ import annotations

import json
import math
import operator
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import fxviz
from fxviz._compare import measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        x = x + att @ v
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Embeddings whose positions carry a large common offset (as trained models' often
    do): bf16 keeps the offset and loses the small differences LayerNorm brings back."""

    def __init__(self, vocab=64, d=32, seq=16, layers=2, offset=64.0) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        with torch.no_grad():
            self.pos.weight += offset
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.tok(ids) + self.pos.weight
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@pytest.fixture
def gpt():
    torch.manual_seed(0)
    return TinyGPT().eval(), torch.randint(0, 64, (2, 16))


def test_fp32_against_bf16_finds_the_first_divergent_node(gpt):
    model, ids = gpt
    cmp = fxviz.compare_dtype(model, ids, dtype=torch.bfloat16)
    first = cmp.first_divergence
    assert first.name == "blocks_0_ln1"
    assert first.sqnr_db < 30 < cmp["add"].sqnr_db  # the offset survives; the detail does not
    assert first.dtype_a == torch.float32
    assert first.dtype_b == torch.bfloat16
    assert cmp["ids"].sqnr_db == math.inf
    assert cmp["ids"].max_abs_error == 0
    assert "first at 'blocks_0_ln1'" in cmp.summary()
    # without the offset, bf16 stays above 30 dB everywhere
    torch.manual_seed(0)
    assert fxviz.compare_dtype(TinyGPT(offset=0.0).eval(), ids).first_divergence is None


def test_metrics_match_a_float64_reference():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000).astype(np.float32)
    b = (a + 0.01 * rng.standard_normal(1000)).astype(np.float32)
    m = measure(torch.from_numpy(a), torch.from_numpy(b).to(torch.bfloat16))
    x, y = a.astype(np.float64), torch.from_numpy(b).to(torch.bfloat16).double().numpy()
    err = x - y
    assert m.max_abs_error == pytest.approx(np.abs(err).max(), rel=1e-12)
    assert m.max_rel_error == pytest.approx((np.abs(err) / np.abs(x)).max(), rel=1e-12)
    assert m.sqnr_db == pytest.approx(10 * np.log10((x @ x) / (err @ err)), rel=1e-12)
    assert m.cosine == pytest.approx((x @ y) / np.sqrt((x @ x) * (y @ y)), rel=1e-12)
    assert m.rmse == pytest.approx(np.sqrt((err @ err) / err.size), rel=1e-12)
    assert m.rel_l2 == pytest.approx(np.linalg.norm(err) / np.linalg.norm(x), rel=1e-12)
    assert not m.allclose
    assert measure(torch.from_numpy(a), torch.from_numpy(a)).allclose


def test_nan_on_one_side_only_diverges():
    a = torch.tensor([1.0, 2.0, float("nan"), float("inf"), 5.0])
    b = torch.tensor([1.0, float("nan"), float("nan"), float("inf"), float("-inf")])
    m = measure(a, b)
    assert (m.nonfinite_a, m.nonfinite_b, m.one_sided) == (2, 4, 2)
    assert m.sqnr_db == math.inf  # where both are finite they agree

    def f(x):
        return torch.log(x) + 1

    cmp = fxviz.compare(
        fxviz.record(f, torch.tensor([1.0, 2.0])), fxviz.record(f, torch.tensor([1.0, -2.0]))
    )
    assert cmp.first_divergence.name == "x"  # the inputs already differ
    assert cmp["log"].diverged
    assert "NaN/Inf on one side only" in cmp["log"].reason


def test_same_run_agrees_and_other_inputs_diverge_at_the_input(gpt):
    model, ids = gpt
    a, b = fxviz.record(model, ids), fxviz.record(model, ids)
    same = fxviz.compare(a, b)
    assert same.first_divergence is None
    assert all(p.sqnr_db == math.inf for p in same.pairs if p.metrics is not None)
    assert "agree everywhere" in same.summary()
    other = fxviz.compare(a, fxviz.record(model, (ids + 1) % 64))
    assert other.first_divergence.name == "ids"


def test_shape_mismatch_and_the_allclose_and_cosine_metrics():
    def f(x):
        return torch.relu(x).sum(0)

    a = fxviz.record(f, torch.ones(3, 4))
    b = fxviz.record(f, torch.ones(2, 4))
    cmp = fxviz.compare(a, b)
    assert cmp.first_divergence.name == "x"
    assert cmp.first_divergence.reason == "shape 3×4 vs 2×4"
    x = torch.randn(50, 50)
    near = fxviz.record(f, x + 1e-4)
    exact = fxviz.compare(fxviz.record(f, x), near, metric="allclose", rtol=0, atol=1e-6)
    loose = fxviz.compare(fxviz.record(f, x), near, metric="allclose", rtol=0, atol=1e-2)
    assert exact.first_divergence.name == "x"
    assert loose.first_divergence is None
    assert fxviz.compare(fxviz.record(f, x), near, metric="cosine").first_divergence is None
    with pytest.raises(fxviz.InputError, match="unknown metric"):
        fxviz.compare(a, b, metric="psnr")
    with pytest.raises(fxviz.InputError, match="two recordings"):
        fxviz.compare(a, torch.nn.Linear(2, 2))


def test_before_and_after_a_pass_aligns_by_provenance():
    def f(x):
        return torch.relu(x) * 2 + 1

    class SigmoidForRelu(torch.fx.Transformer):
        def call_function(self, target, args, kwargs):
            target = torch.sigmoid if target is torch.relu else target
            return super().call_function(target, args, kwargs)

    x = torch.randn(16)
    cmp = fxviz.compare_pass(f, SigmoidForRelu, x)
    assert [p.b for p in cmp.pairs] == ["x", "sigmoid", "mul", "add", "output"]
    assert cmp["sigmoid"].a == "relu"  # the Transformer's run says what made what
    assert cmp["sigmoid"].status == "replaced"
    assert cmp.first_divergence.name == "sigmoid"
    assert cmp["x"].sqnr_db == math.inf
    # a function pass: no provenance, so the erased node is paired with its replacement
    # by graph structure (same inputs and users)
    by_name = fxviz.compare_pass(f, lambda gm: SigmoidForRelu(gm).transform(), x)
    assert [(p.a, p.b, p.status) for p in by_name.pairs][1] == ("relu", "sigmoid", "replaced")
    assert by_name.first_divergence.name == "sigmoid"

    def in_place(gm):  # changes its copy, returns nothing
        for node in gm.graph.nodes:
            if node.target is operator.add:
                node.args = (node.args[0], 2)
        gm.recompile()

    shifted = fxviz.compare_pass(f, in_place, x)
    assert shifted.first_divergence.name == "add"
    assert shifted["mul"].sqnr_db == math.inf


def test_loaded_recordings_compare_like_live_ones(gpt, tmp_path):
    model, ids = gpt
    live = fxviz.compare_dtype(model, ids)
    a = fxviz.load(live.a.save(tmp_path / "fp32.fxrec"))
    b = fxviz.load(live.b.save(tmp_path / "bf16.fxrec"))
    loaded = fxviz.compare(a, b)
    assert loaded.table().equals(live.table())
    assert loaded.first_divergence.name == "blocks_0_ln1"


def test_drawing_table_show_and_report(gpt, tmp_path):
    model, ids = gpt
    cmp = fxviz.compare_dtype(model, ids)
    table = cmp.table()
    assert table.loc[table["b"] == "blocks_0_ln1", "diverged"].item()
    assert {"sqnr_db", "cosine", "max_abs_error", "max_rel_error", "rmse", "rel_l2"} <= set(
        table.columns
    )
    dot = cmp.to_dot().source
    assert "◆ first divergence: SQNR" in dot
    assert dot.count("◆ first divergence") == 1
    view = fxviz.show(cmp)
    row = next(r for r in view.rows if r["name"] == "blocks_0_ln1")
    assert row["dtypes"] == "float32 / bfloat16"
    assert row["verdict"].startswith("diverges: SQNR")
    view.selected = "blocks_0_ln1"
    fields = dict(view.inspector["fields"])
    assert fields["dtypes"] == "float32 (a) vs bfloat16 (b)"
    assert fields["a output"] == "float32 2×16×32 on cpu"
    assert fields["b output"] == "bfloat16 2×16×32 on cpu"
    assert fields["a value"].startswith("[")
    assert fields["b value"].startswith("[")
    page = fxviz.report(cmp, title="fp32 vs bf16")
    assert "Where the runs part" in page
    assert "first at &#x27;blocks_0_ln1&#x27;" in page
    assert "<script>fxvizReport" in page
    data = page.split('id="fxviz-data">')[1].split("</script>")[0]

    def not_json(constant):
        raise ValueError(f"{constant} is not JSON: browsers refuse it")

    rows = json.loads(data, parse_constant=not_json)["rows"]
    assert rows[0]["SQNR dB"] == "inf"  # equal inputs


def _fxviz(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "fxviz", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_cli_compare_and_report_from_saved_files(gpt, tmp_path):
    model, ids = gpt
    cmp = fxviz.compare_dtype(model, ids)
    cmp.a.save(tmp_path / "fp32.fxrec")
    cmp.b.save(tmp_path / "bf16.fxrec")
    done = _fxviz("compare", "fp32.fxrec", "bf16.fxrec", "-o", "cmp.html", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # they diverge
    assert "first at 'blocks_0_ln1'" in done.stdout
    assert "Where the runs part" in (tmp_path / "cmp.html").read_text()
    same = _fxviz("compare", "fp32.fxrec", "fp32.fxrec", "-o", "same.html", cwd=tmp_path)
    assert same.returncode == 0
    assert "agree everywhere" in same.stdout
    loose = _fxviz("compare", "fp32.fxrec", "bf16.fxrec", "--sqnr-db", "10", cwd=tmp_path)
    assert loose.returncode == 0
    (tmp_path / "junk.fxrec").write_bytes(b"\x80\x04junk")
    bad = _fxviz("compare", "fp32.fxrec", "junk.fxrec", "-o", "bad.html", cwd=tmp_path)
    assert bad.returncode == 2
    assert "never unpickles" in bad.stderr
    rep = _fxviz("report", "bf16.fxrec", "-o", "run.html", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert '"replay":{' in (tmp_path / "run.html").read_text()


class _Breaks(nn.Module):
    """A graph break (``.item()``) between two linear layers: a capture with Python."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x).relu()
        scale = h.sum().item() + 1.0
        return self.b(h) / scale


@pytest.mark.parametrize("method", ["dynamo", "real"])
def test_compare_pass_of_a_capture_with_a_pass_that_changes_nothing_finds_nothing_changed(method):
    """The copy a pass gets is a whole capture: its Python between graphs (and the Python
    that hands the output back) is the same node as before, not a "changed" one."""
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    capture = fxviz.trace(_Breaks(), x, method=method)
    table = fxviz.compare_pass(capture, lambda gm: None, x).table()
    assert set(table.status) == {"same"}, table.loc[table.status != "same", ["a", "status"]]
    assert "python_return" in set(table.a)
