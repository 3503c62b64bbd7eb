"""compare_dtype converts the model, not its captured graph, and takes inputs as the model
does (issue 23): real Hugging Face models, keyword inputs, dtypes baked into captures."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from tests import hf_models


class RMSNorm(nn.Module):
    """As Llama's: normalise in float32, return in the input's dtype."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(dtype)


class Block(nn.Module):
    """Symbolic tracing fails (``if`` on a tensor), so capture bakes ``h.to(dtype)`` in as
    ``.to(float32)``: converting the captured graph mixed dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.norm = RMSNorm(16)

    def forward(self, x, *, scale: float = 1.0):
        h = self.lin(x)
        if h.abs().sum() > 0:
            h = h * scale
        return self.norm(h)


@pytest.mark.slow
def test_a_model_whose_capture_bakes_float32_in():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(4, 16)
    cmp = fxviz.compare_dtype(model, x, dtype=torch.bfloat16)  # NodeError before
    assert cmp.a.method != "symbolic"
    assert cmp.b.method == cmp.a.method
    assert cmp.what == "Block in float32 vs a copy converted to bfloat16"
    assert cmp.what in cmp.summary()
    lin = next(p for p in cmp.pairs if p.target.endswith("linear"))
    assert (lin.dtype_a, lin.dtype_b) == (torch.float32, torch.bfloat16)
    assert cmp.b.output.dtype == torch.bfloat16
    assert cmp.a.output.dtype == torch.float32
    assert model.lin.weight.dtype == torch.float32  # the model itself is not converted
    assert not cmp.unmeasured
    assert cmp.first_divergence is None  # bf16 is within 30 dB of fp32 here


def test_keyword_inputs_reach_the_model():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(4, 16)
    cmp = fxviz.compare_dtype(model, x=x, scale=3.0, metric="cosine", min_cosine=0.99)
    # before: x and scale were taken as compare options and the model ran without inputs
    expected = model(x, scale=3.0)
    torch.testing.assert_close(cmp.a.output, expected)
    torch.testing.assert_close(cmp.b.output.float(), expected, rtol=0.05, atol=0.05)
    assert cmp.criterion() == "cosine < 0.99"


@pytest.mark.slow
def test_tiny_llama_with_keyword_inputs_in_bfloat16():
    model, (ids,) = hf_models.build("llama")
    cmp = fxviz.compare_dtype(model, input_ids=ids, dtype=torch.bfloat16)
    assert cmp.what == "LlamaForCausalLM in float32 vs a copy converted to bfloat16"
    bf16 = [p for p in cmp.pairs if p.dtype_b == torch.bfloat16]
    assert len(bf16) > 20
    assert all(p.dtype_a == torch.float32 for p in bf16)
    assert all(p.measured for p in cmp.pairs if p.a and p.b)
    assert model.lm_head.weight.dtype == torch.float32
    reference = model(input_ids=ids).logits
    logits = next(p for p in reversed(cmp.pairs) if p.shape_b == tuple(reference.shape))
    assert 20 < logits.sqnr_db < 80  # measured, and bf16 is not bit-exact


def test_a_capture_is_refused_with_what_to_do_instead():
    model, x = Block().eval(), torch.randn(2, 16)
    captured = fxviz.trace(RMSNorm(16), x, method="export")
    with pytest.raises(fxviz.InputError, match=r"Pass the nn\.Module"):
        fxviz.compare_dtype(captured, x)
    with pytest.raises(fxviz.InputError, match=r"floating-point torch\.dtype"):
        fxviz.compare_dtype(model, x, dtype=torch.int8)


def test_autocast_takes_keyword_inputs_too():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    cmp = fxviz.compare_dtype(model, input=torch.randn(2, 8), autocast=True)
    assert cmp.what == "Sequential as it is vs under torch.autocast('cpu', bfloat16)"
    assert cmp["_0"].dtype_b == torch.bfloat16
