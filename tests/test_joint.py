"""trace(..., method="joint"): AOTAutograd's forward and backward graphs, run, recorded,
stepped and diffed with real saved tensors."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
from tests.grad_models import cnn_case, gpt_case


def loss_for(target):
    def loss_fn(out):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))

    return loss_fn


@pytest.fixture(scope="module")
def cnn():
    model, x, target = cnn_case()
    reference = copy.deepcopy(model)
    joint = fxviz.trace(model, x, method="joint")
    return model, reference, joint, x, loss_for(target)


@pytest.mark.parametrize("case", [gpt_case, cnn_case], ids=["gpt", "cnn-batchnorm"])
def test_joint_graph_runs_end_to_end_equal_to_eager(case):
    model, x, target = case()
    loss_fn = loss_for(target)
    reference = copy.deepcopy(model)
    joint = fxviz.trace(model, x, method="joint")
    for a, b in zip(model.buffers(), reference.buffers(), strict=True):
        assert torch.equal(a, b)  # capturing put BatchNorm's statistics back

    run = joint.run(x, backward=loss_fn)
    out = reference(x)  # eager, train mode: updates the reference's running statistics
    params = dict(reference.named_parameters())
    expected = torch.autograd.grad(loss_fn(out), list(params.values()))
    assert torch.equal(run.outputs[0], out)
    assert set(run.grads) == set(params)
    for (name, _), grad in zip(params.items(), expected, strict=True):
        assert torch.equal(run.grads[name], grad), name
    for name, value in run.mutations.items():  # what eager wrote into the buffers
        assert torch.equal(value, dict(reference.named_buffers())[name]), name
    assert all(p.grad is None for p in model.parameters())
    assert len(joint.saved) > 10
    assert (
        joint.saved
        == [n.name for n in joint.backward.graph.nodes if n.op == "placeholder"][: len(joint.saved)]
    )


def test_backward_nodes_link_to_the_forward_nodes_they_differentiate(cnn):
    _, _, joint, _, _ = cnn
    bw_ops = {n.name: n for n in joint.backward.graph.nodes if n.op == "call_function"}
    conv_grads = [n for n, node in bw_ops.items() if "convolution_backward" in str(node.target)]
    assert len(conv_grads) == 3
    for name in conv_grads:
        forward = joint.link(name)
        fw_node = next(n for n in joint.forward.graph.nodes if n.name == forward)
        assert "convolution" in str(fw_node.target)
    # each conv's gradient is linked to a different forward conv, from its own module
    sources = sorted(joint.source(joint.link(n)) for n in conv_grads)
    assert sources == ["conv1", "conv2", "stem_0"]
    bn = [n for n, node in bw_ops.items() if "native_batch_norm_backward" in str(node.target)]
    assert sorted(joint.source(joint.link(n)) for n in bn) == ["bn1", "bn2", "stem_1"]
    # saved tensors are the forward nodes of the same name
    for name in joint.saved:
        assert joint.link(name) == name
    unlinked = [n for n in bw_ops if joint.link(n) is None and bw_ops[n].meta.get("seq_nr")]
    assert unlinked == []


def test_joint_recording_has_both_passes_and_equal_gradients(cnn):
    _, _, joint, x, loss_fn = cnn
    jrec = joint.record(x, backward=loss_fn)
    run = joint.run(x, backward=loss_fn)
    assert jrec.forward.complete
    assert jrec.backward.complete
    for name, grad in run.grads.items():
        assert torch.equal(jrec.grads[name], grad)
    # every saved tensor the backward recording read is the forward's value of that node
    for name in joint.saved:
        assert torch.equal(jrec.backward[name].value, jrec.forward[name].value)
    assert jrec.first_nonfinite() is None


def test_debugger_steps_the_backward_graph_with_breakpoints_and_time_travel(cnn):
    _, _, joint, x, loss_fn = cnn
    inputs = joint.backward_inputs(x, backward=loss_fn)
    expected = joint.backward(*inputs)
    dbg = joint.debugger(x, backward=loss_fn)
    target = next(
        n.name for n in joint.backward.graph.nodes if "native_batch_norm" in str(n.target)
    )
    dbg.break_at(target)
    dbg.continue_()
    assert dbg.current.name == target
    dbg.step()
    grads = dbg.recording[target].value
    dbg.clear_breakpoints()
    dbg.back(3)
    dbg.step(3)
    assert dbg.recording[target].value is grads  # replayed, not run again
    dbg.continue_()
    assert dbg.done
    for got, want in zip(dbg.output, expected, strict=True):
        assert (got is None and want is None) or torch.equal(got, want)


def test_the_first_nan_in_backward_is_traced_to_the_model_node():
    class Norms(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, a, b):
            d = self.proj(a) - self.proj(b)
            return torch.sqrt((d * d).sum(-1))

    model = Norms()
    x = torch.randn(3, 4)
    joint = fxviz.trace(model, x, x.clone(), method="joint")
    jrec = joint.record(x, x.clone(), backward=lambda out: out.mean())
    assert jrec.forward.first_nonfinite() is None
    backward_node, forward_node, model_node = jrec.first_nonfinite()
    assert model_node == "sqrt"
    assert "sqrt" in forward_node
    assert jrec.backward[backward_node].nonfinite_count == 3
    assert all(g.isnan().all() for g in jrec.grads.values())

    dbg = joint.debugger(x, x.clone(), backward=lambda out: out.mean())
    dbg.break_when(fxviz.has_nonfinite)
    stopped = dbg.continue_()
    assert stopped.name == backward_node


def test_diff_of_a_pass_on_the_backward_graph_compares_gradients(cnn):
    _, _, joint, x, loss_fn = cnn
    inputs = joint.backward_inputs(x, backward=loss_fn)

    class DoubleReluGrad(torch.fx.Transformer):  # a wrong pass: doubles one gradient
        def call_function(self, target, args, kwargs):
            out = super().call_function(target, args, kwargs)
            if target is torch.ops.aten.threshold_backward.default:
                return out * 2
            return out

    class SameMath(torch.fx.Transformer):  # a right one: mm(a, b) as matmul(a, b)
        def call_function(self, target, args, kwargs):
            if target is torch.ops.aten.mm.default:
                target = torch.ops.aten.matmul.default
            return super().call_function(target, args, kwargs)

    good = fxviz.diff(joint.backward, fxviz.record(joint.backward, interpreter=SameMath), *inputs)
    assert good.first_divergence is None
    assert any(p.status in ("changed", "replaced") for p in good.pairs)  # mm -> matmul

    bad_gm = fxviz.record(joint.backward, interpreter=DoubleReluGrad)
    bad = fxviz.diff(joint.backward, bad_gm, *inputs)
    relu_grads = [
        n.name for n in joint.backward.graph.nodes if "threshold_backward" in str(n.target)
    ]
    assert bad.first_divergence is not None
    assert joint.link(relu_grads[0]) is not None
    table = bad.table()
    assert not table.loc[table["after"] == "output", "allclose"].iloc[0]  # gradients differ


def test_joint_errors_say_what_to_do():
    with pytest.raises(fxviz.TraceError, match="needs example inputs"):
        fxviz.trace(nn.Linear(2, 2), method="joint")
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(fxviz.TraceError, match="nothing to differentiate"):
        fxviz.trace(frozen, torch.randn(1, 2), method="joint")
    joint = fxviz.trace(nn.Linear(2, 2), torch.randn(1, 2), method="joint")
    with pytest.raises(fxviz.InputError, match="takes 1 input"):
        joint.run()


@pytest.mark.dot
def test_drawing_shows_both_passes_and_the_links_of_a_selection(cnn, tmp_path):
    _, _, joint, x, loss_fn = cnn
    jrec = joint.record(x, backward=loss_fn)
    bn_grad = next(
        n.name for n in joint.backward.graph.nodes if "native_batch_norm" in str(n.target)
    )
    forward = joint.link(bn_grad)
    dot = jrec.to_dot(selected=bn_grad)
    source = dot.source
    assert "cluster_c_forward" in source
    assert "cluster_c_backward" in source
    linked_lines = [line for line in source.splitlines() if "joint-linked" in line]
    assert len(linked_lines) == 1  # the forward node, badged
    assert linked_lines[0].lstrip().startswith(f"fw_{forward} ")
    assert "⇠ differentiated by native_batch" in linked_lines[0]
    assert f"differentiates forward node: {forward}" in source  # the backward tooltip
    svg = fxviz.to_svg(dot)
    assert f"fw_{forward}" in svg
    assert f"bw_{bn_grad}" in svg
    # from the forward side: every backward node linked to that forward node lights up
    linked = [b for b, f in joint.links.items() if f == forward]
    assert len(linked) >= 2
    other = joint.to_dot(selected=forward, side="forward").source
    lit = [line.split()[0] for line in other.splitlines() if "joint-linked" in line]
    assert sorted(lit) == sorted(f"bw_{b}" for b in linked)
    with pytest.raises(fxviz.UnknownNodeError, match="backward"):
        joint.to_dot(selected="no_such_node")

    def undated(page):
        return re.sub(r" · made [^<]*", "", page)

    page = jrec.report()  # the page fxviz.report makes (up to its time stamp)
    assert undated(page) == undated(fxviz.report(jrec, title="fxviz: forward and backward"))


def test_to_dot_and_the_widget_draw_both_passes(cnn):
    _, _, joint, x, loss_fn = cnn
    jrec = joint.record(x, backward=loss_fn)
    source = fxviz.to_dot(jrec).source
    fw_nodes = len(joint.forward.graph.nodes)
    bw_nodes = len(joint.backward.graph.nodes)
    assert source.count("fx-node") >= fw_nodes + bw_nodes
    view = fxviz.show(jrec)
    assert "cluster_c_forward" in view.dot
    assert "cluster_c_backward" in view.dot
    assert len(view.rows) == fw_nodes + bw_nodes  # both passes' records in the table


def test_a_parameter_named_like_an_input_is_still_a_parameter():
    class Proj(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_proj = nn.Linear(3, 2)

        def forward(self, x):
            return self.input_proj(x).tanh()

    model, x = Proj(), torch.randn(4, 3)
    joint = fxviz.trace(model, x, method="joint")
    run = joint.run(x)
    (expected,) = torch.autograd.grad(model(x).sum(), [model.input_proj.weight])
    assert torch.equal(run.grads["input_proj.weight"], expected)


def _page_data(page: str) -> dict:
    return json.loads(re.search(r'id="fxviz-data">(.*?)</script>', page, re.S).group(1))


@pytest.mark.parametrize("recorded", [False, True], ids=["graph", "recording"])
def test_report_of_a_joint_graph_shows_both_passes_and_their_links(tmp_path, recorded):
    from html.parser import HTMLParser

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = torch.randn(2, 4)
    joint = fxviz.trace(model, x, method="joint")
    obj = joint.record(x) if recorded else joint
    path = tmp_path / "joint.html"
    assert fxviz.report(obj, path) is None
    page = path.read_text(encoding="utf-8")
    HTMLParser().feed(page)  # well-formed enough to parse
    data = _page_data(page)
    assert "cluster_c_forward" in data["dot"]
    assert "cluster_c_backward" in data["dot"]
    drawn = len(joint.forward.graph.nodes) + len(joint.backward.graph.nodes)
    assert len(data["inspectors"]) == drawn  # one per node of either pass, none lost
    # a name in both passes (relu, a saved tensor): each side keyed as the page selects it
    units = data["units"]
    twice = {k for k in ("fw_relu", "bw_relu") if units.get("relu") != k}
    assert len(twice) == 1
    assert twice <= set(data["inspectors"])
    assert data["inspectors"]["threshold_backward"]["name"] == "threshold_backward"
    fields = dict(map(tuple, data["inspectors"]["threshold_backward"]["fields"]))
    assert fields["differentiates"] == f"relu (model node {joint.source('relu')})"
    forward_fields = dict(map(tuple, data["inspectors"]["addmm"]["fields"]))
    assert "t_6" in forward_fields["differentiated by"]
    assert ("mean" in str(data["inspectors"]["addmm"])) == recorded  # recorded statistics
    assert "<th>differentiates forward node</th>" in page
    assert "<td>threshold_backward</td><td>relu</td>" in page


class _Aliases(nn.Module):
    """Outputs that are views of another output (CLIP's logits_per_image is
    logits_per_text.t()), of an intermediate and of an input: AOTAutograd gives them no
    tangent and makes them again as views outside its graphs."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 6)
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        logits = self.proj(x) * self.scale.exp()
        hidden = torch.tanh(logits)
        return {
            "logits": logits,
            "logits_t": logits.t(),  # a view of another output
            "first": hidden[:, :3],  # views of an intermediate no output holds whole
            "last": hidden[:, 3:].t(),
            "flat_x": x.view(-1),  # a view of the input
        }


def test_joint_gradients_of_outputs_that_view_other_outputs_or_inputs_are_eagers():
    torch.manual_seed(0)
    model = _Aliases()
    x = torch.randn(2, 4, requires_grad=True)
    weights = {}

    def loss_fn(out):  # a different weight on every element, so no two views agree by chance
        for key, t in out.items():
            weights.setdefault(key, torch.randn(t.shape))
        return sum((t * weights[key]).sum() for key, t in out.items())

    joint = fxviz.trace(model, x, method="joint")
    params = dict(model.named_parameters())
    names = [*params, "input_0"]
    grads = torch.autograd.grad(loss_fn(model(x)), [*params.values(), x])
    want = dict(zip(names, grads, strict=True))
    run = joint.run(x, backward=loss_fn)
    for name, g in want.items():
        torch.testing.assert_close(run.grads[name], g, rtol=0, atol=1e-6, msg=name)
    with torch.no_grad():  # a recording differentiates its seeds whatever the grad mode
        jrec = fxviz.record(joint, x, backward=loss_fn)
    for name, g in want.items():
        torch.testing.assert_close(jrec.grads[name], g, rtol=0, atol=1e-6, msg=name)
    # output gradients given, one a tensor, as eager's backward(grad_tensors) takes them
    given = [torch.randn(t.shape) for t in model(x).values()]
    out = model(x)
    want = torch.autograd.grad(list(out.values()), [*params.values(), x], given)
    run = joint.run(x, backward=given)
    for name, g in zip(names, want, strict=True):
        torch.testing.assert_close(run.grads[name], g, rtol=0, atol=1e-6, msg=name)
