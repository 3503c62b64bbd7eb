"""fxviz.trace: modules, functions, GraphModules and exported programs."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import fxviz


class Branchy(nn.Module):
    """Data-dependent Python control flow: symbolic tracing cannot follow it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:  # shape-dependent: export specialises it
            return self.lin(x).relu()
        return self.lin(x)


class ValueBranch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # value-dependent: neither tracer can capture it
            return x * 2
        return x


def test_module_is_traced_symbolically(two_layer_net, x20):
    gm = fxviz.trace(two_layer_net)
    assert isinstance(gm, torch.fx.GraphModule)
    assert [n.name for n in gm.graph.nodes] == ["x", "linear1", "clamp", "linear2", "output"]
    assert torch.equal(gm(x20), two_layer_net(x20))


def test_graph_module_is_returned_as_is(two_layer_net):
    gm = fxviz.trace(two_layer_net)
    assert fxviz.trace(gm) is gm


def test_plain_function():
    gm = fxviz.trace(lambda a, b: torch.relu(a) * b)
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(gm(a, b), torch.relu(a) * b)


def test_exported_program_gives_its_runnable_module(two_layer_net, x20):
    program = torch.export.export(two_layer_net, (x20,))
    gm = fxviz.trace(program)
    assert torch.allclose(gm(x20), two_layer_net(x20))
    assert any("aten.linear" in str(n.target) for n in gm.graph.nodes)


def test_export_method_and_auto_fallback():
    model, x = Branchy(), torch.randn(4, 3)
    with pytest.raises(fxviz.TraceError):
        fxviz.trace(model, method="symbolic")
    gm = fxviz.trace(model, x)  # auto: symbolic fails, export succeeds
    assert torch.allclose(gm(x), model(x))
    assert torch.allclose(fxviz.trace(model, x, method="export")(x), model(x))


def test_trace_error_quotes_the_offending_line_and_says_what_to_try():
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(Branchy())
    message = str(info.value)
    assert "if x.shape[0] > 1:" in message
    assert "test_capture.py" in message
    assert "method='export'" in message
    assert "concrete_args" in message
    assert isinstance(info.value, RuntimeError)


def test_auto_captures_value_dependent_control_flow_by_running_it():
    model, x = ValueBranch(), torch.randn(2)
    gm = fxviz.trace(model, x)  # symbolic and export fail; Dynamo holds it
    assert gm.meta["fxviz_method"] == "dynamo"
    assert [b.code for b in gm.breaks][:1] == [
        "if x.sum() > 0:  # value-dependent: neither tracer can capture it"
    ]
    assert torch.equal(gm(x), model(x))


def test_a_tensor_condition_gets_capture_advice_not_concrete_args():
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(ValueBranch(), torch.randn(2), method="symbolic")
    message = str(info.value)
    assert "if x.sum() > 0:" in message
    assert "method='dynamo'" in message
    assert "concrete_args" not in message


class Broken(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            x = x * 2
        return x @ torch.ones(5, 5)  # wrong size for a (2, 3) input: nothing can run it


def test_auto_names_every_method_tried_when_nothing_holds_the_model():
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(Broken(), torch.ones(2, 3))
    message = str(info.value)
    for how in ("torch.fx.symbolic_trace", "torch.export.export", "Dynamo", "real run"):
        assert how in message
    assert "return x @ torch.ones(5, 5)" in message
    assert "If it raises too, the error is the model's" in message


def test_a_capture_that_fails_where_the_model_runs_is_not_blamed_on_the_model():
    class SparseMatmul(nn.Module):
        def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return torch.sparse.mm(a, x)

    a, x = torch.eye(3).to_sparse_csr(), torch.randn(3, 2)
    with pytest.raises(fxviz.TraceError) as info:  # make_fx reads a CSR tensor's strides
        fxviz.trace(SparseMatmul(), a, x, method="real")
    message = str(info.value)
    assert "do not have strides" in message
    assert "if it runs, capture it with method='dynamo' or method='auto'" in message
    rec = fxviz.record(SparseMatmul(), a, x)  # and auto does hold it
    assert torch.equal(rec.output, SparseMatmul()(a, x))


def test_script_modules_point_to_the_torchscript_view():
    with pytest.raises(fxviz.TraceError, match="TorchScript view"):
        fxviz.trace(torch.jit.script(nn.Linear(2, 2)))


def test_user_frames_compare_path_components(tmp_path):
    import os

    from fxviz._capture import is_user_file

    torch_dir = os.path.dirname(torch.__file__)
    assert not is_user_file(os.path.join(torch_dir, "nn", "functional.py"))
    assert is_user_file(torch_dir + "vision" + os.sep + "ops" + os.sep + "boxes.py")
    assert is_user_file(str(tmp_path / "model.py"))


def test_export_needs_inputs_and_methods_are_checked():
    with pytest.raises(fxviz.TraceError, match="needs example inputs"):
        fxviz.trace(Branchy(), method="export")
    with pytest.raises(fxviz.TraceError, match="needs its inputs"):
        fxviz.trace(Branchy(), method="dynamo")
    with pytest.raises(ValueError, match="unknown method: 'jit'"):
        fxviz.trace(Branchy(), method="jit")
    with pytest.raises(fxviz.TraceError, match="cannot trace an object of type int"):
        fxviz.trace(3)


def test_concrete_args_specialise_a_flag():
    def f(x, double):
        return x * 2 if double else x

    gm = fxviz.trace(f, concrete_args={"double": True})
    assert torch.equal(gm(torch.ones(2), True), torch.full((2,), 2.0))
    assert "mul" in [n.name for n in gm.graph.nodes]  # the branch taken was traced


class OptionalMask(nn.Module):
    """The commonest optional input: ``mask=None``, used only when given."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.lin(x)
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return y


def test_an_input_left_to_its_none_default_is_traced_as_none_not_as_a_tensor():
    model, x = OptionalMask(), torch.randn(2, 4)
    mask = x > 0
    # symbolic tracing hands mask a Proxy: without care, the graph takes the masked branch
    rec = fxviz.record(model, x)
    assert rec.graph_module.meta["fxviz_method"] == "symbolic"
    assert torch.equal(rec.output, model(x))
    assert "masked_fill" not in [n.name for n in rec.graph_module.graph.nodes]
    # given None by keyword, and bound by its own name on the captured graph
    gm = fxviz.trace(model, x, mask=None)
    assert torch.equal(fxviz.record(gm, x, mask=None).output, model(x))
    # a call that passes the mask captures the masked branch
    rec = fxviz.record(model, x, mask)
    assert torch.equal(rec.output, model(x, mask))
    assert "masked_fill" in [n.name for n in rec.graph_module.graph.nodes]
    # the None graph refuses a mask by name rather than ignoring it
    with pytest.raises(fxviz.FxvizError, match="mask has been specialized"):
        fxviz.record(gm, x, mask=mask)
    # without example inputs there is no call to follow: mask stays an input
    assert "masked_fill" in [n.name for n in fxviz.trace(model).graph.nodes]


class NoGradTeacher(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.teacher, self.student = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = self.teacher(x)
        return (self.student(x) * target).sum()


class AutocastRegion(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lin(x)


class DrawsNoise(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + torch.rand(1) + torch.randn_like(x)


class KeepsFloat32(nn.Module):
    """A region that changes nothing outside autocast (rotary embeddings do this)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            return self.lin(x.float())


class ReadsKwargs(nn.Module):
    def forward(self, x: torch.Tensor, **kw: torch.Tensor) -> torch.Tensor:
        mask = kw.get("mask")
        return x if mask is None else x * mask


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (AutocastRegion, "torch.autocast"),
        (KeepsFloat32, "torch.autocast"),
        (DrawsNoise, "draws random numbers"),
        (ReadsKwargs, r"reads \*\*kw"),
    ],
)
def test_python_that_symbolic_tracing_runs_once_sends_auto_to_export(model, why):
    torch.manual_seed(0)
    m, x = model(), torch.randn(2, 4)
    with pytest.raises(fxviz.TraceError, match=why):
        fxviz.trace(m, x, method="symbolic")
    torch.manual_seed(1)
    expected, after = m(x), torch.random.get_rng_state()
    torch.manual_seed(1)
    rec = fxviz.record(m, x)
    assert rec.graph_module.meta["fxviz_method"] == "export"
    assert torch.equal(rec.output, expected)
    assert rec.output.dtype == expected.dtype
    assert torch.equal(torch.random.get_rng_state(), after)  # the stream moved as a call moves it


def test_keyword_inputs_forward_packs_reach_it_as_the_call_gives_them():
    x, mask = torch.randn(2, 4), torch.full((2, 4), 2.0)
    for kwargs in ({}, {"mask": mask}, {"mask": None}):
        rec = fxviz.record(ReadsKwargs(), x, **kwargs)
        assert torch.equal(rec.output, ReadsKwargs()(x, **kwargs))


def test_a_draw_from_a_generator_the_model_holds_is_drawn_on_every_record():
    class OwnNoise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.g = torch.Generator().manual_seed(5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.randn(4, generator=self.g)

    x = torch.zeros(3, 4)
    eager, recorded = OwnNoise(), OwnNoise()
    with pytest.raises(fxviz.TraceError, match="draws random numbers"):
        fxviz.trace(recorded, x, method="symbolic")
    for _ in range(3):  # the refused trace put the generator back: the same stream
        assert torch.equal(fxviz.record(recorded, x).output, eager(x))


class _Settings:
    pass


_NOISE = torch.Generator()


@pytest.mark.parametrize("where", ["list", "config", "global"])
def test_a_generator_forward_reaches_without_an_argument_is_watched_too(where):
    class HeldNoise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gens, self.settings = [torch.Generator()], _Settings()
            self.settings.g = torch.Generator()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            g = {"list": self.gens[0], "config": self.settings.g, "global": _NOISE}[where]
            return x + torch.randn(4, generator=g)

    model = HeldNoise()
    with pytest.raises(fxviz.TraceError, match="draws random numbers"):
        fxviz.trace(model, method="symbolic")
    gm = fxviz.trace(model, torch.zeros(2, 4))
    assert not torch.equal(gm(torch.zeros(2, 4)), gm(torch.zeros(2, 4)))  # drawn each run


def test_an_inference_mode_region_is_not_exported_away():
    class InferenceRegion(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                y = self.lin(x)
            return y.clone() * 2

    model, x = InferenceRegion(), torch.randn(3, 4)
    with pytest.raises(fxviz.TraceError, match=r"inference_mode\(\) \(node 'linear'"):
        fxviz.trace(model, x, method="export")
    expected = model(x)
    rec = fxviz.record(model, x)
    assert rec.method == "dynamo"
    assert torch.equal(rec.output, expected)
    assert rec.output.requires_grad is expected.requires_grad is False


def test_inputs_made_under_inference_mode_are_no_region_of_forward():
    with torch.inference_mode():
        x = torch.randn(2, 4)  # data prepared under inference_mode
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with torch.no_grad():
        gm = fxviz.trace(model, x.view(2, 4), method="export")  # a view of it: inference too
        assert torch.equal(fxviz.record(gm, x).output, model(x))


def test_a_forward_that_indexes_its_star_args_stays_symbolic():
    class StarArgs(nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return xs[0] * 2 + xs[1]

    a, b = torch.randn(3), torch.randn(3)
    rec = fxviz.record(StarArgs(), a, b)
    assert rec.method == "symbolic"
    assert torch.equal(rec.output, a * 2 + b)


def test_a_capture_is_made_again_under_the_callers_autocast():
    class AutocastBranch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.float() * 2 if torch.is_autocast_enabled("cpu") else x * 3

    model, x = AutocastBranch(), torch.randn(2, 4)
    assert torch.equal(fxviz.record(model, x).output, x * 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(fxviz.record(model, x).output, model(x))
    assert torch.equal(fxviz.record(model, x).output, x * 3)


@pytest.mark.parametrize("caller_grad", [True, False])
def test_a_no_grad_region_is_kept_in_the_symbolic_graph(caller_grad):
    torch.manual_seed(0)
    model, x = NoGradTeacher(), torch.randn(2, 4)
    with torch.set_grad_enabled(caller_grad):
        expected = model(x)
        rec = fxviz.record(model, x, backward=caller_grad)
        assert torch.is_grad_enabled() == caller_grad  # the caller's mode, after the graph
    assert rec.graph_module.meta["fxviz_method"] == "symbolic"
    assert torch.equal(rec.output, expected)
    assert rec.output.requires_grad == expected.requires_grad == caller_grad
    assert rec["teacher"].outputs[0].requires_grad is False  # ran without gradients
    if caller_grad:  # no gradient reaches the teacher, as in eager
        assert rec.gradients.parameters.get("teacher.weight") is None
        assert rec.gradients.parameters["student.weight"] is not None


def test_a_forward_that_turns_gradients_off_for_good_is_followed():
    class TurnsOff(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            torch.set_grad_enabled(False)  # no context: the caller's mode stays off
            return y * 2

    x = torch.randn(3, 4)
    try:
        gm = fxviz.trace(TurnsOff(), x)
        assert torch.is_grad_enabled()  # a trace is no call
        expected = TurnsOff()(x)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        rec = fxviz.record(gm, x)
        assert not torch.is_grad_enabled()  # as the call left it
        assert rec.output.requires_grad is expected.requires_grad is False
    finally:
        torch.set_grad_enabled(True)


def test_a_failure_inside_a_no_grad_region_leaves_the_grad_mode_as_it_was():
    class FailsInside(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                y = x @ torch.ones(5, 5)  # wrong size: raises inside the region
            return y

    gm = fxviz.trace(FailsInside())
    for engine in (None, torch.fx.Interpreter):
        with pytest.raises(fxviz.NodeError):
            fxviz.record(gm, torch.ones(2, 3), interpreter=engine)
        assert torch.is_grad_enabled()


def test_auto_tries_the_method_that_held_the_class_before_the_costly_ones(monkeypatch):
    from fxviz._capture._auto import forget

    forget()
    x = torch.randn(2)
    first = fxviz.trace(ValueBranch(), x)  # symbolic and export fail; Dynamo holds it
    assert first.meta["fxviz_method"] == "dynamo"
    tried = _methods_tried(monkeypatch)
    model = ValueBranch()  # another model of the class: export's failure is not paid again
    y = torch.randn(2)
    gm = fxviz.trace(model, y)
    assert tried == ["symbolic", "dynamo"]
    assert gm.meta["fxviz_method"] == "dynamo"
    assert torch.equal(gm(y), model(y))
    tried.clear()
    fxviz.trace(model, x=x)  # inputs of another structure (a keyword): the whole order
    assert tried[:2] == ["symbolic", "export"]
    forget()


def test_auto_falls_back_to_every_method_when_the_remembered_one_fails():
    from fxviz._capture._auto import forget, remember

    remember(Broken(), ((torch.ones(2, 3),), {}), "dynamo")
    with pytest.raises(fxviz.TraceError) as info:
        fxviz.trace(Broken(), torch.ones(2, 3))
    message = str(info.value)
    places = [
        message.index(how) for how in ("symbolic_trace", "export.export", "Dynamo", "real run")
    ]
    assert places == sorted(places)  # reported in auto's order
    forget()


def test_a_captures_python_segments_are_known_code_that_writes_nothing():
    """The recorder settles no statistics and copies nothing before a ``python`` node:
    it replays values the capture holds and never writes its inputs."""
    from fxviz._capture._segments import PythonSegment
    from fxviz._record._writes import runs_unknown_code, written_locations

    model, x = ValueBranch(), torch.randn(3)
    gm = fxviz.trace(model, x, method="dynamo")
    python = [n for n in gm.graph.nodes if isinstance(n.target, PythonSegment)]
    assert [n.name for n in python][-1] == "python_return"
    assert not any(runs_unknown_code(n, {}) or written_locations(n, {}) for n in python)
    rec = fxviz.record(model, x)
    assert torch.equal(rec.output, model(x))
    for r in rec.values():  # statistics taken on first read, after the run: still right
        if isinstance(r.value, torch.Tensor) and r.value.is_floating_point():
            assert r.outputs[0].max == r.value.max().item()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_language_model_whose_output_holds_a_cache_is_exported_and_its_output_rebuilt(
    monkeypatch,
):
    # a DynamicCache holds its tensors in plain attributes, which pytree cannot flatten:
    # the graph returns them flat and its last node puts them back into the structure
    import transformers as tf

    from fxviz._capture._auto import forget

    forget()
    torch.manual_seed(0)
    config = tf.GPT2Config(vocab_size=50, n_layer=1, n_embd=16, n_head=2, n_positions=16)
    model, ids = tf.GPT2LMHeadModel(config).eval(), torch.randint(0, 50, (1, 5))
    tried = _methods_tried(monkeypatch)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    before = torch.random.get_rng_state()
    rec = fxviz.record(model, input_ids=ids)
    assert tried == ["symbolic", "export"]
    assert rec.method == "export"
    assert "forward" not in vars(model)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    want = model(input_ids=ids)
    got = rec.output
    assert type(got) is type(want)
    assert type(got.past_key_values) is type(want.past_key_values)
    assert torch.equal(got.logits, want.logits)
    layer, expected = got.past_key_values.layers[0], want.past_key_values.layers[0]
    assert torch.equal(layer.keys, expected.keys)
    assert torch.equal(layer.values, expected.values)
    assert got.past_key_values.get_seq_length() == 5
    again = fxviz.record(model, input_ids=ids).output  # a new object, with new tensors
    assert again.past_key_values is not got.past_key_values
    assert again.past_key_values.layers[0].keys is not layer.keys
    forget()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_exported_capture_with_a_rebuilt_output_lets_go_of_its_model():
    # the rebuilt output's structure and the gradient check stay with the capture (kept
    # by the captures' cache): neither may hold the model
    import gc
    import weakref

    import transformers as tf

    config = tf.GPT2Config(vocab_size=50, n_layer=1, n_embd=16, n_head=2, n_positions=16)
    model, ids = tf.GPT2LMHeadModel(config).eval(), torch.randint(0, 50, (1, 5))
    rec = fxviz.record(model, input_ids=ids, method="export")
    assert type(rec.output.past_key_values).__name__ == "DynamicCache"
    gone = weakref.ref(model)
    del model, rec
    gc.collect()
    assert gone() is None


class _Cache:
    def __init__(self, keys: list[torch.Tensor], length: int) -> None:
        self.keys, self.length = keys, length


class ReturnsACache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        return y.relu(), _Cache([y, y * 2, x], x.shape[0])


def test_an_output_object_pytree_cannot_hold_is_rebuilt_with_positional_inputs():
    model, x = ReturnsACache(), torch.randn(3, 4)
    gm = fxviz.trace(model, x, method="export")
    assert "forward" not in vars(model)
    out, cache = gm(x)
    want, want_cache = model(x)
    assert torch.equal(out, want)
    assert all(torch.equal(a, b) for a, b in zip(cache.keys, want_cache.keys, strict=True))
    assert cache.keys[0] is not cache.keys[1]
    assert cache.keys[2] is x  # an input stays itself
    assert cache.length == 3
    rec = fxviz.record(model, x, method="export")
    assert torch.equal(rec.output[1].keys[1], want_cache.keys[1])
    assert rec["unflatten"].op == "call_function"


class _Slotted:
    __slots__ = ("n", "t")

    def __init__(self, t: torch.Tensor, n: int) -> None:
        self.t, self.n = t, n


class _Tagged(tuple):
    """A tuple subclass with attributes of its own."""


class ReturnsHiddenTensors(nn.Module):
    """Tensors where only an object's slots or a tuple subclass's attributes hold them."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        tagged = _Tagged([x * self.w])
        tagged.extra, tagged.flag = x * 3, "hi"
        return {"y": x + 1, "h": _Cache([_Slotted(x * 2, 1)], 0), "tagged": tagged}


def test_tensors_in_slots_and_tuple_subclass_attributes_are_rebuilt_after_export():
    model, x = ReturnsHiddenTensors(), torch.randn(3)
    want = model(x)
    for method in ("export", "auto"):
        out = fxviz.record(model, x, method=method).output
        slotted = out["h"].keys[0]
        assert type(slotted.t) is torch.Tensor  # not the fake tensor of the trace
        assert torch.equal(slotted.t, want["h"].keys[0].t)
        assert slotted.n == 1
        assert type(out["tagged"]) is _Tagged
        assert torch.equal(out["tagged"][0], want["tagged"][0])
        assert torch.equal(out["tagged"].extra, want["tagged"].extra)
        assert out["tagged"].flag == "hi"


class _NewArgs:
    """Made with an argument ``copy`` passes back through ``__getnewargs__``."""

    def __new__(cls, a: int) -> _NewArgs:
        made = super().__new__(cls)
        made.a = a
        return made

    def __getnewargs__(self) -> tuple[int]:
        return (self.a,)


class _Complex(complex):
    """A builtin's subclass: its value lives outside ``__dict__``."""


class _Dict(dict):
    """A dict subclass with an attribute of its own."""


class _Inner:
    pass


class _Proxy:
    """Slots, and every other attribute read from the object it wraps."""

    __slots__ = ("_inner",)

    def __init__(self, inner: _Inner) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_inner"), name)


def _holder(kind: str, y: torch.Tensor) -> Any:
    if kind == "new_args":
        held: Any = _NewArgs(3)
    elif kind == "complex":
        held = _Complex(1, 2)
    elif kind == "dict":
        held = _Dict(a=y + 1)
    else:
        inner = _Inner()
        inner.t = y
        return _Proxy(inner)  # reads t from the object it wraps
    held.t = y
    return held


class ReturnsAHolder(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind, self.lin = kind, nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return {"y": y + 1, "held": _holder(self.kind, y * 2)}


@pytest.mark.parametrize("kind", ["new_args", "complex", "dict", "proxy"])
def test_objects_that_copy_unusually_are_rebuilt_with_each_calls_tensors(kind):
    model = ReturnsAHolder(kind)
    for _ in range(2):  # the second call reads the captured structure again
        x = torch.randn(2, 3)
        want = model(x)["held"]
        got = fxviz.record(model, x, method="export").output["held"]
        assert type(got) is type(want)
        assert type(got.t) is torch.Tensor
        assert torch.equal(got.t, want.t)
        if kind == "complex":
            assert got == want == 1 + 2j
        if kind == "dict":
            assert torch.equal(got["a"], want["a"])
        if kind == "new_args":
            assert got.a == 3


def test_a_symbolic_trace_that_keeps_traced_values_inside_an_object_is_refused():
    model, x = ReturnsAHolder("complex"), torch.randn(2, 3)
    with pytest.raises(fxviz.TraceError, match=r"returns a _Complex holding traced values"):
        fxviz.trace(model, x, method="symbolic")
    rec = fxviz.record(model, x)  # auto: export
    assert rec.method == "export"
    assert torch.equal(rec.output["held"].t, model(x)["held"].t)


@pytest.mark.parametrize("where", ["root", "global"])
def test_a_hook_sees_the_models_own_output_while_it_is_exported(where):
    # the hook reorders forward's output: flattening forward would hand it the tensors
    from fxviz._capture._auto import forget

    forget()
    model, x = ReturnsACache(), torch.randn(3, 4)
    swap = lambda m, i, out: (out[1], out[0]) if m is model else None  # noqa: E731
    if where == "root":
        handle = model.register_forward_hook(swap)
    else:
        handle = torch.nn.modules.module.register_module_forward_hook(swap)
    try:
        want = model(x)
        rec = fxviz.record(model, x)
    finally:
        handle.remove()
    assert rec.method == "dynamo"  # export cannot return the cache through the hook
    got = rec.output
    assert type(got[0]) is _Cache
    assert torch.equal(got[1], want[1])
    assert all(torch.equal(a, b) for a, b in zip(got[0].keys, want[0].keys, strict=True))


class BranchesOnLayout(nn.Module):
    def forward(self, x):
        return x * 2 if x.is_contiguous() else x * 3


def test_an_input_of_other_strides_is_captured_again():
    model, base = BranchesOnLayout(), torch.randn(3, 2)
    assert torch.equal(fxviz.record(model, base[:, 0].contiguous()).output, base[:, 0] * 2)
    assert torch.equal(fxviz.record(model, base[:, 0]).output, base[:, 0] * 3)


class ReturnsASet(nn.Module):
    def forward(self, x):
        return {"seen": {x + 1}}  # pytree knows no set, and fxviz cannot put it back


def test_an_output_fxviz_cannot_rebuild_after_export_is_refused_by_name():
    with pytest.raises(fxviz.TraceError, match=r"holds tensors fxviz cannot put back"):
        fxviz.trace(ReturnsASet(), torch.ones(2), method="export")
    assert fxviz.trace(ReturnsASet(), torch.ones(2)).meta["fxviz_method"] == "dynamo"


def test_recording_a_dynamo_capture_leaves_the_models_attributes_as_they_were():
    # torch marks the module Dynamo wraps (_is_torch_compile): no write of the model's run,
    # which the capture would replay on the model every time it is recorded
    model, x = ValueBranch(), torch.randn(3)
    before = dict(vars(model))
    capture = fxviz.trace(model, x, method="dynamo")
    assert vars(model) == before
    fxviz.record(capture, x)
    assert vars(model) == before


@torch.compiler.disable
def _bump(steps: torch.Tensor) -> torch.Tensor:
    steps += 1  # Python, not a graph, writes the buffer in place
    return steps * 10


class PythonBumps(nn.Module):
    """A buffer read by a graph, written in place by the Python after it, read again."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.steps
        z = _bump(self.steps)
        return y + z + self.steps


@pytest.mark.usefixtures("recording_engine")
def test_a_buffer_python_writes_in_place_is_written_by_the_recorded_run():
    x, model = torch.randn(3), PythonBumps()
    reference = copy.deepcopy(model)
    want = reference(x)
    capture = fxviz.trace(model, x, method="dynamo")
    assert not model.steps.any()  # tracing alone changes nothing
    rec = fxviz.record(capture, x)
    assert torch.equal(rec.output, want)  # the graph after the Python read what it wrote
    assert torch.equal(model.steps, reference.steps)
    assert not rec["steps"].value.any()  # recorded as the first graph read it


def test_recording_a_model_whose_python_wrote_a_buffer_reads_it_anew():
    # the capture holds what its Python computed from the buffer: the next record of the
    # model captures again, as the next call reads the buffer again
    x, model = torch.randn(3), PythonBumps()
    reference = copy.deepcopy(model)
    for _ in range(3):
        assert torch.equal(fxviz.record(model, x, method="dynamo").output, reference(x))
    assert torch.equal(model.steps, reference.steps)


class GraphCounts(nn.Module):
    """A buffer a graph writes in place and Python reads after a graph break."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        if self.steps.item() > 1:
            return x * 100
        return x


@pytest.mark.parametrize("method", ["dynamo", "real"])
def test_recording_a_model_again_after_a_buffer_its_python_read_was_written(method):
    # the capture holds the branch its Python took on the buffer's value in one run: a
    # written buffer makes the next record capture again (as a written parameter does)
    x, model = torch.ones(2), GraphCounts()
    reference = copy.deepcopy(model)
    for _ in range(3):
        assert torch.equal(fxviz.record(model, x, method=method).output, reference(x))
    assert torch.equal(model.steps, reference.steps)


@torch.compiler.disable
def _halve(weight: torch.Tensor) -> None:
    with torch.no_grad():
        weight.mul_(0.5)


class PythonHalves(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        _halve(self.lin.weight)
        return self.lin(y)


def test_a_debugger_restart_puts_back_a_parameter_python_wrote():
    x, model = torch.randn(2, 3), PythonHalves()
    reference = copy.deepcopy(model)
    weight = model.lin.weight.detach().clone()
    want = reference(x)
    dbg = fxviz.Debugger(fxviz.trace(model, x, method="dynamo"), x)
    dbg.continue_()
    assert torch.equal(dbg.output, want)
    assert torch.equal(model.lin.weight, reference.lin.weight)
    dbg.restart()
    assert torch.equal(model.lin.weight, weight)
    dbg.continue_()
    assert torch.equal(dbg.output, want)


@pytest.mark.parametrize("method", ["dynamo", "real"])
def test_a_deep_copy_of_a_capture_is_a_capture_that_records_the_same(method):
    """``copy.deepcopy`` keeps what makes a capture (its graphs, breaks, how it binds
    inputs): the copy records as the original does, and owns its own graph."""
    import copy

    model, x = ValueBranch(), torch.ones(3)
    capture = fxviz.trace(model, x, method=method)
    copied = copy.deepcopy(capture)
    assert isinstance(copied, fxviz.Capture)
    assert (copied.summary(), copied.input_names) == (capture.summary(), capture.input_names)
    assert copied.graph is not capture.graph
    original, again = fxviz.record(capture, x), fxviz.record(copied, x)
    assert [r.name for r in again.values()] == [r.name for r in original.values()]
    assert torch.equal(again.output, original.output)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_dynamo_capture_does_not_tokenize_the_files_it_traces():
    # Dynamo names the function around each traced call for a debug log that is off,
    # tokenizing each source file it meets (a tenth of a GPT-2's first capture)
    import transformers as tf
    from torch._dynamo import funcname_cache

    torch.manual_seed(0)
    config = tf.GPT2Config(vocab_size=50, n_layer=1, n_embd=16, n_head=2, n_positions=16)
    model, ids = tf.GPT2LMHeadModel(config).eval(), torch.randint(0, 50, (1, 5))
    funcname_cache.clearcache()
    rec = fxviz.record(fxviz.trace(model, input_ids=ids, method="dynamo"), input_ids=ids)
    assert not [f for f in funcname_cache.cache if "transformers" in f]
    with torch.no_grad():  # the capture itself is what it was
        assert torch.equal(rec.output.logits, model(input_ids=ids).logits)


class _Scaled(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2


def test_dynamos_trace_call_log_still_names_the_function_of_each_call():
    # the name skipped while the log is off is there when the log is on
    import logging

    from torch._dynamo import funcname_cache

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    log = logging.getLogger("torch._dynamo.output_graph.__trace_call")
    handler = Keep()
    funcname_cache.clearcache()
    torch._logging.set_logs(trace_call=True)
    log.addHandler(handler)
    try:
        fxviz.trace(_Scaled(), torch.randn(3), method="dynamo")
    finally:
        log.removeHandler(handler)
        torch._logging.set_logs()
    calls = [line for line in lines if line.startswith("TRACE FX call relu")]
    assert calls
    assert " in forward (_Scaled.forward)" in calls[0]


def _methods_tried(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The capture methods ``trace`` tries from now on, in order (filled as it runs)."""
    from fxviz import capture

    tried: list[str] = []
    original = capture._faithful

    def spy(name, *args):
        tried.append(name)
        return original(name, *args)

    monkeypatch.setattr(capture, "_faithful", spy)
    return tried


class WritesItsWeight(nn.Module):
    """Writes its parameter in place each call, updates batch-norm statistics, and draws
    random numbers: three kinds of state one call leaves changed."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4))
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.w.add_(1.0)
        return self.norm(x) + self.w + torch.rand(4)


class WritesItsWeightAndBranches(WritesItsWeight):
    """Also branches on a value: ``torch.export`` cannot trace it, so ``auto`` runs it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y if y.sum() > 0 else -y


@pytest.mark.parametrize("method", ["dynamo", "real", "auto"])
def test_past_the_copy_limit_a_write_to_a_parameter_is_refused_and_left_as_one_call_leaves_it(
    method, monkeypatch
):
    """A model whose parameters are past ``PARAMETER_COPY_BYTES`` is run without copying
    them first; a forward that writes one in place then cannot be put back: the capture
    says which, runs the model no more (``auto`` tries no other method), and leaves it
    as one plain call leaves it: parameter, buffers and random stream."""
    from fxviz._capture import _state

    torch.manual_seed(0)
    x, model = (
        torch.randn(8, 4),
        (WritesItsWeightAndBranches if method == "auto" else WritesItsWeight)(),
    )
    reference = copy.deepcopy(model)
    state = torch.random.get_rng_state()
    reference(x)
    after_one_call = torch.random.get_rng_state()
    torch.random.set_rng_state(state)
    monkeypatch.setattr(_state, "PARAMETER_COPY_BYTES", 16)  # the model's: 48 bytes
    with pytest.raises(fxviz.TraceError, match=r"parameter w in place.*one call left it"):
        fxviz.record(model, x, method=method)
    for name, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    assert torch.equal(torch.random.get_rng_state(), after_one_call)


@pytest.mark.parametrize("method", ["dynamo", "real"])
def test_past_the_copy_limit_a_model_that_writes_no_parameter_is_captured_and_recorded(
    method, monkeypatch
):
    from fxviz._capture import _state

    monkeypatch.setattr(_state, "PARAMETER_COPY_BYTES", 16)
    model, x = ValueBranch(), torch.ones(3)
    want = model(x)
    rec = fxviz.record(model, x, method=method)
    assert torch.equal(rec.output, want)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_one_run_capture_of_a_big_model_does_not_copy_its_parameters(tmp_path):
    """The peak memory of a dynamo capture of a model of 256 MiB of parameters, in a fresh
    process (Linux: its peak reset just before): about the model's own, not twice it."""
    script = tmp_path / "peak.py"
    script.write_text(
        "import re, sys, torch, fxviz\n"
        "import fxviz._capture._state as state\n"
        "state.PARAMETER_COPY_BYTES = int(sys.argv[1])\n"
        "model = torch.nn.Sequential(torch.nn.Linear(8192, 8192, bias=False)).eval()\n"
        "x = torch.randn(1, 8192)\n"
        "fxviz.trace(torch.nn.Linear(4, 4), torch.randn(1, 4), method='dynamo')  # warm\n"
        "def status(key):\n"
        "    text = open('/proc/self/status').read()\n"
        "    return int(re.search(key + r':\\s+(\\d+) kB', text).group(1)) / 1024\n"
        "before = status('VmRSS')\n"
        "open('/proc/self/clear_refs', 'w').write('5')  # the peak (VmHWM) starts anew\n"
        "fxviz.trace(model, x, method='dynamo')\n"
        "print(status('VmHWM') - before)\n"  # MiB
    )
    grown = {}
    for name, limit in (("copied", 1 << 30), ("not copied", 128 << 20)):
        done = subprocess.run(
            [sys.executable, str(script), str(limit)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=True,
        )
        grown[name] = float(done.stdout.split()[-1])
    assert grown["copied"] >= 200, grown  # the parameters' copy
    assert grown["not copied"] < 64, grown


@pytest.mark.parametrize("method", ["auto", "symbolic", "export", "dynamo", "real"])
@pytest.mark.parametrize("built", ["inference", "normal"])
def test_a_model_run_under_inference_mode_is_captured_and_recorded(method, built):
    """Tensors made under ``torch.inference_mode()`` have no version counter: a model
    built there (inference parameters), or one called there (inference inputs), is
    captured and recorded all the same."""
    torch.manual_seed(0)
    if built == "inference":
        with torch.inference_mode():
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.BatchNorm1d(4)).eval()
    else:
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.BatchNorm1d(4)).eval()
    with torch.inference_mode():
        x = torch.randn(3, 4)
        rec = fxviz.record(model, x, method=method)
        assert torch.equal(rec.output, model(x))


def test_a_debugger_captures_with_the_method_asked_for():
    model, x = ValueBranch(), torch.ones(3)
    dbg = fxviz.Debugger(model, x, method="dynamo")
    assert dbg.graph_module.meta.get("fxviz_method") == "dynamo"
    dbg.continue_()
    assert torch.equal(dbg.output, model(x))


def test_past_the_copy_limit_a_run_that_writes_a_parameter_then_fails_is_refused(monkeypatch):
    """A forward that writes an uncopied parameter and then raises leaves the model as
    that failed call left it (buffer too, not half put back), and ``auto`` runs it no
    more."""
    from fxviz._capture import _state

    class WritesThenFails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(8))
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.n.add_(1)
            with torch.no_grad():
                self.w.add_(1)
            raise ValueError("the model fails")

    monkeypatch.setattr(_state, "PARAMETER_COPY_BYTES", 16)
    for method in ("real", "dynamo", "auto"):
        model = WritesThenFails()
        with pytest.raises(_state.UnrestorableWrite):
            fxviz.trace(model, torch.ones(8), method=method)
        assert (model.w[0].item(), model.n.item()) == (2.0, 1.0), method


def test_a_debugger_steps_a_model_built_under_inference_mode():
    with torch.inference_mode():
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        x = torch.randn(2, 4)
        dbg = fxviz.Debugger(model, x)
        dbg.continue_()
        assert torch.equal(dbg.output, model(x))
        dbg.restart()
        assert dbg.step() is not None


def test_under_inference_mode_a_capture_whose_constant_a_run_wrote_is_made_again():
    """A tensor ``forward`` makes becomes a constant of the graph; a recorded run that
    writes it in place would hand the next recording what it wrote. Inference tensors
    have no version counter to tell: their values do."""

    class WritesWhatItMakes(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            c = torch.tensor([1.0, 2.0])
            c.add_(x.sum())
            return c * 1

    model, x = WritesWhatItMakes(), torch.ones(2)
    with torch.inference_mode():
        maxima = [fxviz.record(model, x)["add_"].outputs[0].max for _ in range(3)]
    assert maxima == [4.0, 4.0, 4.0]


class _LogScaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        return self.lin(x).log() * scale


@pytest.mark.parametrize("method", ["real", "export"])
def test_inputs_and_outputs_holding_nan_are_the_same_as_themselves(method):
    """A NaN is not equal to itself, but a capture of an input that holds one, or of a
    model whose output does, is the same run (before: the real capture refused the very
    inputs it was made with, and export with keyword inputs 'does not reproduce the
    model's output')."""
    torch.manual_seed(0)
    model, x = _LogScaled(), torch.randn(4, 3)
    x[0, 0] = math.nan
    rec = fxviz.record(model, x, scale=2.0, method=method)
    again = fxviz.record(model, x, scale=2.0, method=method)
    want = model(x, scale=2.0)
    for got in (rec.output, again.output):
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(), want.nan_to_num())


def _same_bits_cases():
    x = torch.tensor([math.nan, -0.0, 1.0])
    q = torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.1, 0, torch.quint8)
    jagged = torch.nested.nested_tensor([torch.ones(2, 3), torch.zeros(1, 3)], layout=torch.jagged)
    complex_nan = torch.tensor([complex(math.nan, 1.0), 1 + 2j])
    wide = torch.randn(64, 32)
    yield "NaN and -0.0", x, x.clone(), x.nan_to_num()
    yield "sign of a zero", torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([-0.0])
    yield "transposed", wide.t(), wide.clone().t(), (wide + 1).t()
    yield "expanded", x[:1].expand(5), x[:1].clone().expand(5), torch.ones(5)
    yield "conjugate view", complex_nan.conj(), complex_nan.clone().conj(), complex_nan
    yield "quantized", q, q.clone(), torch.quantize_per_tensor(q.dequantize(), 0.2, 0, torch.quint8)
    yield "jagged", jagged, jagged.clone(), jagged * 2
    coo = torch.sparse_coo_tensor([[0, 2]], [math.nan, 2.0], (10**8,))
    yield "sparse", coo, coo.clone(), coo * 0.5


@pytest.mark.parametrize(
    ("a", "same", "other"),
    [c[1:] for c in _same_bits_cases()],
    ids=[c[0] for c in _same_bits_cases()],
)
def test_same_bits_of_every_kind_of_tensor(a, same, other):
    """What a capture's checks compare inputs, buffers and outputs with: a NaN is itself,
    a zero's sign counts, and no layout is copied whole or made dense (a quantized byte
    view crashed the process)."""
    from fxviz._torch_compat import same_bits

    assert same_bits(a, same)
    assert same_bits(a, a)
    assert not same_bits(a, other)
