"""Statistics measured many tensors at once (reading a whole recording) are the very
numbers each tensor gets alone, bit for bit, at any number of threads."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from torch import nn

import fxviz
from fxviz._record._batched import GRAIN, batchable, batched_statistics
from fxviz._record._moments import _AMINMAX_MAX, _statistics
from fxviz.errors import FxvizWarning
from tests.test_generated_graphs import graphs


def _bits(value: object) -> object:
    """A number as compared here: floats by their bits (``-0.0`` is not ``0.0``), NaN equal
    to NaN."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else (value, math.copysign(1.0, value))
    return value


def _same(a: tuple | None, b: tuple) -> bool:
    return a is not None and [_bits(x) for x in a] == [_bits(y) for y in b]


def _check(tensors: list[torch.Tensor]) -> int:
    """Every batched result equals ``_statistics`` of that tensor alone; how many were
    batched."""
    found = batched_statistics(tensors)
    for t, stats in zip(tensors, found, strict=True):
        if stats is not None:
            assert _same(stats, _statistics(t)), (stats, _statistics(t))
    return sum(s is not None for s in found)


def _many(make, n: int = 6, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [make(generator) for _ in range(n)]


CASES = {
    "activations": lambda g: torch.randn(64, 256, generator=g),
    "relu zeros (counted)": lambda g: torch.randn(64, 64, generator=g).relu(),
    "few values, counted by count_nonzero": lambda g: torch.randn(100, generator=g).relu(),
    "positive": lambda g: torch.rand(500, generator=g) + 1,
    "signed zeros": lambda g: torch.tensor([0.0, -0.0, 1.0, -2.0]),
    "only -0.0": lambda g: torch.tensor([-0.0, -0.0]),
    "one value": lambda g: torch.randn(1, generator=g),
    "constant (std 0: measured around the mean)": lambda g: torch.ones(300),
    "mean far above std": lambda g: torch.randn(5000, generator=g) * 1e-3 + 1e4,
    "sums past float32 (float64 sums)": lambda g: torch.randn(5000, generator=g) * 1e36,
    "squares past float32 (float64 norm)": lambda g: torch.randn(64, 64, generator=g) * 1e17,
    "squares underflow": lambda g: torch.randn(100, generator=g) * 1e-30,
    "a whole grain": lambda g: torch.randn(GRAIN, generator=g),
    # past aminmax's size rows are not read again for the zero their min or max picks
    "signed zeros past aminmax's size, min 0": lambda g: _signed_zeros(20_000, 1.0, g),
    "signed zeros past aminmax's size, max 0": lambda g: _signed_zeros(20_000, -1.0, g),
    "signed zeros at aminmax's size": lambda g: _signed_zeros(_AMINMAX_MAX, 1.0, g),
    "signed zeros just past aminmax's size": lambda g: _signed_zeros(_AMINMAX_MAX + 1, -1.0, g),
    "zeros, tiny and normal values in one stack": lambda g: (
        torch.randn(64, generator=g) * [0.0, 1e-30, 1.0][int(torch.randint(3, (1,), generator=g))]
    ),
}


def _signed_zeros(n: int, sign: float, g: torch.Generator) -> torch.Tensor:
    """``n`` values of one sign, a third of them zeros, ``0.0`` and ``-0.0`` mixed."""
    x = (torch.rand(n, generator=g) + 0.5) * sign
    where = torch.randint(n, (n // 3,), generator=g)
    x[where] = torch.where(torch.rand(n // 3, generator=g) < 0.5, 0.0, -0.0)
    return x


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_each_case_equals_its_statistics_alone(name, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        tensors = _many(CASES[name])
        assert _check(tensors) == len(tensors)
    finally:
        torch.set_num_threads(before)


def test_sizes_and_magnitudes_mixed_in_one_call():
    """Sums taken in float32 and in float64 for rows of one stack, sizes interleaved."""
    tensors = []
    for i in range(40):
        scale = [1.0, 1e36, 1e17, 1e-30][i % 4]
        tensors.append(torch.randn(7 + i % 3, 50) * scale)
    assert _check(tensors) == len(tensors)


def test_what_is_left_to_the_tensor_alone():
    nan = torch.tensor([1.0, math.nan, 0.0])
    inf = torch.tensor([1.0, math.inf, -2.0])
    left = {
        "NaN": nan,
        "infinity": inf,
        "past a grain": torch.randn(GRAIN + 1),
        "transposed": torch.randn(30, 40).t(),
        "float64": torch.randn(30, dtype=torch.float64),
        "int": torch.arange(30),
        "empty": torch.ones(0),
        "alone of its shape": torch.randn(17),
    }
    tensors = [nan.clone(), inf.clone()]
    for name, t in left.items():
        tensors.append(t)
        tensors.append(t.clone() if name != "alone of its shape" else torch.randn(18))
    found = batched_statistics(tensors)
    assert all(f is None for f in found), [
        t.shape for t, f in zip(tensors, found, strict=True) if f
    ]
    assert not batchable(torch.randn(3, requires_grad=True).t()[None].expand(2, 3)[:, :2])


def test_values_that_require_grad_and_views_of_them():
    w = torch.randn(8, 8, requires_grad=True)
    tensors = [w * 2, w + 1, (w * 3)[2:4], (w - 1)[2:4]]
    assert _check(tensors) == len(tensors)


def test_statistics_of_generated_graphs_equal_each_alone():
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def check(case):
        gm, inputs = case
        rec = fxviz.record(gm, *[i.clone() for i in inputs])
        values = [r.value for r in rec.values() if isinstance(r.value, torch.Tensor)]
        values = [v for v in values if batchable(v)]
        # each value with its negation and a copy of it scaled past float32's sums: the
        # graph's own shapes, two or more of each, in every range of magnitudes
        tensors = values + [-v.detach() for v in values] + [v.detach() * 1e36 for v in values]
        _check(tensors)
        # and the records (read all at once) say what each value alone says
        for r in rec.values():
            if isinstance(r.value, torch.Tensor) and r.value._version == 0 and r.outputs:
                s = r.outputs[0]
                if s.min is not None and r.value.layout == torch.strided:
                    alone = _statistics(r.value)
                    assert _same((s.min, s.max, s.mean, s.std, s.absmax, s.zeros), (
                        alone[0], alone[1], alone[2], alone[3], alone[4], alone[8]
                    )), r.name  # fmt: skip

    check()


class _Deep(nn.Module):
    """Residual Linear -> GELU blocks: many outputs of one shape, values growing past
    float32's sums of squares deep down."""

    def __init__(self, blocks: int = 40) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + 8 * torch.nn.functional.gelu(layer(x))
        return x


def _aten_calls(fn) -> dict[str, int]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    counts: dict[str, int] = {}
    for event in prof.events():
        counts[event.name] = counts.get(event.name, 0) + 1
    return counts


def test_a_table_reduces_many_nodes_a_call():
    """Reading a whole recording takes one min, max, sum and norm for many nodes, not
    one of each a node, and gives the numbers each value gets alone."""
    torch.manual_seed(0)
    model, x = _Deep().eval(), torch.randn(16, 32)
    rec = fxviz.record(model, x)
    calls = _aten_calls(rec.table)
    ran = [r for r in rec.values() if r.op not in ("placeholder", "get_attr", "output")]
    measured = [r for r in ran if r.outputs and r.outputs[0].min is not None]
    assert len(measured) == len(ran) >= 160
    reductions = calls.get("aten::aminmax", 0) + calls.get("aten::amin", 0)
    assert reductions < len(measured) / 2, calls  # alone: one aminmax a node
    for r in measured:
        alone = _statistics(r.value)
        s = r.outputs[0]
        assert _same((s.min, s.max, s.mean, s.std, s.absmax, s.zeros), (
            alone[0], alone[1], alone[2], alone[3], alone[4], alone[8]
        )), r.name  # fmt: skip
    assert any((r.outputs[0].absmax or 0) > 1e19 for r in measured)  # float64 sums taken


def test_a_value_changed_after_the_run_is_not_measured_with_its_neighbours():
    """Reading one record measures its neighbours' statistics too, from the values as
    they ran; a value changed since keeps its warning and its shapes-only record."""
    torch.manual_seed(0)
    rec = fxviz.record(lambda x: ((x + 1) * 2 - 3).relu(), torch.randn(4, 4))
    values = {node.name: value for node, value in rec.env.items()}
    with torch.no_grad():
        values["mul"].add_(100)  # before any record is read (or built)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = rec["add"].outputs[0]
    assert first.min is not None
    with pytest.warns(FxvizWarning, match="changed in place"):
        changed = rec["mul"].outputs[0]
    assert changed.min is None
    assert rec["sub"].outputs[0].min == _statistics(rec["sub"].value)[0]
