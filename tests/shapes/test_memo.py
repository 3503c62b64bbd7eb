"""A meta pass that runs each distinct call once gives every node the metadata a pass
running every call gives, and runs what it cannot know the effects of every time."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import fxviz
from fxviz._capture import bind_inputs
from fxviz._shapes._memo import MetaMemo
from fxviz._shapes._propagate import propagate
from tests.conformance.zoo import build
from tests.test_generated_graphs import FAST, graphs

SEEN: list[Any] = []


def log_shape(x: torch.Tensor) -> torch.Tensor:
    """A user's function the graph calls (its effects are its own)."""
    SEEN.append(tuple(x.shape))
    return x * 1


torch.fx.wrap("log_shape")


def default_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A user's function that changes torch's default dtype (global state)."""
    torch.set_default_dtype(dtype)
    return x


torch.fx.wrap("default_dtype")


class _Block(nn.Module):
    """Modules, torch functions, operators and tensor methods, some views, in-place ops
    on intermediates and a module that writes in place."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.n = nn.Linear(6, 6), nn.LayerNorm(6)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.act(self.a(x)) * 2
        h = h.transpose(0, 1).contiguous().transpose(0, 1)
        h.add_(1)
        h = h.unsqueeze(0)
        h.squeeze_(0)  # changes its own shape: run every time
        pieces = torch.chunk(h, 2, dim=-1)  # the second piece starts at an offset
        return self.n(torch.cat([pieces[1], pieces[0]], -1) + x)


def _metadata(gm: torch.fx.GraphModule, inputs: tuple[Any, ...], memo: Any) -> dict:
    """Each node's tensor metadata, aliases, writes and FLOPs, and the report's totals."""
    report = propagate(gm, inputs, "meta", progress=False, memo=memo)
    nodes = {
        n.name: (
            n.meta.get("tensor_meta"),
            report[n.name].aliases,
            report[n.name].mutates,
            report.flops.get(n.name),
        )
        for n in gm.graph.nodes
    }
    return {"nodes": nodes, "totals": report.totals()}


def _same_metadata(gm: torch.fx.GraphModule, inputs: tuple[Any, ...]) -> int:
    """Asserts both passes agree on every node; how many calls the memo answered."""
    plain = _metadata(gm, inputs, memo=False)
    memo = MetaMemo()
    assert _metadata(gm, inputs, memo) == plain
    assert sum(m is not None for m, *_ in plain["nodes"].values()) > 0
    return memo.hits


def test_repeated_blocks_are_answered_and_agree_with_running_every_call():
    gm = fxviz.trace(nn.Sequential(*[_Block() for _ in range(4)]))
    # 6 calls a block can be answered (a, mul, contiguous, cat, add, n: not the three in
    # place, nor the views): the last two blocks repeat the second's, which repeats the
    # first's but for the two that read the input (it needs no grad; the blocks' do)
    assert _same_metadata(gm, (torch.randn(3, 6),)) == 2 * 6 + 4


class _Logged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.b.register_forward_hook(lambda m, i, o: SEEN.append("hook"))

    def forward(self, x):
        return self.b(log_shape(self.a(x))) + self.b(log_shape(self.a(x)))


def test_a_users_function_and_a_hooked_module_run_every_time():
    gm = fxviz.trace(_Logged())
    SEEN.clear()
    memo = MetaMemo()
    propagate(gm, (torch.randn(2, 4),), "meta", progress=False, flops=False, memo=memo)
    assert SEEN == [(2, 4), "hook", (2, 4), "hook"]
    assert memo.hits == 1  # the second self.a(x)


@pytest.mark.parametrize("name", ["gpt2", "bert", "unet2d"])
def test_a_zoo_models_capture_agrees_with_running_every_call(name):
    model, args, kwargs = build(name)
    with torch.no_grad():
        gm = fxviz.record(model, *args, progress=False, **kwargs).graph_module
    assert _same_metadata(gm, bind_inputs(gm, args, kwargs)) > 0  # its layers repeat


@FAST
@given(graphs())
def test_generated_graphs_agree_with_running_every_call(case):
    gm, inputs = case
    try:
        plain = _metadata(gm, tuple(inputs), memo=False)
    except fxviz.FxvizError:
        return  # a graph the meta device cannot run (its values steer it): not memoized
    assert _metadata(gm, tuple(inputs), memo=True) == plain


class _Conj(nn.Module):
    def forward(self, x):  # the second resolve_conj gives x itself (no conj bit to resolve)
        return x.conj().resolve_conj(), x.resolve_conj()


class _Leaves(nn.Module):
    def forward(self, x):  # a leaf that requires grad refuses an in-place op
        a = torch.zeros(x.size(0), requires_grad=True)
        b = torch.zeros(x.size(0), requires_grad=True)
        return x + a + b.add_(1)


class _DefaultDtype(nn.Module):
    def forward(self, i):
        a = i * 1.5  # float32 under the default dtype, float64 once it changed
        b = default_dtype(i, torch.float64) * 1.5
        return a, default_dtype(b, torch.float32)


class _Renormed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(10, 4))

    def forward(self, i):  # max_norm renormalises w in place, its result a new tensor
        return F.embedding(i, self.w, max_norm=1.0) + F.embedding(i, self.w, max_norm=1.0)


def _outcome(gm: torch.fx.GraphModule, inputs: tuple[Any, ...], memo: bool) -> Any:
    try:
        return _metadata(gm, inputs, memo)
    except fxviz.ShapeError as error:
        return type(error), str(error).splitlines()[0]


@pytest.mark.parametrize(
    ("model", "x"),
    [
        (_Conj(), torch.randn(3, dtype=torch.cfloat)),
        (_Leaves(), torch.randn(3)),
        (_DefaultDtype(), torch.arange(3)),
        (_Renormed(), torch.tensor([1, 2])),
    ],
    ids=["conj bit", "leaf", "default dtype", "writes an argument"],
)
@pytest.mark.filterwarnings("ignore::fxviz.FxvizWarning")  # embedding's unforeseen write
def test_what_metadata_does_not_show_is_not_answered(model, x):
    """Found by review: a conj bit, a leaf, the default dtype and a function that writes
    its argument (named without ``_``) change what a call gives or does."""
    gm = torch.fx.symbolic_trace(model)
    try:
        assert _outcome(gm, (x,), memo=True) == _outcome(gm, (x,), memo=False)
    finally:
        torch.set_default_dtype(torch.float32)


def test_a_callers_flop_counter_sees_every_call():
    model, x = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)]), torch.randn(4, 8)
    with FlopCounterMode(display=False) as counter:
        report = fxviz.shapes(model, x, mode="meta")
    assert counter.get_total_flops() == report.totals()["flops"] == 3 * 2 * 4 * 8 * 8


class _Matmuls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):  # a tensor method that counts FLOPs, called twice alike
        return x.matmul(self.w).matmul(self.w.t())


def test_a_repeated_methods_flops_are_counted_again():
    gm = torch.fx.symbolic_trace(nn.Sequential(_Matmuls(), _Matmuls()))
    x = torch.randn(2, 4)
    assert _same_metadata(gm, (x,)) > 0
    report = propagate(gm, (x,), "meta", progress=False, memo=True)
    assert report.totals()["flops"] == 4 * 2 * 2 * 4 * 4
