"""One comparison engine: diff, compare, compare_pass and shapes_diff share one alignment,
one set of float64 numbers and one threshold vocabulary (issue 21, item 4)."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
from torch import nn

import fxviz


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) + x


def _renamed_activation(gm: torch.fx.GraphModule, target=torch.sigmoid) -> torch.fx.GraphModule:
    """A standard pass: a new node (another name) replaces the activation, which is erased."""
    gm = copy.deepcopy(gm)
    old = next(n for n in gm.graph.nodes if n.target is torch.relu)
    with gm.graph.inserting_after(old):
        new = gm.graph.create_node("call_function", target, old.args, name="act_new")
    old.replace_all_uses_with(new)
    gm.graph.erase_node(old)
    gm.recompile()
    return gm


def _scaled_before_down(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Insert ``* 1.5`` on the edge into ``down``."""
    gm = copy.deepcopy(gm)
    down = next(n for n in gm.graph.nodes if n.target == "down")
    with gm.graph.inserting_before(down):
        scaled = gm.graph.call_function(operator.mul, (down.args[0], 1.5))
    down.replace_input_with(down.args[0], scaled)
    gm.recompile()
    return gm


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return fxviz.trace(MLP().eval()), torch.randn(4, 8)


def test_diff_with_inputs_is_a_view_of_the_comparison(mlp):
    gm, x = mlp
    after = _renamed_activation(gm)
    d = fxviz.diff(gm, after, x, metric="sqnr", sqnr_db=40)
    cmp = d.comparison
    assert isinstance(cmp, fxviz.Comparison)
    assert cmp.diff is d
    assert cmp.criterion() == "SQNR < 40 dB"
    for pair, measured in zip(d.pairs, cmp.pairs, strict=True):  # the same rows, same numbers
        assert (pair.before and pair.before.name) == measured.a
        assert (pair.after and pair.after.name) == measured.b
        assert pair.max_abs_error == measured.max_abs_error
        assert pair.diverged == (measured.diverged if measured.measured else None)
    assert d.first_divergence == cmp.first_divergence.b == "act_new"
    # compare() on recordings of the same graphs: the same pairs and the same numbers
    alone = fxviz.compare(fxviz.record(gm, x), fxviz.record(after, x), sqnr_db=40)
    assert [(p.a, p.b, p.status) for p in alone.pairs] == [(p.a, p.b, p.status) for p in cmp.pairs]
    assert [p.sqnr_db for p in alone.pairs] == [p.sqnr_db for p in cmp.pairs]


def test_one_threshold_vocabulary(mlp):
    gm, x = mlp
    nearly = _renamed_activation(gm, target=torch.nn.functional.leaky_relu)  # slope 0.01
    strict = fxviz.diff(gm, nearly, x)  # "what changed": allclose by default
    assert strict.first_divergence == "act_new"
    assert "first divergence at 'act_new'" in strict.summary()
    loose = fxviz.diff(gm, nearly, x, metric="sqnr", sqnr_db=20)
    assert loose.first_divergence is None
    assert loose.summary().endswith("outputs agree everywhere")
    assert fxviz.compare_pass(gm, nearly, x, sqnr_db=20).first_divergence is None
    cosine = fxviz.diff(gm, nearly, x, metric="cosine", min_cosine=0.5)
    assert cosine.comparison.criterion() == "cosine < 0.5"
    assert cosine.first_divergence is None


def test_an_inserted_node_is_measured_against_what_it_displaced_in_every_view(mlp):
    gm, x = mlp
    after = _scaled_before_down(gm)
    d = fxviz.diff(gm, after, x)
    pair = next(p for p in d.pairs if p.status == "added")
    assert pair.reference.name == "relu"
    assert pair.allclose is False
    cmp = fxviz.compare_pass(gm, after, x)
    added = cmp[pair.after.name]
    assert added.measured  # before: "only in b", never measured
    assert added.reason.startswith("against relu, the value it displaced: SQNR")
    assert cmp.first_divergence.name == pair.after.name == d.first_divergence


def test_provenance_from_a_transformer_run_is_read_in_one_place():
    from fxviz.examples import NegSigmSwapXformer, neg_sigmoid

    gm = torch.fx.symbolic_trace(neg_sigmoid)
    x = torch.randn(3)
    d = fxviz.diff(gm, fxviz.record(gm, interpreter=NegSigmSwapXformer), x)
    cmp = fxviz.compare_pass(gm, NegSigmSwapXformer, x)
    assert [(p.a, p.b) for p in cmp.pairs] == [(p.before.name, p.after.name) for p in d.pairs]
    assert [(p.a, p.b) for p in cmp.pairs][1] == ("sigmoid", "neg")


def test_shapes_diff_uses_the_same_alignment(mlp):
    gm, _ = mlp
    after = _renamed_activation(gm)
    spec = fxviz.spec(4, 8)
    same_shapes = fxviz.shapes_diff(fxviz.shapes(gm, spec), fxviz.shapes(after, spec))
    # before: aligned by name only, "relu removed" and "act_new added"
    assert same_shapes.empty
    half = copy.deepcopy(after)
    act = next(n for n in half.graph.nodes if n.name == "act_new")
    with half.graph.inserting_after(act):
        cast = half.graph.call_method("half", (act,))
    with half.graph.inserting_after(cast):
        back = half.graph.call_method("float", (cast,))
    act.replace_all_uses_with(back, delete_user_cb=lambda user: user is not cast)
    half.recompile()
    changed = fxviz.shapes_diff(fxviz.shapes(gm, spec), fxviz.shapes(half, spec))
    assert changed.loc["half", "change"] == "added"
    assert changed.loc["half", "dtype_b"] == "float16"
    assert "relu" not in changed.index
    with pytest.raises(fxviz.InputError, match="two ShapeReports"):
        fxviz.shapes_diff(fxviz.shapes(gm, spec), gm)


def test_render_diff_is_a_deprecated_name_of_the_structural_diff(mlp):
    gm, x = mlp
    after = _renamed_activation(gm)
    with pytest.warns(fxviz.FxvizDeprecationWarning, match=r"fxviz\.diff"):
        old = fxviz.render.diff(gm, after)
    assert [p.status for p in old.pairs] == [p.status for p in fxviz.diff(gm, after).pairs]
    with (
        pytest.warns(fxviz.FxvizDeprecationWarning),
        pytest.raises(fxviz.InputError, match=r"fxviz\.diff\(before, after, \*inputs\)"),
    ):
        fxviz.render.diff(gm, after, x)
