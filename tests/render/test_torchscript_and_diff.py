"""TorchScript views and diffs: fork/wait, blocks, freeze; FX passes before/after."""

from __future__ import annotations

import operator
import re
import subprocess
import warnings

import pytest
import torch
import torch.fx

import fxviz
from fxviz.examples import ForkJoinNet, NegSigmSwapXformer, TwoLayerNet, neg_sigmoid


@pytest.fixture
def scripted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.script(ForkJoinNet().eval())


def test_fork_subgraph_is_a_cluster_linked_to_wait(scripted):
    source = fxviz.to_dot(scripted).source
    assert "prim::fork → _scaled_branch" in source
    wait = re.search(r"^\t+(ts\d+) \[label=<.*aten::wait", source, re.M).group(1)
    assert re.search(rf"-> {wait} \[label=future style=dashed\]", source)
    assert "prim::If then" in source
    assert "prim::Loop body" in source
    assert "self.lin.weight" in source


def test_script_function_and_graph_objects(scripted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        fn = torch.jit.script(neg_sigmoid)
    assert "aten::sigmoid" in fxviz.to_dot(fn).source
    assert "aten::linear" in fxviz.to_dot(scripted.inlined_graph).source


def test_freeze_diff_shows_inlined_attributes_and_what_was_preserved(scripted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(scripted)
        kept = torch.jit.freeze(torch.jit.script(ForkJoinNet().eval()), preserved_attrs=["scale"])
    d = fxviz.diff(scripted, frozen)
    inlined = {p.before.title for p in d.pairs if p.status == "inlined"}
    assert inlined == {"self.lin.weight", "self.lin.bias", "self.scale"}
    removed = {p.before.title for p in d.pairs if p.status == "removed"}
    assert {"prim::Loop", "self.repeats"} <= removed  # the loop was unrolled
    kept_diff = fxviz.diff(scripted, kept)
    assert {p.before.title for p in kept_diff.pairs if p.status == "inlined"} == {
        "self.lin.weight",
        "self.lin.bias",
    }
    assert any(p.after and p.after.title == "self.scale" for p in kept_diff.pairs)
    with pytest.raises(TypeError, match="structure only"):
        fxviz.diff(scripted, frozen, torch.ones(2, 4))


def test_transformer_diff_with_provenance_names_the_first_divergence():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    swapped = fxviz.record(gm, interpreter=NegSigmSwapXformer)
    x = torch.randn(5)
    d = fxviz.diff(gm, swapped, x)
    assert [(p.before.name, p.after.name, p.status) for p in d.pairs] == [
        ("x", "x", "same"),
        ("sigmoid", "neg", "changed"),
        ("neg", "sigmoid", "changed"),
        ("output", "output", "same"),
    ]
    assert d.first_divergence == "neg"
    table = d.table()
    assert not table.loc[1, "allclose"]
    assert table.loc[0, "max_abs_error"] == 0.0


def test_name_alignment_without_provenance():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    d = fxviz.diff(gm, NegSigmSwapXformer(gm).transform())
    statuses = {p.before.name: p.status for p in d.pairs if p.before}
    assert statuses["sigmoid"] == "changed"
    assert "target torch.sigmoid → .sigmoid()" in next(
        p.detail for p in d.pairs if p.before and p.before.name == "sigmoid"
    )


def _remove_clamp(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A pass that deletes the ReLU (clamp) and adds a scale at the end."""
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    graph = gm.graph
    clamp = next(n for n in graph.nodes if n.name == "clamp")
    clamp.replace_all_uses_with(clamp.args[0])
    graph.erase_node(clamp)
    output = next(n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(output):
        scaled = graph.call_function(operator.mul, (output.args[0], 1.0))
    output.args = (scaled,)
    gm.recompile()
    return gm


def test_pass_that_removes_and_adds_nodes():
    before = fxviz.trace(TwoLayerNet(20, 8, 4))
    after = _remove_clamp(before)
    x = torch.randn(3, 20)
    d = fxviz.diff(before, after, x)
    status = {
        (p.before.name if p.before else None, p.after.name if p.after else None): p.status
        for p in d.pairs
    }
    assert status[("clamp", None)] == "removed"
    assert status[(None, "mul")] == "added"
    assert status[("linear2", "linear2")] == "changed"  # its input changed
    assert status[("linear1", "linear1")] == "same"
    assert d.first_divergence == "linear2"
    assert "1 added, 1 removed" in d.summary()
    merged = d.to_dot().source
    assert "removed__clamp" in merged
    assert "diff-removed" in merged
    assert "diff-added" in merged
    assert "diff-changed" in d.to_dot("before").source
    assert "fxviz.GraphDiff" in d._repr_html_()
    with pytest.raises(ValueError, match="unknown view"):
        d.to_dot("sideways")


@pytest.mark.dot
def test_diff_and_torchscript_views_lay_out(scripted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(scripted)
    before = fxviz.trace(TwoLayerNet(20, 8, 4))
    sources = [
        fxviz.to_dot(scripted).source,
        fxviz.diff(scripted, frozen).to_dot().source,
        fxviz.diff(before, _remove_clamp(before), torch.randn(2, 20)).to_dot().source,
    ]
    for source in sources:
        done = subprocess.run(
            ["dot", "-Tsvg"], input=source, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
