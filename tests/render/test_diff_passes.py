"""fxviz.diff follows what standard FX passes do: replace (insert, replace_all_uses_with,
erase), insert-before, fuse two nodes into one, delete a no-op; on real-shaped models."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.fx
from torch import nn

import fxviz
from tests import hf_models


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.drop = nn.Dropout(0.1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        x = self.drop(self.pool(x).flatten(1))
        return self.fc(x)


class MLPBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.up = nn.Linear(16, 64)
        self.down = nn.Linear(64, 16)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.ln(x)))
        return x + self.drop(self.down(h))


def _cnn():
    return fxviz.trace(SmallCNN().eval()), (torch.randn(2, 3, 8, 8),)


def _mlp():
    return fxviz.trace(MLPBlock().eval()), (torch.randn(2, 4, 16),)


def _gpt2():
    program, inputs = hf_models.exported("gpt2")
    return program.module(), inputs


MODELS = {"cnn": _cnn, "mlp": _mlp, "gpt2": _gpt2}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    gm, inputs = MODELS[request.param]()
    return request.param, gm, inputs


def _activation(gm: torch.fx.GraphModule) -> torch.fx.Node:
    """The first relu/gelu (whatever level the graph is at) fed by a linear/conv/addmm."""
    for node in gm.graph.nodes:
        text = str(node.target)
        if node.op == "call_function" and any(a in text for a in ("relu", "gelu", "tanh")):
            return node
    raise AssertionError("no activation")


def _copy(gm):
    return copy.deepcopy(gm)


def replace_activation(gm):
    """The standard pass: insert a new node, replace_all_uses_with, erase the old one."""
    gm = _copy(gm)
    old = _activation(gm)
    with gm.graph.inserting_after(old):
        new = gm.graph.call_function(torch.sigmoid, (old.args[0],))
    old.replace_all_uses_with(new)
    gm.graph.erase_node(old)
    gm.recompile()
    return gm, old.name, new.name


def insert_before_activation(gm):
    gm = _copy(gm)
    act = _activation(gm)
    source = act.args[0]
    with gm.graph.inserting_before(act):
        scaled = gm.graph.call_function(operator.mul, (source, 1.5))
    act.replace_input_with(source, scaled)
    gm.recompile()
    return gm, scaled.name


def _fused(first, second, first_kwargs, second_args, second_kwargs):
    def run(*args):
        return second(first(*args, **first_kwargs), *second_args, **second_kwargs)

    return run


class Fused(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def fuse_into_activation(gm, scale=1.0):
    """Fuse the activation's producer and the activation into one call_module node."""
    gm = _copy(gm)
    act = _activation(gm)
    producer = act.args[0]
    assert len(producer.users) == 1
    first = gm.get_submodule(producer.target) if producer.op == "call_module" else producer.target
    fn = _fused(first, act.target, producer.kwargs, act.args[1:], act.kwargs)
    gm.add_submodule("fused", Fused(lambda *a: fn(*a) * scale))
    with gm.graph.inserting_after(act):
        fused = gm.graph.call_module("fused", producer.args)
    act.replace_all_uses_with(fused)
    gm.graph.erase_node(act)
    gm.graph.erase_node(producer)
    gm.recompile()
    return gm, producer.name, act.name, fused.name


def _no_op(gm):
    """A dropout in eval (call_module or aten.dropout) or an alias: its output is its input."""
    for node in gm.graph.nodes:
        text = str(node.target)
        if "drop" in text or text.startswith("aten.alias") or "dropout" in text:
            return node
    raise AssertionError("no no-op")


def delete_node(gm, node_name):
    gm = _copy(gm)
    node = next(n for n in gm.graph.nodes if n.name == node_name)
    users = [u.name for u in node.users]
    node.replace_all_uses_with(node.args[0])
    gm.graph.erase_node(node)
    gm.recompile()
    return gm, users


def _pair(d, name_before=None, name_after=None):
    for p in d.pairs:
        if (name_before is None or (p.before and p.before.name == name_before)) and (
            name_after is None or (p.after and p.after.name == name_after)
        ):
            return p
    raise AssertionError((name_before, name_after))


def test_replace_pairs_old_with_new_and_names_it_first(model):
    _, gm, inputs = model
    after, old, new = replace_activation(gm)
    d = fxviz.diff(gm, after, *inputs)
    pair = _pair(d, old, new)
    assert pair.status == "replaced"
    assert f"{old} → {new}" in pair.detail
    assert "torch.sigmoid" in pair.detail
    assert not [p for p in d.pairs if p.status in ("added", "removed")]
    assert d.first_divergence == new
    row = d.table().set_index("after").loc[new]
    assert row["status"] == "replaced"
    assert row["target_after"] == "torch.sigmoid"


def test_an_exact_replacement_is_paired_and_nothing_diverges(model):
    _, gm, inputs = model
    after = _copy(gm)
    old = _activation(after)
    with after.graph.inserting_after(old):
        new = after.graph.create_node(old.op, old.target, old.args, old.kwargs, name="act_new")
    old.replace_all_uses_with(new)
    after.graph.erase_node(old)
    after.recompile()
    d = fxviz.diff(gm, after, *inputs)
    assert _pair(d, old.name, "act_new").status == "replaced"
    assert d.first_divergence is None


def test_insert_before_is_compared_with_the_value_it_displaced(model):
    _, gm, inputs = model
    after, inserted = insert_before_activation(gm)
    d = fxviz.diff(gm, after, *inputs)
    pair = _pair(d, None, inserted)
    assert pair.status == "added"
    assert pair.reference is not None
    assert pair.allclose is False
    assert d.first_divergence == inserted
    assert not [p for p in d.pairs if p.status == "removed"]


@pytest.mark.parametrize("scale", [1.0, 1.01])
def test_fuse_two_nodes_into_one(model, scale):
    _, gm, inputs = model
    after, producer, act, fused = fuse_into_activation(gm, scale)
    d = fxviz.diff(gm, after, *inputs)
    pair = _pair(d, act, fused)
    assert pair.status == "replaced"
    gone = _pair(d, producer)
    assert gone.status == "removed"
    assert gone.detail == f"fused into {fused}"
    assert not [p for p in d.pairs if p.status == "added"]
    assert d.first_divergence == (fused if scale != 1.0 else None)


def test_delete_a_no_op(model):
    _, gm, inputs = model
    node = _no_op(gm)
    after, users = delete_node(gm, node.name)
    d = fxviz.diff(gm, after, *inputs)
    assert _pair(d, node.name).status == "removed"
    user = _pair(d, users[0], users[0])
    assert user.status == "changed"
    assert f"{node.name} removed" in user.detail
    assert d.first_divergence is None


def test_deleting_what_was_not_a_no_op_names_the_node_whose_input_changed(model):
    _, gm, inputs = model
    act = _activation(gm)
    after, users = delete_node(gm, act.name)
    d = fxviz.diff(gm, after, *inputs)
    assert d.first_divergence == users[0]


def test_transformer_recording_pairs_by_what_it_produced():
    from fxviz.examples import NegSigmSwapXformer, neg_sigmoid

    gm = torch.fx.symbolic_trace(neg_sigmoid)
    swapped = fxviz.record(gm, interpreter=NegSigmSwapXformer)
    d = fxviz.diff(gm, swapped, torch.randn(3))
    assert d.first_divergence == "neg"
    assert [p.status for p in d.changes()] == ["changed", "changed"]
