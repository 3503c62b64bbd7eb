"""The recording path of a captured model, made cheaper, records what it recorded before:
both engines agree on a second record of real models (the compiled engine's fast paths
for views and ``get_attr`` values against the interpreter's general ones), the direct
attribute lookup gives what ``getattr`` gives, and the caches on the way (capture state,
signatures, parameter statistics) follow what they cache."""

from __future__ import annotations

import gc
import types
from typing import Any

import pytest
import torch
from torch import nn

import fxviz
from fxviz._capture import tensors_in
from fxviz._capture._cache import clear_captures
from fxviz._capture._inputs import flatten_inputs
from fxviz._record import _stats
from fxviz._record._attrs import module_attr
from fxviz._record._writes import runs_unknown_code
from tests.conformance.zoo import build
from tests.record.test_engines import _record_on, _record_view


@pytest.fixture(autouse=True)
def _fresh_captures():
    clear_captures()
    yield
    clear_captures()


@pytest.mark.parametrize("name", ["llama", "bert"])  # a Dynamo capture, an export graph
def test_both_engines_agree_on_a_second_record_of_a_zoo_model(name):
    model, args, kwargs = build(name)
    with torch.no_grad():
        want = model(*args, **kwargs)
        first = fxviz.record(model, *args, progress=False, **kwargs)
        compiled = _record_on("compiled", model, *args, progress=False, **kwargs)
        interpreted = _record_on("interpreted", model, *args, progress=False, **kwargs)
    assert compiled.graph_module is first.graph_module  # the capture was re-used
    assert _record_view(compiled) == _record_view(interpreted)  # every record but its time
    views = [r for r in compiled.values() if r.aliases]
    assert views  # the case the fast path takes is in the data
    for got, expected in zip(tensors_in(compiled.output), tensors_in(want), strict=True):
        assert torch.equal(got, expected)


class _Owner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("buf", torch.ones(2))
        self.scale = 3.0


class _Hooked(_Owner):
    def __getattr__(self, name: str):
        if name == "extra":
            return "from __getattr__"
        return super().__getattr__(name)


@pytest.mark.parametrize("name", ["lin", "buf", "scale", "training", "forward", "extra", "nope"])
@pytest.mark.parametrize("kind", ["plain", "shadowed", "hooked"])
def test_module_attr_is_getattr(kind, name):
    cls = {"plain": _Owner, "hooked": _Hooked}.get(kind) or type("Shadowed", (_Owner,), {})
    m = cls()
    if kind == "shadowed":  # a class attribute added after the buffer: it comes first
        cls.buf = property(lambda self: "the class's")  # type: ignore[attr-defined]
    try:
        want = getattr(m, name)
    except AttributeError as error:
        with pytest.raises(AttributeError, match=str(error)):
            module_attr(m, name)
        return
    got = module_attr(m, name)
    assert got is want or (isinstance(got, types.MethodType) and got == want)


def test_a_get_attr_node_reads_what_the_interpreter_reads():
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = _Owner()

        def forward(self, x):
            return x * self.inner.buf + self.inner.lin.weight.sum()

    gm = torch.fx.symbolic_trace(Model())
    x = torch.ones(2)
    rec = fxviz.record(gm, x)
    for name in ("inner_buf", "inner_lin_weight"):
        assert rec[name].value is torch.fx.Interpreter(gm).fetch_attr(rec[name].target)
    with torch.no_grad():
        gm.inner.buf.mul_(2)  # a new version: measured again, not read from the cache
    assert fxviz.record(gm, x)["inner_buf"].outputs[0].mean == 2.0


def test_the_statistics_cache_lets_its_tensors_go():
    w = nn.Parameter(torch.ones(3))
    key = id(w)
    first = _stats.cached_summary(w)
    assert _stats.cached_summary(w) is first
    assert _stats._CACHE[key][0]() is w
    with torch.no_grad():
        w.add_(1)
    assert _stats.cached_summary(w)[0].mean == 2.0
    del w
    gc.collect()
    assert key not in _stats._CACHE


class _Deep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.register_buffer("offset", torch.zeros(4))

    def forward(self, x):
        h = self.body(x) + self.offset
        if h.sum() > 0:  # a tensor condition: Dynamo captures it
            return h
        return -h


@pytest.mark.parametrize("change", ["nested module", "buffer", "tied parameter", "reordered"])
def test_a_change_deep_in_the_model_captures_again(change):
    model, x = _Deep().eval(), torch.randn(2, 4)
    first = fxviz.record(model, x).graph_module
    assert fxviz.record(model, x).graph_module is first
    if change == "nested module":
        model.body[2] = nn.Linear(4, 4)
    elif change == "buffer":
        model.offset = torch.ones(4)
    elif change == "tied parameter":
        model.body[2].weight = model.body[0].weight
    else:
        model.body = nn.Sequential(model.body[2], model.body[1], model.body[0])
    again = fxviz.record(model, x)
    assert again.graph_module is not first
    assert torch.equal(tensors_in(again.output)[0], model(x))


def test_input_names_follow_a_new_forward_signature():
    class Model(nn.Module):
        def forward(self, x, mask=None):
            return x

    model, x = Model(), torch.ones(1)
    assert flatten_inputs(model, (x,), {"mask": x})[0] == ["x", "mask"]

    def forward(self, tokens, attention=None):
        return tokens

    Model.forward = forward
    assert flatten_inputs(model, (x,), {"attention": x})[0] == ["tokens", "attention"]
    model.forward = lambda inputs: inputs  # on the instance: its own signature
    assert flatten_inputs(model, (x,), {})[0] == ["inputs"]


def test_an_exported_graphs_plumbing_is_known_code_that_writes_nothing():
    """The output unflatten fxviz adds and torch.export's guard function run no code that
    could write a tensor: recorded without snapshots or statistics taken early."""
    model, args, kwargs = build("vit")
    with torch.no_grad():
        rec = fxviz.record(model, *args, progress=False, **kwargs)
    gm = rec.graph_module
    assert rec.method == "export"
    submodules = dict(gm.named_modules())
    plumbing = [n for n in gm.graph.nodes if n.name in ("unflatten", "_guards_fn")]
    assert len(plumbing) == 2
    assert not any(runs_unknown_code(n, submodules) for n in plumbing)
    assert runs_unknown_code(_user_function_node(), {})


def _user_function_node() -> torch.fx.Node:
    def user_code(x):
        return x

    graph = torch.fx.Graph()
    return graph.call_function(user_code, (graph.placeholder("x"),))


class _Scratch(nn.Module):
    """Builds a scratch tensor in ``forward`` (a capture makes it a constant of its graph)
    and writes it in place."""

    def forward(self, x):
        buf = torch.zeros(4)
        buf[:2] += x
        return buf


def test_a_run_that_writes_the_captures_own_tensors_captures_again():
    model, x = _Scratch(), torch.ones(2)
    first = fxviz.record(model, x)
    kept = first.output.clone()
    for _ in range(2):  # each record as the model itself computes, not on what the last wrote
        again = fxviz.record(model, x)
        assert torch.equal(again.output, model(x))
    assert torch.equal(first.output, kept)  # and the first recording keeps its values


def test_a_changed_configuration_flag_captures_again():
    """A transformers model reads ``self.config.output_hidden_states`` in ``forward``: the
    config object stays the same, its flag does not, and the next record follows it."""
    model, args, kwargs = build("llama")
    with torch.no_grad():
        first = fxviz.record(model, *args, **kwargs)
        model.config.output_hidden_states = True
        again = fxviz.record(model, *args, **kwargs)
        expected = model(*args, **kwargs)
    assert again.graph_module is not first.graph_module
    got = tensors_in(again.output)
    assert len(got) == len(tensors_in(expected)) > len(tensors_in(first.output))
    assert all(torch.equal(a, b) for a, b in zip(got, tensors_in(expected), strict=True))


class _Settings:
    """A plain object of attributes, as a configuration."""

    def __init__(self) -> None:
        self.flip = False


class _OneSetting(nn.Module):
    """Holds a plain object whose flag ``forward`` reads."""

    def __init__(self, settings: Any) -> None:
        super().__init__()
        self.settings = settings

    def forward(self, x):
        return -x if self.settings.flip else x


class _NoPublic(nn.Module):
    def forward(self, x):
        return x + 1


@pytest.mark.parametrize("method", ["symbolic", "export", "dynamo", "real"])
def test_a_flag_of_a_plain_object_a_module_holds_is_followed_beside_a_bare_module(method):
    """The capture state follows the attributes of a plain object a module holds (a flag
    that ``forward`` reads and every capture method bakes in), next to a module whose
    only public attribute is ``training``."""
    settings, x = _Settings(), torch.ones(2)
    model = nn.Sequential(_OneSetting(settings), _NoPublic())
    first = fxviz.record(model, x, method=method)
    assert fxviz.record(model, x, method=method).graph_module is first.graph_module
    settings.flip = True
    again = fxviz.record(model, x, method=method)
    assert again.graph_module is not first.graph_module
    assert torch.equal(tensors_in(again.output)[0], model(x))
    assert torch.equal(again.output, torch.zeros(2))  # -1 + 1
