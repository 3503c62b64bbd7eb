"""FLOPs and multiply-adds per node match hand counts, in every mode, for models built on
meta too; per-module totals; the Recording column; the heat overlay."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
from tests import hf_models

B, T, D_IN, D_OUT = 4, 10, 64, 32


class Mixed(nn.Module):
    """A linear, a convolution, a batched matmul and attention: the ops that carry FLOPs."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(D_IN, D_OUT)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.block = nn.Sequential(nn.Linear(D_OUT, D_OUT), nn.ReLU())

    def forward(self, x, image, a, b, q, k, v):
        h = self.block(self.proj(x))
        c = self.conv(image)
        m = torch.matmul(a, b)
        att = F.scaled_dot_product_attention(q, k, v)
        return h, c, m, att


def _inputs(make):
    return (
        make(B, T, D_IN),
        make(2, 3, 16, 16),
        make(6, 5, 7),
        make(7, 3),
        make(2, 4, 12, 16),
        make(2, 4, 12, 16),
        make(2, 4, 12, 16),
    )


HAND = {  # 2 FLOPs per multiply-add
    "proj": 2 * B * T * D_IN * D_OUT,
    "block_0": 2 * B * T * D_OUT * D_OUT,
    "conv": 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3),
    "matmul": 2 * 6 * 5 * 7 * 3,
    "scaled_dot_product_attention": 2 * 2 * (2 * 4 * 12 * 12 * 16),  # QKᵀ and AV
}


def _close(count, hand):
    return abs(count - hand) <= 0.01 * hand


@pytest.mark.parametrize("mode", ["real", "fake", "meta"])
def test_flops_match_hand_counts_in_every_mode(mode):
    model = Mixed().eval()
    rep = fxviz.shapes(model, *_inputs(torch.randn), mode=mode, progress=False)
    table = rep.table()
    for name, hand in HAND.items():
        assert _close(table.loc[name, "flops"], hand), (name, table.loc[name, "flops"], hand)
        assert table.loc[name, "macs"] == table.loc[name, "flops"] // 2
    assert table.loc["block_1", "flops"] == 0  # elementwise ops count 0, as in torch
    summary = rep.totals()
    assert _close(summary["flops"], sum(HAND.values()))
    assert summary["macs"] == summary["flops"] // 2
    assert summary["flops_by_module"]["block"] == table.loc["block_0", "flops"]
    assert summary["flops_by_module"]["conv"] == table.loc["conv", "flops"]
    assert "kFLOPs" in rep.to_text()


def test_a_model_built_on_meta_has_its_flops_counted():
    with torch.device("meta"):
        model = Mixed()
    specs = _inputs(lambda *shape: fxviz.spec(*shape))
    for mode in ("meta", "fake"):
        rep = fxviz.shapes(model, *specs, mode=mode, progress=False)
        assert _close(rep.flops["proj"], HAND["proj"])
        assert _close(rep.totals()["flops"], sum(HAND.values()))


def test_recording_table_has_a_flops_column():
    model = Mixed().eval()
    rec = fxviz.record(model, *_inputs(torch.randn))
    table = rec.table()
    for name, hand in HAND.items():
        assert _close(table.loc[name, "flops"], hand)
    assert table.loc["block_1", "flops"] == 0


def test_export_graph_counts_match_real_mode():
    program, inputs = hf_models.exported("gpt2")
    real = fxviz.shapes(program, *inputs, progress=False)
    meta = fxviz.shapes(program, *inputs, mode="meta", progress=False)
    assert real.totals()["flops"] > 0
    assert real.flops == meta.flops
    by_module = meta.totals()["flops_by_module"]
    assert by_module["transformer.h.0"] == by_module["transformer.h.1"] > 0


def _statement(source: str, node_id: str) -> str:
    return next(s for s in source.splitlines() if s.lstrip("\t").startswith(f"{node_id} ["))


def test_flops_heat_colours_the_heaviest_node_and_boxes():
    model = Mixed().eval()
    rep = fxviz.shapes(model, *_inputs(torch.randn), mode="fake", progress=False)
    heaviest = max(rep.flops, key=rep.flops.get)
    source = fxviz.to_dot(rep, overlay=fxviz.overlays.flops_heat(rep)).source
    line = _statement(source, heaviest)
    assert "heat-flops-9" in line
    assert "kFLOPs" in line or "MFLOPs" in line
    relu = _statement(source, "block_1")
    assert "heat-flops" not in relu  # no FLOPs, no colour
    boxed = fxviz.to_dot(rep, depth=1, collapse=["block"], overlay=fxviz.overlays.flops_heat(rep))
    box = _statement(boxed.source, "module__block")
    assert "heat-flops" in box
    # the recording works as a source too
    rec = fxviz.record(model, *_inputs(torch.randn))
    assert "heat-flops-9" in fxviz.to_dot(rec, overlay=fxviz.overlays.flops_heat(rec)).source


# -- counted from the recording, without running anything again ---------------------------


class Computes(nn.Module):
    """Every op that carries FLOPs, on shapes a strategy draws."""

    def __init__(self, d: int, k: int, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(k, n)
        self.conv1 = nn.Conv1d(k, n, 3, padding=1, groups=1)
        self.conv2 = nn.Conv2d(2, 4, 3, stride=2)
        self.convt = nn.ConvTranspose2d(2, 3, 3)

    def forward(self, x, w, b3, image, vec, q, kv, mask):
        outs = [
            self.lin(x),
            F.linear(x, w),
            F.linear(x[0, 0], w),
            x @ w.t(),
            torch.matmul(x, vec),
            torch.matmul(vec, w.t()),
            vec @ vec,
            torch.mm(x[0], w.t()),
            torch.addmm(w[:, 0], x[0], w.t()),
            torch.bmm(x, b3),
            torch.baddbmm(x[:, :, :1], x, b3),
            x.matmul(b3),
            torch.einsum("btk,nk->btn", x, w),
            self.conv1(x.transpose(1, 2)),
            F.conv1d(x.transpose(1, 2), w.unsqueeze(-1)),
            self.conv2(image),
            self.convt(image),
            F.scaled_dot_product_attention(q, kv, kv),
            F.scaled_dot_product_attention(q, kv, kv, attn_mask=mask),
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True),
            x.relu() * 2,
        ]
        return outs


def _computes_inputs(b: int, t: int, k: int, n: int, heads: int):
    return (
        torch.randn(b, t, k),
        torch.randn(n, k),
        torch.randn(b, k, n),
        torch.randn(1, 2, 9, 7),
        torch.randn(k),
        torch.randn(b, heads, t, n),
        torch.randn(b, heads, t + 1, n),
        torch.zeros(t, t + 1, dtype=torch.bool).fill_(True),
    )


def _old_way(rec):
    """The fake re-run the table used before."""
    from fxviz._shapes._propagate import shapes

    inputs = [rec[n.name].value for n in rec.graph_module.graph.find_nodes(op="placeholder")]
    return shapes(rec.graph_module, *inputs, mode="fake", progress=False).flops


@pytest.mark.parametrize(
    ("b", "t", "k", "n", "heads"),
    [(1, 1, 1, 1, 1), (2, 3, 4, 5, 2), (3, 7, 6, 2, 1), (1, 5, 3, 8, 4)],
)
def test_flops_counted_from_the_recording_equal_the_fake_run(b, t, k, n, heads):
    from fxviz._shapes._analytic import analytic_flops

    rec = fxviz.record(Computes(0, k, n).eval(), *_computes_inputs(b, t, k, n, heads))
    counted = analytic_flops(rec)
    assert counted is not None
    old = _old_way(rec)
    assert counted == old
    assert counted["lin"] == 2 * b * t * k * n
    assert counted["bmm"] == 2 * b * t * k * n


def test_flops_of_generated_graphs_equal_the_fake_run():
    from hypothesis import HealthCheck, given, settings

    from fxviz._shapes._analytic import analytic_flops
    from tests.test_generated_graphs import graphs

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        rec = fxviz.record(gm, *[i.clone() for i in inputs])
        counted = analytic_flops(rec)
        if counted is not None:
            old = _old_way(rec)
            assert {k: v for k, v in counted.items() if k in old} == old

    check()


def test_flops_of_a_gpt_decoder_equal_torchs_counter_and_are_cached_on_the_graph():
    import sys
    from pathlib import Path

    from torch.utils.flop_counter import FlopCounterMode

    from fxviz._shapes._analytic import analytic_flops

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import models

    model, ids = models.gpt(quick=True)
    gm = torch.fx.symbolic_trace(model)
    rec = fxviz.record(gm, ids)
    counted = analytic_flops(rec)
    assert counted == _old_way(rec)
    with FlopCounterMode(display=False) as mode:
        gm(ids)
    assert sum(counted.values()) == mode.get_total_flops() > 0
    again = fxviz.record(gm, ids)
    assert analytic_flops(again) is counted  # once per graph and input signature
    assert rec.table()["flops"].sum() == mode.get_total_flops()
    other = fxviz.record(gm, ids[:1])
    assert sum(analytic_flops(other).values()) == sum(counted.values()) // 2


def test_a_users_leaf_module_is_counted_by_the_fake_run():
    class Leafy(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, nn.Sequential) or super().is_leaf_module(m, qualname)

    model = Mixed().eval()
    gm = torch.fx.GraphModule(model, Leafy().trace(model))
    from fxviz._shapes._analytic import analytic_flops

    rec = fxviz.record(gm, *_inputs(torch.randn))
    assert analytic_flops(rec) is None
    assert rec.table().loc["block", "flops"] == HAND["block_0"]
    cached = list(gm.graph._fxviz_flops.values())  # the fake pass's count, once a signature
    assert len(cached) == 1
    assert cached[0]["block"] == HAND["block_0"]
    again = fxviz.record(gm, *_inputs(torch.randn))
    assert again.table().loc["block", "flops"] == HAND["block_0"]
    assert len(gm.graph._fxviz_flops) == 1


def test_an_exported_graph_is_counted_from_its_recording():
    from fxviz._shapes._analytic import analytic_flops

    program, inputs = hf_models.exported("gpt2")
    gm = fxviz.trace(program)
    rec = fxviz.record(gm, *inputs)
    counted = analytic_flops(rec)
    assert counted is not None  # export's guard module counts 0, it needs no fake pass
    assert counted == _old_way(rec)
    assert sum(counted.values()) > 0
