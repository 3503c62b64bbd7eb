"""A reviewer's probes (2026-11-27) of the capture's handling of writes, each failing on
the code it was written against (main at bc9871e). Fixed since: the resized buffer, plain
tensor attributes, writes to the caller's input, a symbolic capture's branch on a
buffer, export's lost ``no_grad`` around ``nn.init``, and an assigned ``.data``. A write
in place through ``.data`` is still a known bug, a strict xfail (``KNOWN``, with what a
fix needs). Every test runs on both engines (``recording_engine``); the findings are in
the capture, so both fail alike."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import fxviz

KNOWN = {
    "data": "a one-run capture's staleness reads version counters and data pointers; a "
    "write in place through .data moves neither (a fix needs to know which state values "
    "the capture's Python read: comparing every parameter's values each record costs a "
    "forward)",
}


def known(key: str):
    return pytest.mark.xfail(strict=True, reason=f"known bug: {KNOWN[key]}")


def _records_as_calls(model, x, state, times: int = 1, **options) -> None:
    """Record ``model`` ``times`` times beside a copy of it called as often: each
    record's output, and the model's ``state(model)`` after it, are the call's."""
    plain = copy.deepcopy(model)
    for _ in range(times):
        want = plain(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = fxviz.record(model, x, **options)
        assert torch.equal(rec.output, want)
        assert torch.equal(state(model), state(plain))


# -- Change 3 (cb5111a..bc9871e: Dynamo captures and buffer writes; capture cache) -------


class _BranchOnState(nn.Module):
    """Its Python decides on a buffer's and a parameter's values (``.item()``): a one-run
    capture holds the branch its first run took."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.steps.item() > 1:
            return x + 100 * self.w
        if self.w.sum().item() > 5:
            return x - 100
        return x - 1


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda m: m.steps.data.fill_(5), id="buffer-data-fill", marks=known("data")),
        pytest.param(lambda m: setattr(m.steps, "data", torch.tensor(5.0)), id="buffer-data-set"),
        pytest.param(lambda m: setattr(m.w, "data", m.w * 3), id="parameter-data-set"),
        pytest.param(lambda m: m.w.data.mul_(3), id="parameter-data-mul", marks=known("data")),
    ],
)
def test_a_capture_is_stale_after_a_write_through_data(write):
    """Change 3, bc9871e (capture cache: a one-run capture is stale once a buffer was
    written): the staleness test read version counters only, and a write through
    ``.data`` (or assigning ``.data``: the common ``p.data.mul_(...)`` of weight clipping,
    EMA, a manual reset) moves none. The second record re-used the first run's Dynamo
    capture and recorded the branch the first run took: its output was not the call's.
    Assigning ``.data`` is seen now (the data pointer moves); writing in place through
    it is still a known bug."""
    x = torch.ones(2, 3)
    model = _BranchOnState()
    plain = copy.deepcopy(model)
    fxviz.record(model, x, method="dynamo")
    write(model)
    write(plain)
    rec = fxviz.record(model, x, method="dynamo")
    assert torch.equal(rec.output, plain(x))


class _ResizesItsBuffer(nn.Module):
    """``resize_`` of a buffer in forward, behind a graph break."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.sum()
        torch._dynamo.graph_break()
        self.buf.resize_(self.buf.numel() + 1).fill_(2.0)
        return y * self.buf.sum()


def test_record_leaves_a_resized_buffer_as_a_call_leaves_it():
    """Change 3 area (buffer writes; the bug predates today, at bb1178a too): with
    ``method="auto"`` the capture attempts that are refused or fail are undone by
    ``ModelState.restore``, which copies a written tensor back only when its shape is
    unchanged (``t.shape == saved.shape``) and then puts its version counter back: a
    buffer the attempt resized stays resized and looks unwritten. The record then runs
    the forward on a buffer of 5 values (one call makes 4): output 144, not 96, and the
    model is left with 6 values. ``method="export"`` or ``"dynamo"`` alone give 96."""
    x = torch.ones(4, 3)
    _records_as_calls(_ResizesItsBuffer(), x, lambda m: m.buf)


class _WritesItsInputBetweenGraphs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        torch._dynamo.graph_break()
        x.add_(1)  # the Python between the graphs writes the caller's tensor
        return y + x


class _WritesItsInputInAGraph(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        x.add_(1)  # compiled: the graph writes the caller's tensor
        return y + x


@pytest.mark.parametrize(
    ("model", "method"),
    [
        (_WritesItsInputBetweenGraphs, "dynamo"),
        (_WritesItsInputInAGraph, "dynamo"),
        (_WritesItsInputInAGraph, "real"),
        (_WritesItsInputInAGraph, "auto"),
    ],
)
def test_a_record_writes_an_input_once_as_a_call_does(model, method):
    """Change 3 area (cb5111a replays the Python's writes to parameters and buffers; the
    bug predated it): the capture's own run of the forward wrote the caller's input in
    place and nothing put it back, so the record then ran on ``x + 1``: a call gives
    ``[1, 1, 1]`` and leaves ``x`` at 1; the record gave ``[4, 4, 4]`` and left ``x``
    at 2. Now a capture puts its runs' input writes back (``ModelState(inputs=)``) and
    a ``python`` node writes again what the Python between graphs wrote
    (``WriteWatch(model, inputs)``)."""
    x_call, x_record = torch.zeros(3), torch.zeros(3)
    want = model()(x_call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = fxviz.record(model(), x_record, method=method)
    assert torch.equal(rec.output, want)
    assert torch.equal(x_record, x_call)


class _WritesAPlainTensorAttribute(nn.Module):
    """``self.t``: a tensor attribute, neither parameter nor buffer (a cache, a counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.t = torch.zeros(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.t
        torch._dynamo.graph_break()
        self.t.add_(1)
        return y * self.t


class _WritesAPlainTensorAttributeInPython(_WritesAPlainTensorAttribute):
    """The write runs as Python Dynamo does not compile: no graph holds it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.t
        self._count()
        return y * self.t

    @torch._dynamo.disable
    def _count(self) -> None:
        self.t.add_(1)


@pytest.mark.parametrize(
    "model", [_WritesAPlainTensorAttribute, _WritesAPlainTensorAttributeInPython]
)
@pytest.mark.parametrize("method", ["dynamo", "auto"])
def test_records_write_a_plain_tensor_attribute_as_calls_do(method, model):
    """Change 3 area (the bug predated it): a plain tensor attribute written in place
    in forward. It was state no capture knew: ``method="dynamo"`` left ``t`` at 5 after
    one record (a call: 1; ``ModelState`` compared plain attributes by identity, so the
    capture's runs' writes were not undone), the graphs read a copy of ``t`` made in the
    captured run, and ``WriteWatch`` did not see the Python's write, so no ``python``
    node wrote it again; ``method="auto"`` (symbolic) ran the write while tracing, and
    the graph never wrote ``t``. Now a tensor attribute is state like a buffer."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    _records_as_calls(model(), x, lambda m: m.t, times=3, method=method)


class _BranchesOnAPlainTensorAttribute(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.steps = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.steps.item() > 1:
            return x + 100
        return x - 1


def test_a_one_run_capture_is_stale_after_a_plain_tensor_attribute_is_written():
    """A one-run capture holds the branch its Python took on a plain tensor attribute's
    value, as on a buffer's: written since (its version moved), it captures again."""
    x = torch.ones(2, 3)
    model = _BranchesOnAPlainTensorAttribute()
    fxviz.record(model, x, method="dynamo")
    model.steps.fill_(5)
    rec = fxviz.record(model, x, method="dynamo")
    assert torch.equal(rec.output, x + 100)


class _BranchesOnItsCount(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.add_(x.abs().mean())
        if self.buf.item() > 1.5:
            self.buf.zero_()
            return x * 0
        return x + self.buf


def test_a_symbolic_capture_that_read_a_buffer_is_stale_once_it_is_written():
    """Change 3, bc9871e (a one-run capture is stale after a buffer write): with
    ``method="auto"`` this model was captured ``symbolic``, yet its graph held the branch
    ``self.buf.item() > 1.5`` took while tracing (on the value before the graph's own
    ``add_``); the cache treated only Dynamo and real captures as one-run, so the second
    record re-used that branch: it gave ``x + buf`` where the call gives zeros, and left
    ``buf`` unreset. Now symbolic tracing refuses a forward that reads a buffer's value
    in Python (``state_value_reads``), and auto captures one run."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    _records_as_calls(_BranchesOnItsCount(), x, lambda m: m.buf, times=2)


def test_symbolic_tracing_refuses_a_branch_on_a_buffer_value():
    """The refusal names the buffer and says what to do."""
    with pytest.raises(fxviz.TraceError, match=r"reads the value of buf .*method='dynamo'"):
        fxviz.trace(_BranchesOnItsCount(), method="symbolic")


class _InitsItsWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.w
        torch._dynamo.graph_break()
        with torch.no_grad():
            self.w[0] = 5.0
        nn.init.normal_(self.w)  # under its own torch.no_grad()
        return y + self.w


def test_record_runs_a_parameter_init_in_forward_as_a_call_does():
    """Change 3 area (writes to parameters in forward; the bug predated it): a call
    runs ``self.w[0] = 5`` under ``no_grad`` then ``nn.init.normal_(self.w)`` (no_grad
    inside); ``record`` with ``method="auto"`` (or ``"export"``) captured it as
    ``aten.normal_`` outside the graph's ``wrap_with_set_grad_enabled`` and ran that node
    with grad enabled: NodeError "a leaf Variable that requires grad is being used in an
    in-place operation". Now an exported graph that writes a parameter in its own grad
    mode is refused, as a symbolic one is, and auto captures one run (Dynamo records
    it, output and RNG as the call's)."""
    x = torch.ones(4, 3)
    model = _InitsItsWeight()
    plain = copy.deepcopy(model)
    torch.manual_seed(0)
    want = plain(x)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = fxviz.record(model, x)
    assert torch.equal(rec.output, want)
    assert torch.equal(model.w, plain.w)


def test_export_refuses_a_parameter_write_its_graph_runs_with_grad_enabled():
    """The refusal names the parameter and the op, and says what to do."""
    with pytest.raises(
        fxviz.TraceError, match=r"writes the parameter w in place .*method='dynamo'"
    ):
        fxviz.trace(_InitsItsWeight(), torch.ones(4, 3), method="export")
