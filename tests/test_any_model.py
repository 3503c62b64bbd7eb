"""Any model that runs records exactly: data-dependent ``if``, detection loops, forks,
and Hugging Face models with their default config (caches in the output) and keyword
inputs. Dynamo captures take a few seconds, so each model is captured once a module."""

from __future__ import annotations

import re

import pytest
import torch

import fxviz
from fxviz._capture import Capture, tensors_in
from tests.any_model.models import Detector, Forked, ValueIf, hugging_face

# torch.jit.fork/script are deprecated upstream; the forked model uses them on purpose
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*deprecated:DeprecationWarning")


def same_output(got, want) -> bool:
    """Same type and structure (Hugging Face outputs, caches) and equal tensors."""
    a, b = tensors_in(got), tensors_in(want)
    return (
        type(got) is type(want)
        and len(a) == len(b) > 0
        and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b, strict=True))
    )


def _case(name):
    torch.manual_seed(1 if name == "detector" else 0)  # seed 1: two boxes pass the score
    if name == "value_if":
        return ValueIf(), (torch.randn(2, 4),), {}
    if name == "detector":
        return Detector(), (torch.randn(6, 8),), {}
    if name == "forked":
        return Forked(), (torch.randn(2, 4),), {}
    model, kwargs = hugging_face(name)
    return model, (), kwargs


CASES = ["value_if", "detector", "forked", "gpt2", "bert", "t5", "llama"]
# Data-dependent forwards: Dynamo; a forking one it runs as Python: one real run. The
# Hugging Face models export (a language model's cache is rebuilt from the graph's tensors)
EXPECTED_METHOD = {"value_if": "dynamo", "detector": "dynamo", "forked": "real"}


@pytest.fixture(scope="module", params=CASES)
def recorded(request):
    from fxviz._capture._auto import forget

    forget()  # auto's memory of a class's method: another test's model may have taught it
    model, args, kwargs = _case(request.param)
    with torch.no_grad():
        want = model(*args, **kwargs)
        rec = fxviz.record(model, *args, **kwargs)
    return request.param, model, args, kwargs, want, rec


def test_records_exactly_what_the_model_returns(recorded):
    name, _, _, _, want, rec = recorded
    assert rec.complete
    assert rec.method == EXPECTED_METHOD.get(name, "export")
    assert isinstance(rec.graph_module, Capture) == (rec.method in ("dynamo", "real"))
    assert same_output(rec.output, want)
    names = list(rec)
    assert len(names) == len(set(names))
    if rec.method == "dynamo":  # with several graph calls, each node says which it came from
        calls = rec.graph_module.calls
        graph_nodes = [
            n
            for n in rec.graph_module.graph.nodes
            if "fxviz_graph" in n.meta and n.op != "get_attr"
        ]
        assert graph_nodes
        prefixed = [re.match(r"g\d+(r\d+)?_", n.name) is not None for n in graph_nodes]
        assert all(prefixed) if len(calls) > 1 else not any(prefixed), [n.name for n in graph_nodes]


def test_keyword_inputs_are_named_in_the_recording(recorded):
    name, _, _args, kwargs, _, rec = recorded
    placeholders = [r.name for r in rec.values() if r.op == "placeholder"]
    assert placeholders == (list(kwargs) if kwargs else ["x" if name != "detector" else "feats"])


def test_a_capture_replays_only_its_own_inputs(recorded):
    _, model, args, kwargs, _, rec = recorded
    changed = {k: v + 1 if v.is_floating_point() else (v + 1) % 100 for k, v in kwargs.items()}
    new_args = tuple(a + 1 for a in args)
    if rec.method == "export":  # one graph for any input: it follows the new ones
        with torch.no_grad():
            again = fxviz.record(rec.graph_module, *new_args, **changed)
            assert same_output(again.output, model(*new_args, **changed))
        return
    with pytest.raises(fxviz.InputError, match="a capture holds one run"):
        fxviz.record(rec.graph_module, *new_args, **changed)


def test_debugger_takes_keyword_inputs_and_steps_to_the_end(recorded):
    _, _, args, kwargs, want, rec = recorded
    with torch.no_grad():
        dbg = fxviz.Debugger(rec.graph_module, *args, **kwargs)
        dbg.step()
        dbg.continue_()
    assert dbg.done
    placeholders = [r.name for r in dbg.recording.values() if r.op == "placeholder"]
    assert placeholders == (list(kwargs) if kwargs else placeholders[:1])
    assert same_output(dbg.output, want)


def test_value_if_shows_the_break_and_its_line():
    model, args, _ = _case("value_if")
    capture = fxviz.trace(model, *args)
    first = capture.breaks[0]
    assert first.code == "if h.sum() > 0:"
    assert first.file.endswith("models.py")
    assert first.line > 0
    assert first.node == "python0"
    assert [c.prefix for c in capture.calls] == ["g0_", "g1_"]


def test_detector_records_every_call_of_the_loop_in_order():
    model, args, _ = _case("detector")
    with torch.no_grad():
        boxes = model(*args).shape[0]
        capture = fxviz.trace(model, *args)
    assert boxes >= 2  # the data holds a loop of several boxes
    head_calls = capture.calls[2:]  # after the backbone graph and the `keep` graph
    assert len(head_calls) == boxes
    assert len(capture.calls) == len(capture.breaks)  # Python after every call, incl. the loop
    # the box score is a Python float: Dynamo specialises on it and compiles again
    assert len({c.graph for c in head_calls}) == boxes
    assert capture.recompiles  # the second box compiled the head again
    assert "compiled again" in capture.recompiles[0]
    assert capture.guards  # what Dynamo checks before reusing a graph
    # Python ran nonzero itself, the loop then called the head: where each stretch ended
    assert capture.breaks[1].until.endswith("return self.fc(feature).sigmoid() * score")
    reasons = " ".join(b.reason for b in capture.breaks)
    assert "Dynamic shape operator" in reasons
    assert "keep.tolist()" in " ".join(b.code for b in capture.breaks)


def test_fork_branches_run_side_by_side_in_one_real_graph():
    model, args, _ = _case("forked")
    capture = fxviz.trace(model, *args)
    assert capture.meta["fxviz_method"] == "real"
    tanh = [n for n in capture.graph.nodes if "tanh" in str(n.target)]
    assert len(tanh) == 2  # the eager branch and the scripted one
    add = next(n for n in capture.graph.nodes if "add" in str(n.target))
    assert set(add.all_input_nodes) == set(tanh)  # joined only at the wait: parallel
    assert not (set(tanh[0].all_input_nodes) & {tanh[1]})


def test_real_method_follows_the_branch_taken_and_keeps_modules():
    model, args, _ = _case("value_if")
    capture = fxviz.trace(model, *args, method="real")
    taken = "relu" if model.a(args[0]).sum() > 0 else "neg"
    assert any(taken in str(n.target) for n in capture.graph.nodes)
    stacks = [n.meta.get("nn_module_stack") for n in capture.graph.nodes]
    modules = {list(stack.values())[-1][0] for stack in stacks if stack}
    assert {"a", "b"} <= modules
    assert torch.equal(fxviz.record(capture, *args).output, model(*args))


def test_debugger_steps_across_a_graph_break_and_back():
    model, args, _ = _case("value_if")
    dbg = fxviz.Debugger(model, *args)
    dbg.break_at("g1_linear")
    assert dbg.continue_().name == "python0"  # the last node run: Python between graphs
    assert dbg.current.name == "g1_linear"
    dbg.back(2)
    assert dbg.current.name not in ("python0", "g1_linear")
    while not dbg.done:
        dbg.step()
    assert torch.equal(dbg.output, model(*args))


def test_shapes_fake_on_captures():
    model, args, _ = _case("value_if")
    rep = fxviz.shapes(model, *args, mode="fake")
    assert rep["g1_linear"].shape == (2, 4)
    gpt2, kwargs = hugging_face("gpt2")
    with torch.no_grad():
        rep = fxviz.shapes(gpt2, mode="fake", **kwargs)
    logits = gpt2(**kwargs).logits.shape
    assert any(r.shape == tuple(logits) for r in rep.recording.values())


def test_drawing_frames_each_graph_and_marks_the_breaks():
    model, args, _ = _case("detector")
    rec = fxviz.record(model, *args)
    dot = fxviz.to_dot(rec).source
    assert 'label="g0 · graph 0 (dynamo)"' in dot
    for call in rec.graph_module.calls:
        frame = call.prefix.rstrip("_")
        assert f'label="{frame} · graph {call.graph} (dynamo)"' in dot
    assert "Dynamic shape operator" in dot
    assert "models.py:" in dot
    page = fxviz.report(rec)
    assert "captured by: dynamo" in page
    assert "break python0: Dynamic shape operator" in page


def test_keyword_inputs_for_symbolic_graphs_and_none_in_reports():
    class Masked(torch.nn.Module):
        def forward(self, x, mask=None, scale: float = 2.0):
            return x * scale if mask is None else x * mask * scale

    x = torch.ones(2)
    rec = fxviz.record(Masked(), x, mask=torch.zeros(2))
    assert torch.equal(rec.output, torch.zeros(2))
    assert rec.method == "symbolic"
    with pytest.raises(fxviz.InputError, match="unknown keyword input"):
        fxviz.record(Masked(), x, musk=torch.zeros(2))
    page = fxviz.report(fxviz.record(lambda x, y: x * 2, x, None))
    assert "y: None" in page
    assert "None[]" not in page


def test_diff_of_two_captures_of_one_run():
    model, args, _ = _case("value_if")
    dynamo, real = fxviz.trace(model, *args), fxviz.trace(model, *args, method="real")
    diff = fxviz.diff(dynamo, real, *args)
    assert diff.merged().nodes  # both ran on the same inputs and were drawn together


class _FailsInGraphOne(torch.fx.Interpreter):
    """A user's interpreter that raises on the first linear of the second graph."""

    def run_node(self, n):
        if n.name == "g1_linear":
            raise RuntimeError("linear refused")
        return super().run_node(n)


def test_post_mortem_in_a_later_graph_and_back_across_the_break():
    model, args, _ = _case("value_if")
    capture = fxviz.trace(model, *args)
    assert capture.meta["fxviz_method"] == "dynamo"
    dbg = fxviz.Debugger(capture, *args, interpreter=_FailsInGraphOne)
    failed = dbg.continue_()
    assert failed.name == "g1_linear"
    assert "linear refused" in str(dbg.error)
    names = [r.name for r in dbg.recording.values()]
    assert names.index("python0") < names.index(failed.name)  # it ran across the break
    dbg.run_to("python0")
    assert dbg.current.name == "python0"
    assert dbg.inputs()["g0_h"].shape == (2, 4)  # graph 0's value, seen from the break


def test_debug_app_takes_keyword_inputs():
    class Masked(torch.nn.Module):
        def forward(self, x, mask=None):
            return x if mask is None else x * mask

    app = fxviz.debug(Masked(), torch.ones(2), mask=torch.zeros(2))
    app.debugger.continue_()
    assert torch.equal(app.debugger.output, torch.zeros(2))


class _NoisyNorm(torch.nn.Module):
    """Batch norm in training mode and dropout, behind a tensor condition."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        x = self.drop(self.norm(x))
        if x.sum() > 0:
            return x * 2
        return x


@pytest.mark.parametrize("method", ["dynamo", "real"])
def test_recording_a_capture_is_the_run_the_eager_model_makes(method):
    x = torch.randn(8, 4)
    eager, captured = _NoisyNorm().train(), _NoisyNorm().train()
    captured.load_state_dict(eager.state_dict())
    torch.manual_seed(3)
    want = eager(x)
    torch.manual_seed(3)
    rec = fxviz.record(fxviz.trace(captured, x, method=method), x)
    assert torch.equal(rec.output, want)  # same dropout mask
    # the running statistics moved once, as in the eager run, not once a run
    assert torch.equal(captured.norm.running_mean, eager.norm.running_mean)
    assert captured.norm.num_batches_tracked.item() == 1


@torch.compiler.disable
def _made_in_python(x):
    return x.clone()  # Dynamo leaves this function to Python: a value no graph made


class _WritesIntoPythonValues(torch.nn.Module):
    def forward(self, x):
        z = _made_in_python(x)
        z.add_(x * 2)  # in place, inside a graph, on the value Python produced
        return z.relu()


def test_recording_twice_gives_the_same_run():
    model, x = _WritesIntoPythonValues(), torch.randn(3)
    capture = fxviz.trace(model, x, method="dynamo")
    assert "python0" in {n.name for n in capture.graph.nodes}
    first = fxviz.record(capture, x)
    second = fxviz.record(capture, x)
    for a, b in zip(first.values(), second.values(), strict=True):
        if a.kept and isinstance(a.value, torch.Tensor):
            assert torch.equal(a.value, b.value), a.name
    assert torch.equal(second.output, model(x))
