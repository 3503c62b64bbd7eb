"""In-place writes and aliasing: each record shows its value as it was when its node ran."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz


def test_add_in_place_keeps_the_earlier_value():
    def f(x):
        y = x * 2
        z = y.add_(1)  # writes into y
        return z.relu_()  # writes into y (and z) again

    x = torch.tensor([-3.0, 1.0])
    rec = fxviz.record(f, x)
    assert torch.equal(rec["mul"].value, torch.tensor([-6.0, 2.0]))
    assert torch.equal(rec["add_"].value, torch.tensor([-5.0, 3.0]))
    assert torch.equal(rec["relu_"].value, torch.tensor([0.0, 3.0]))
    assert torch.equal(rec.output, f(x.clone()))
    assert rec["add_"].mutates == ("mul",)
    assert rec["relu_"].mutates == ("add_",)
    assert rec["add_"].aliases == ("mul",)
    assert rec["relu_"].aliases == ("add_",)  # the input it wrote into (itself a view of mul)
    assert rec["mul"].outputs[0].min == -6.0  # statistics were taken before the write


def test_views_are_snapshotted_with_their_base():
    def f(x):
        y = x + 0
        v = y.view(-1)  # shares y's memory
        y.mul_(10)  # writes into v too
        return v

    x = torch.arange(4.0).reshape(2, 2)
    rec = fxviz.record(f, x)
    assert torch.equal(rec["view"].value, torch.arange(4.0))
    assert torch.equal(rec["add"].value, torch.arange(4.0).reshape(2, 2))
    assert torch.equal(rec.output, torch.arange(4.0) * 10)
    assert rec["view"].aliases == ("add",)


def test_detach_in_place_writes_no_value_and_is_recorded_as_the_view_it_is():
    # an exported language model's cache update runs aten.detach_: its schema marks self
    # written, but it changes only autograd state (no value, no version)
    def f(x):
        y = torch.ops.aten.mul.Tensor(x, 2)
        z = torch.ops.aten.detach_.default(y)
        return z + 1

    x = torch.tensor([1.0, -2.0], requires_grad=True)
    gm = torch.fx.symbolic_trace(f)
    rec = fxviz.record(gm, x)
    assert torch.equal(rec.output, f(x).detach())
    assert rec["detach__default"].mutates == ()
    assert rec["detach__default"].aliases == ("mul_tensor",)
    assert torch.equal(rec["mul_tensor"].value, torch.tensor([2.0, -4.0]))
    assert rec["mul_tensor"].outputs[0].min == -4.0
    from fxviz._record._writes import written_locations

    (detach,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.detach_.default]
    assert written_locations(detach, {}) == ()  # nothing to copy before it runs
    add_ = gm.graph.call_function(torch.ops.aten.add_.Tensor, (detach, 1))
    assert written_locations(add_, {}) == (("arg", 0), ("kwarg", "self"))


def test_inputs_written_in_place_are_written_as_by_the_graph():
    def f(x):
        x.copy_(x * 3)
        return x

    x = torch.ones(2)
    rec = fxviz.record(f, x)
    assert torch.equal(x, torch.full((2,), 3.0))  # the caller's tensor changed, as gm(x) does
    assert torch.equal(rec["x"].value, torch.ones(2))  # the record shows it as it came in
    assert rec.output is x


def test_inplace_modules_and_functional_inplace_flags():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))
    x = torch.randn(3, 4)
    rec = fxviz.record(model, x)
    assert rec["_0"].outputs[0].min < 0
    assert bool((rec["_0"].value < 0).any())
    assert rec["_1"].mutates == ("_0",)

    def g(x):
        h = x - 1
        return F.relu(h, True)

    rec = fxviz.record(g, torch.zeros(2))
    assert torch.equal(rec["sub"].value, torch.full((2,), -1.0))


def test_exported_setitem_on_a_view_becomes_fill_and_is_foreseen():
    class Model(nn.Module):
        def forward(self, x):
            y = x * 2
            y[0] = 7.0
            return y

    x = torch.ones(3, 2)
    gm = fxviz.trace(Model(), x, method="export")
    rec = fxviz.record(gm, x)
    assert torch.equal(rec["mul"].value, torch.full((3, 2), 2.0))
    assert torch.equal(rec.output[0], torch.full((2,), 7.0))
    fill = next(r for r in rec.values() if "fill_" in r.target)
    assert fill.mutates == ("select",)


def test_index_put_and_out_arguments():
    def f(x, idx):
        y = x.clone()
        y.index_put_((idx,), torch.tensor(9.0))
        out = torch.zeros_like(x)
        torch.add(x, 1, out=out)
        return y, out

    x, idx = torch.zeros(3), torch.tensor([1])
    rec = fxviz.record(f, x, idx)
    assert torch.equal(rec["clone"].value, torch.zeros(3))
    assert rec["index_put_"].mutates == ("clone",)
    assert torch.equal(rec["zeros_like"].value, torch.zeros(3))
    assert rec["add"].mutates == ("zeros_like",)
    assert torch.equal(rec.output[1], torch.ones(3))


@torch.fx.wrap
def _sneaky_scale(x):
    x.mul_(2)  # an in-place write hidden inside a wrapped function
    return x.sum()


def test_unforeseen_write_is_detected_and_reported():
    def f(x):
        y = x + 1
        return _sneaky_scale(y)

    with pytest.warns(fxviz.FxvizWarning, match="did not foresee"):
        rec = fxviz.record(f, torch.ones(2))
    assert rec["_sneaky_scale"].mutates == ("add",)
    assert rec["add"].outputs[0].max == 2.0  # statistics still show the value before


def test_no_copies_without_writes():
    def f(x):
        return (x * 2).relu().view(-1)

    x = torch.randn(2, 2)
    rec = fxviz.record(f, x)
    assert (
        rec["view"].value.untyped_storage().data_ptr()
        == rec["relu"].value.untyped_storage().data_ptr()
    )
    assert rec["view"].aliases == ("relu",)
    assert rec["relu"].aliases == ()


def test_a_record_read_before_a_later_write_still_shows_the_value_as_it_was():
    def f(x):
        y = x * 2
        y.add_(100)
        return y

    dbg = fxviz.Debugger(f, torch.ones(2))
    dbg.step(2)
    early = dbg.recording["mul"]  # read before add_ runs
    dbg.step()
    assert torch.equal(early.value, torch.full((2,), 2.0))
    assert torch.equal(dbg.output if dbg.done else dbg.value("add_"), torch.full((2,), 102.0))


def test_budget_counts_copies_made_before_writes():
    def f(x):
        y = x * 2
        y.add_(1)
        return y

    x = torch.ones(1024)  # 4 KiB a value
    with pytest.warns(fxviz.FxvizWarning, match="kept the values of 3 of 4 nodes"):
        rec = fxviz.record(f, x, keep=4096)  # room for y, not for its copy
    assert rec["mul"].outputs[0].max == 2.0  # statistics from before the write
    assert not rec["mul"].kept  # better dropped than shown after the write
    assert rec["mul"].value is None


def test_editing_the_graph_between_runs_is_noticed():
    gm = fxviz.trace(lambda x: (x * 2).relu())
    x = torch.tensor([-1.0, 3.0])
    assert torch.equal(fxviz.record(gm, x)["relu"].value, torch.tensor([0.0, 6.0]))
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    relu.target = "relu_"  # now writes into mul in place
    gm.recompile()
    rec = fxviz.record(gm, x)
    assert rec["relu"].mutates == ("mul",)
    assert torch.equal(rec["mul"].value, torch.tensor([-2.0, 6.0]))


def test_operator_words_with_a_trailing_underscore_write_nothing():
    """``operator.and_`` (Dynamo's ``mask & other``) only avoids a keyword: nothing is
    foreseen written, so nothing is copied before it; ``operator.iand`` still writes."""
    import operator

    from fxviz._record._writes import written_locations

    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    both = graph.call_function(operator.and_, (a, b))
    either = graph.call_function(operator.or_, (both, b))
    inplace = graph.call_function(operator.iand, (either, a))
    graph.output(inplace)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert written_locations(both, {}) == ()
    assert written_locations(either, {}) == ()
    assert written_locations(inplace, {}) == (("arg", 0),)
    x, y = torch.tensor([True, False, True]), torch.tensor([True, True, False])
    rec = fxviz.record(gm, x, y)
    assert torch.equal(rec["and_"].value, x & y)
    assert rec["and_"].mutates == ()
    assert torch.equal(rec["or_"].value, (x & y) | y)  # as it was before iand wrote it
    assert rec["iand"].mutates == ("or_",)
    assert torch.equal(rec.output, ((x & y) | y) & x)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_views_written_later_show_the_statistics_they_had_measured_alone(layout):
    """A gapped slice, a permuted view and in-place results, all written into after
    their nodes ran: each record's statistics are, bit for bit, those its value had when
    its node ran, and its strides those it had (copied before the write and measured
    when read where the copy keeps them, else measured then)."""
    from fxviz._record._moments import _statistics

    def f(x):
        y = x * 2
        s = y[:, :3]  # gapped (channels_last: its copy is not contiguous)
        p = y.permute(0, 2, 3, 1)
        u = y.add_(1)  # writes y, s, p
        w = u.mul_(-3)  # writes them again
        return s.sum() + p.amax() + w.mean()

    x = torch.randn(2, 6, 5, 5, generator=torch.Generator().manual_seed(0))
    x = x.contiguous(memory_format=layout)
    y = x * 2
    want = {"mul": _statistics(y), "getitem": _statistics(y[:, :3])}
    want["permute"] = _statistics(y.permute(0, 2, 3, 1))
    want["add_"] = _statistics(y.add_(1))
    want["mul_"] = _statistics(y.mul_(-3))
    rec = fxviz.record(f, x)
    strides = {"mul": y.stride(), "getitem": y[:, :3].stride(), "add_": y.stride()}
    strides["permute"] = y.permute(0, 2, 3, 1).stride()
    strides["mul_"] = y.stride()
    for name, stats in want.items():
        o = rec[name].outputs[0]
        got = (o.min, o.max, o.mean, o.std, o.absmax, o.nan, o.posinf, o.neginf, o.zeros)
        assert got == stats, name
        assert o.stride == strides[name], name  # the layout as it ran, not its copy's


class EmaInNoGrad(nn.Module):
    """An exponential moving average kept in a buffer, written inside ``torch.no_grad()``
    (exported as a ``wrap_with_set_grad_enabled`` region around the writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.zeros(4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        with torch.no_grad():
            self.ema.mul_(0.9).add_(0.1 * y.mean(0))
        return y - self.ema


def test_a_write_inside_a_no_grad_region_keeps_the_value_read_before_it(recwarn):
    torch.manual_seed(0)
    model, x = EmaInNoGrad(), torch.randn(3, 4)
    eager = EmaInNoGrad()
    eager.load_state_dict(model.state_dict())
    expected = eager(x)
    rec = fxviz.record(model, x)
    assert rec.graph_module.meta["fxviz_method"] == "export"
    region = next(r for r in rec.values() if r.mutates)
    assert region.mutates == ("ema",)
    assert torch.equal(rec["ema"].value, torch.zeros(4))  # as it was before the region
    assert rec["ema"].outputs[0].max == 0.0
    assert torch.equal(rec.output, expected)
    assert torch.equal(model.ema, eager.ema)  # the buffer moved once, as a call moves it
    assert not [w for w in recwarn if issubclass(w.category, fxviz.FxvizWarning)]
