"""Statistics taken when first read are the statistics taken as each node ran, and never
silently wrong when something changed a value after the run."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

import fxviz
from fxviz._record import RecordingInterpreter, _stats
from fxviz._record._summary import summarize


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("scale", torch.linspace(-1.0, 2.0, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x).view(2, 3, 6).transpose(1, 2)
        w = self.lin.weight.t()
        parts = torch.split(h.reshape(2, 18) @ torch.ones(18, 6), 3, dim=1)
        y = (parts[0].sum(1).abs() * torch.tensor([1e4, -1.0])).log()  # a NaN: log(-x)
        y.add_(1)
        return y, w.permute(1, 0).contiguous() * self.scale, torch.relu(x).clone().mul_(2)


def _summaries(rec: fxviz.Recording) -> dict[str, list[dict]]:
    return {name: [s.to_dict() for s in r.outputs] for name, r in rec.items()}


@pytest.mark.parametrize("keep", ["all", "stats", 10_000])
def test_statistics_read_later_equal_those_taken_as_the_graph_ran(keep):
    gm, x = fxviz.trace(Block()), torch.randn(6, 6)
    lazy = fxviz.record(gm, x, keep=keep)
    eager = fxviz.record(gm, x, keep=keep, stats="eager")
    assert _summaries(lazy) == _summaries(eager)
    assert lazy["log"].nonfinite_count > 0  # the data holds the case the test is about
    assert lazy["add_"].mutates == ("log",)


def test_eager_statistics_are_accepted_wherever_stats_is():
    model, x = Block(), torch.randn(6, 6)
    gm = fxviz.trace(model)
    dbg = fxviz.Debugger(gm, x, stats="eager")
    dbg.continue_()
    interp = RecordingInterpreter(gm, stats="eager")
    interp.run(x)
    assert _summaries(dbg.recording) == _summaries(interp.recording)
    with pytest.raises(ValueError, match="stats must be True, False or 'eager'"):
        fxviz.record(model, x, stats="later")


def test_a_value_changed_after_the_run_is_not_summarised_as_it_is_now():
    x = torch.tensor([1.0, 2.0])
    rec = fxviz.record(lambda x: (x * 2).relu(), x)
    x.mul_(100)  # the user changes the input after the run...
    rec.output.add_(1000)  # ...and the value the graph returned
    assert rec["x"].outputs[0].max == 2.0  # inputs were summarised as the graph ran
    assert rec["mul"].outputs[0].max == 4.0  # untouched since it ran
    with pytest.warns(fxviz.FxvizWarning, match="'relu' was changed in place after it ran"):
        changed = rec["relu"].outputs[0]
    assert changed.shape == (2,)
    assert changed.max is None


def test_parameters_and_their_views_keep_their_statistics_through_an_optimizer_step():
    model = nn.Linear(3, 2)
    gm = fxviz.trace(model)
    # a graph that reads the weight itself (get_attr) and a view of it
    with gm.graph.inserting_before(next(iter(reversed(gm.graph.nodes)))):
        weight = gm.graph.get_attr("weight")
        view = gm.graph.call_method("t", (weight,))
    out = next(iter(reversed(gm.graph.nodes)))
    out.args = ((out.args[0], view),)
    gm.recompile()
    before = model.weight.detach().clone()
    rec = fxviz.record(gm, torch.ones(1, 3))
    with torch.no_grad():
        model.weight.add_(5)  # as an optimizer step does
    assert rec[weight.name].outputs[0].max == pytest.approx(float(before.max()))
    assert rec[view.name].outputs[0].max == pytest.approx(float(before.max()))
    assert rec[view.name].shape == (3, 2)


def test_parameter_statistics_are_measured_once_per_version_and_never_keep_it_alive():
    model = nn.Linear(4, 4)
    w = model.weight
    (a,) = _stats.cached_summary(w)
    assert _stats.cached_summary(w)[0] is a  # measured once
    with torch.no_grad():
        w.mul_(2)
    (b,) = _stats.cached_summary(w)
    assert b is not a
    assert b.max == pytest.approx(2 * a.max)
    ref = weakref.ref(w)
    del model, w
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x.flatten(1).t(),
        lambda x: x.permute(2, 0, 1),
        lambda x: x.reshape(-1),
        lambda x: x.transpose(0, 2).detach(),
        lambda x: x.view(4, 30),
    ],
)
def test_a_view_takes_the_statistics_of_the_value_it_views_exactly(view):
    base = torch.randn(4, 5, 6) * 1e3 + 7
    base[0, 0, 0] = float("nan")
    (measured_base,) = summarize(base)
    v = view(base)
    derived = _stats.view_summary(v, [(base, measured_base, base._version)])
    assert derived is not None
    assert [s.to_dict() for s in derived] == [s.to_dict() for s in summarize(v)]


def test_a_partial_or_changed_view_is_measured_itself():
    base = torch.randn(4, 6)
    (s,) = summarize(base)
    assert _stats.view_summary(base[:2], [(base, s, base._version)]) is None  # a part
    assert _stats.view_summary(base.expand(2, 4, 6), [(base, s, base._version)]) is None
    v = base.view(-1)
    v.add_(1)
    assert _stats.view_summary(v, [(base, s, 0)]) is None  # written since


def test_views_read_later_take_the_statistics_of_what_they_view():
    def f(x):
        y = x * 3
        return y.view(4, 6).t().reshape(-1), y[:1]  # whole views, and a part

    x = torch.randn(2, 12)
    lazy, eager = fxviz.record(f, x), fxviz.record(f, x, stats="eager")
    assert _summaries(lazy) == _summaries(eager)
    for name in ("view", "t", "reshape"):
        assert lazy[name].outputs[0].min == lazy["mul"].outputs[0].min
    assert lazy["getitem"].outputs[0].numel == 12
