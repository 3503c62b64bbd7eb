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
