"""Each failure class the conformance matrix found on real models, with its own test:
caches saved as typed trees, record(method=), titles naming the capture, module paths
from the model's root, and capture once (re-used while valid, invalidated by each change)."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import fxviz
from fxviz._capture import tensors_in
from fxviz._capture._cache import clear_captures
from fxviz._saved._values import SavedObject, rebuilt
from tests.conformance.zoo import AnchorDetector, build

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@functools.cache
def _llama_recording(method="auto"):
    model, args, kwargs = build("llama")
    with torch.no_grad():
        return model, kwargs, model(**kwargs), fxviz.record(model, *args, method=method, **kwargs)


def test_a_saved_cache_loads_back_as_its_own_types(tmp_path):
    from transformers.cache_utils import DynamicCache

    _, _, want, rec = _llama_recording()
    loaded = fxviz.load(rec.save(tmp_path / "llama.fxrec"))
    out = loaded.output
    assert type(out) is type(want)
    assert list(out.keys()) == list(want.keys())  # the output's own fields, in order
    assert isinstance(out.cache, DynamicCache)
    assert out.cache.get_seq_length() == want.cache.get_seq_length() == 6
    got, expected = tensors_in(out), tensors_in(want)
    assert len(got) == len(expected) == 5  # logits, and keys and values of two layers
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)
    assert "not saved" not in repr(loaded["output"].value)


class _States:
    """A cache layer as transformers' Mamba keeps one: states in dicts keyed by index."""

    def __init__(self, x: torch.Tensor) -> None:
        self.conv_states = {0: x * 2, 1: x + 1}
        self.seen = {0: True}


class _StateModel(nn.Module):
    def forward(self, x):
        return x.sin(), _States(x.cos())


def test_dicts_keyed_by_numbers_are_saved_with_their_tensors(tmp_path):
    model, x = _StateModel(), torch.randn(3)
    rec = fxviz.record(model, x, method="dynamo")
    loaded = fxviz.load(rec.save(tmp_path / "states.fxrec")).output
    states = loaded[1].conv_states
    assert list(states) == [0, 1]  # the keys, as numbers
    assert torch.equal(states[0], x.cos() * 2)
    assert torch.equal(states[1], x.cos() + 1)
    assert loaded[1].seen == {0: True}


def test_a_class_not_imported_here_loads_as_a_saved_object():
    obj = rebuilt("no_such_library.cache:Cache", {"keys": torch.ones(2), "n": 3})
    assert isinstance(obj, SavedObject)
    assert obj.fxviz_type == "no_such_library.cache:Cache"
    assert torch.equal(obj.keys, torch.ones(2))
    assert repr(obj) == "<saved no_such_library.cache:Cache: keys, n>"


def test_a_saved_type_is_never_constructed_through_its_own_code():
    class Loud:
        def __init__(self) -> None:
            raise AssertionError("ran")

    Loud.__module__ = __name__
    globals()["Loud"] = Loud
    try:
        obj = rebuilt(f"{__name__}:Loud", {"x": 1})
        assert type(obj) is Loud  # made by __new__ and __dict__ only
        assert obj.x == 1
        # a module is never rebuilt from a file, whatever the file says
        assert isinstance(rebuilt("torch.nn:Linear", {}), SavedObject)
    finally:
        del globals()["Loud"]


def test_record_takes_method():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    x = torch.randn(2, 3)
    for method in ("auto", "symbolic", "export", "dynamo", "real"):
        rec = fxviz.record(model, x, method=method)
        assert rec.method == ("symbolic" if method == "auto" else method)
        assert torch.equal(tensors_in(rec.output)[0], model(x))
    with pytest.raises(ValueError, match="unknown method: 'fast'"):
        fxviz.record(model, x, method="fast")


@pytest.mark.parametrize(("method", "title"), [("dynamo", "(dynamo)"), ("real", "(one real run)")])
def test_titles_name_the_capture(method, title):
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    rec = fxviz.record(model, torch.randn(2, 3), method=method)
    source = fxviz.to_dot(rec).source
    assert f'tooltip="Sequential {title}"' in source
    assert "symbolic_trace" not in source
    assert f"model: Sequential {title}" in fxviz.report(rec)


def test_dynamo_module_paths_are_the_models_own():
    model, _, _, rec = _llama_recording("dynamo")
    assert rec.method == "dynamo"
    named = dict(model.named_modules())
    paths = {
        path
        for node in rec.graph_module.graph.nodes
        for path, _ in (node.meta.get("nn_module_stack") or {}).values()
    }
    assert "model.layers.0.self_attn" in paths
    assert paths <= set(named)  # no L.args.0 frames around the model
    source = fxviz.to_dot(rec).source
    assert "g0 ·" not in source
    assert "g0_" not in source
    assert 'label="model.layers.0 · LlamaDecoderLayer"' in source


# -- capture once ----------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:  # a tensor condition: Dynamo captures it
            return self.b(h)
        return self.b(-h)


def _same_capture(model, *args, **kwargs) -> bool:
    first = fxviz.record(model, *args, **kwargs).graph_module
    return fxviz.record(model, *args, **kwargs).graph_module is first


@pytest.fixture(autouse=True)
def _fresh_captures():
    clear_captures()
    yield
    clear_captures()


def test_a_model_is_captured_once():
    model, x = _Net(), torch.randn(2, 4)
    rec = fxviz.record(model, x)
    assert rec.method == "dynamo"
    assert fxviz.record(model, x).graph_module is rec.graph_module
    assert fxviz.Debugger(model, x).graph_module is rec.graph_module
    assert fxviz.shapes(model, x, progress=False).recording.graph_module is rec.graph_module
    sym = nn.Sequential(nn.Linear(4, 2))
    assert _same_capture(sym, x)


def test_new_inputs_capture_again():
    model, x = _Net(), torch.randn(2, 4)
    first = fxviz.record(model, x).graph_module
    assert fxviz.record(model, x.clone()).graph_module is first  # equal values: valid
    assert fxviz.record(model, x + 1).graph_module is not first  # one run: new values
    sym = nn.Sequential(nn.Linear(4, 2))
    one = fxviz.record(sym, x).graph_module
    assert fxviz.record(sym, x + 1).graph_module is one  # any values: one graph
    assert fxviz.record(sym, torch.randn(3, 4)).graph_module is not one  # new shape


@pytest.mark.parametrize(
    "change",
    ["training", "submodule", "forward", "hook", "parameter", "written", "grad_mode", "attribute"],
)
def test_a_change_to_the_model_captures_again(change):
    model, x = _Net(), torch.randn(2, 4)
    first = fxviz.record(model, x).graph_module
    grad = torch.enable_grad()
    if change == "training":
        model.train(not model.training)
    elif change == "submodule":
        model.b = nn.Linear(4, 2)
    elif change == "forward":
        model.a.forward = lambda t: t * 2
    elif change == "hook":
        model.a.register_forward_hook(lambda m, i, o: o * 0)
    elif change == "parameter":
        model.a.weight = nn.Parameter(torch.randn(4, 4))
    elif change == "written":
        with torch.no_grad():
            model.a.weight.add_(1)
    elif change == "grad_mode":
        grad = torch.no_grad()
    elif change == "attribute":
        model.scale = 2.0  # a plain attribute the next forward may read
    with grad:
        again = fxviz.record(model, x)
    assert again.graph_module is not first
    assert torch.equal(tensors_in(again.output)[0], model(x))


def test_tensors_in_a_plain_list_attribute_shapes_and_model_left_as_it_was():
    """torchvision-style anchors: a forward that replaces a list attribute of tensors.
    Tracing ran it on proxies and left them on the model (its next call returned a
    Proxy); every capture now puts the attributes back."""
    model, x = AnchorDetector(), torch.randn(1, 3, 8, 8)
    anchors = list(model.anchors.cell_anchors)
    want = model(x)
    for mode in ("real", "fake", "meta"):
        rep = fxviz.shapes(model, x, mode=mode, progress=False)
        assert rep["output"].shape == tuple(want.shape), mode
    # symbolic tracing refuses it (forward assigns an attribute, which a graph cannot
    # hold), and leaves the model as it was all the same
    with pytest.raises(fxviz.TraceError, match=r"changes the model \(.*anchors\.cell_anchors"):
        fxviz.record(model, x, method="symbolic")
    assert all(type(a) is torch.Tensor for a in model.anchors.cell_anchors)
    for method in ("export", "dynamo", "real"):
        rec = fxviz.record(model, x, method=method)
        assert torch.equal(tensors_in(rec.output)[0], want), method
        assert all(type(a) is torch.Tensor for a in model.anchors.cell_anchors), method
    assert [a.data_ptr() for a in model.anchors.cell_anchors] == [a.data_ptr() for a in anchors]
    assert torch.equal(model(x), want)


@pytest.mark.parametrize("mode", ["fake", "meta"])
def test_fake_and_meta_shapes_of_one_run_captures(mode):
    """A Python segment hands the anchor list to the next graph (PlacementError before),
    and a real capture's `.item()` steered Python only (fake stopped there before)."""
    model, x = AnchorDetector(), torch.randn(1, 3, 8, 8)
    capture = fxviz.trace(model, x, method="dynamo")
    assert any("cell_anchors" in n.name for n in capture.graph.nodes)
    rep = fxviz.shapes(capture, x, mode=mode, progress=False)
    assert rep["output"].shape == tuple(model(x).shape)
    model, args, _ = build("value_if")
    capture = fxviz.trace(model, *args, method="real")
    rep = fxviz.shapes(capture, *args, mode=mode, progress=False)
    assert rep["item"].shape is None  # a Python bool, read by no node (one graph: no prefix)
    assert rep["output"].shape == (2, 4)


def test_values_made_under_vmap_are_summarised_saved_and_reported_as_what_they_hold(tmp_path):
    """A recording made inside ``torch.vmap`` holds BatchedTensors (no storage): its
    statistics, file and report take the tensors they wrap (batch dimension included)."""
    gm = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    made = []

    def run(x):
        made.append(fxviz.record(gm, x))
        return made[-1].output

    xs = torch.randn(4, 3)
    out = torch.vmap(run)(xs)
    rec = made[0]
    assert torch.equal(out, gm(xs))
    assert rec["_1"].shape == (4, 2)
    assert rec["_1"].outputs[0].max == out.max().item()
    assert len(rec.table()) == len(rec)
    loaded = fxviz.load(rec.save(tmp_path / "vmap.fxrec"))
    assert torch.equal(loaded["_1"].value, out)
    page = fxviz.report(rec)
    assert "Cannot access storage" not in page
    assert "BatchedTensor" not in page


def test_export_with_keyword_inputs_keeps_node_names_unique(tmp_path):
    """SigLIP calls its own `unflatten`: the exported graph's output node took the same
    name, so one record could not be looked up and was dropped on save."""
    model, _, kwargs = build("siglip")
    with torch.no_grad():
        rec = fxviz.record(model, method="export", **kwargs)
        want = model(**kwargs)
    names = [n.name for n in rec.graph_module.graph.nodes]
    assert "unflatten" in names
    assert len(names) == len(set(names)) == len(rec)
    loaded = fxviz.load(rec.save(tmp_path / "siglip.fxrec"))
    assert list(loaded) == list(rec)
    for a, b in zip(tensors_in(rec.output), tensors_in(want), strict=True):
        assert torch.equal(a, b)


def test_a_symbolic_capture_is_made_again_when_a_baked_in_attribute_changes():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale  # symbolic_trace bakes the float into the graph

    model, x = Scaled(), torch.ones(2)
    assert torch.equal(fxviz.record(model, x).output, x * 2)
    model.scale = 3.0
    assert torch.equal(fxviz.record(model, x).output, x * 3)
    scale = 2.0
    fn = lambda t: t * scale  # noqa: E731 (a closure over a number)
    first = fxviz.record(fn, x).graph_module
    assert fxviz.record(fn, x).graph_module is first
    scale = 4.0
    assert torch.equal(fxviz.record(fn, x).output, x * 4)
