"""Recording composes with users' own Interpreter and Transformer subclasses."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

import fxviz
from fxviz._record import RecordingInterpreter, recording_class
from fxviz.examples import NegSigmSwapInterpreter, NegSigmSwapXformer, TwoLayerNet, neg_sigmoid


def test_user_interpreter_class_keeps_its_behaviour():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    x = torch.randn(3, 4)
    rec = fxviz.record(gm, x, interpreter=NegSigmSwapInterpreter)
    expected = NegSigmSwapInterpreter(gm).run(x)
    assert torch.equal(rec.output, expected)
    assert torch.equal(rec.output, torch.neg(x).sigmoid())
    assert not torch.equal(rec.output, gm(x))  # it really ran the swapped ops
    # the record shows what the interpreter computed at each node
    assert torch.equal(rec["sigmoid"].value, torch.neg(x))
    assert rec["sigmoid"].target == "torch.sigmoid"


def test_user_interpreter_instance_is_copied_not_changed():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    interp = NegSigmSwapInterpreter(gm)
    rec = fxviz.record(gm, torch.ones(2), interpreter=interp)
    assert type(interp) is NegSigmSwapInterpreter
    assert torch.equal(rec.output, torch.neg(torch.ones(2)).sigmoid())


def test_overridden_run_node_still_runs():
    calls: list[str] = []

    class Counting(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            calls.append(n.name)
            return super().run_node(n)

    gm = fxviz.trace(TwoLayerNet(8, 4, 2))
    rec = fxviz.record(gm, torch.randn(3, 8), interpreter=Counting)
    assert calls == list(rec)


def test_recording_class_is_cached_and_checked():
    cls = recording_class(NegSigmSwapInterpreter)
    assert cls is recording_class(NegSigmSwapInterpreter)
    assert issubclass(cls, NegSigmSwapInterpreter)
    assert issubclass(cls, fxviz.RecordingMixin)
    with pytest.raises(TypeError, match=r"must be a torch\.fx\.Interpreter subclass"):
        fxviz.record(neg_sigmoid, torch.ones(1), interpreter=int)


def test_transformer_records_which_new_nodes_each_old_node_produced():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    rec = fxviz.record(gm, interpreter=NegSigmSwapXformer)
    new_gm = rec.output
    assert isinstance(new_gm, torch.fx.GraphModule)
    x = torch.randn(5)
    assert torch.equal(new_gm(x), torch.neg(x).sigmoid())
    assert torch.equal(new_gm(x), NegSigmSwapXformer(gm).transform()(x))
    produced = {r.name: r.produced for r in rec.values()}
    new_targets = {n.name: n.target for n in new_gm.graph.nodes}
    assert new_targets[produced["sigmoid"][0]] is torch.neg
    assert new_targets[produced["neg"][0]] == "sigmoid"
    assert produced["output"] == ("output",)
    assert produced["x"] == ("x",)
    with pytest.raises(fxviz.InputError, match="Transformer"):
        fxviz.record(gm, x, interpreter=NegSigmSwapXformer)


def test_shape_prop_example_agrees_with_the_recording():
    model = TwoLayerNet()
    x = torch.randn(64, 1000)
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(x)
    rec = fxviz.record(gm, x)
    for node in gm.graph.nodes:
        meta = node.meta["tensor_meta"]
        assert rec[node.name].shape == tuple(meta.shape)
        assert rec[node.name].dtype == meta.dtype


def test_recording_interpreter_used_directly():
    gm = fxviz.trace(TwoLayerNet(8, 4, 2))
    interp = RecordingInterpreter(gm, keep="stats")
    x = torch.randn(3, 8)
    assert torch.equal(interp.run(x), gm(x))
    assert interp.recording["linear2"].shape == (3, 2)
    assert interp.recording["linear2"].value is None
    assert len(interp.env) < len(gm.graph.nodes)  # values were freed after their last use
