"""Two engines, one contract: ``fxviz.record`` through generated code gives the recording
that the recording interpreter gives, and the generated code is kept on the graph only
while the graph stays the same."""

from __future__ import annotations

import gc
import traceback
import warnings
import weakref
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fxviz
from fxviz._record import _codegen, _engine
from tests.test_generated_graphs import FAST, fresh, graphs, run_seeded, same


def _record_on(engine: str, *args: Any, **kwargs: Any) -> Any:
    """The recording (or the NodeError) of ``fxviz.record`` on ``engine``; the warnings
    it gave are on ``_record_on.warned``."""
    saved = _engine.ENGINE
    _engine.ENGINE = engine
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return run_seeded(lambda: fxviz.record(*args, **kwargs))
    except fxviz.NodeError as error:
        return error
    finally:
        _engine.ENGINE = saved
        _record_on.warned = [str(w.message) for w in caught]  # type: ignore[attr-defined]


def _record_view(rec: fxviz.Recording) -> dict[str, Any]:
    """Everything a recording holds except timings."""
    nodes = []
    for r in rec.values():
        data = r.to_dict()
        data.pop("time_s")
        nodes.append(data)
    return {
        "nodes": nodes,
        "complete": rec.complete,
        "error": None if rec.error is None else (type(rec.error), str(rec.error)),
        "env": sorted(n.name for n in rec.env),
    }


def assert_same_recording(a: fxviz.Recording, b: fxviz.Recording) -> None:
    assert _record_view(a) == _record_view(b)
    for name in a:
        assert a[name].kept == b[name].kept, name
        assert same(a[name].value, b[name].value), name
    assert same(a.output, b.output)
    env_b = {n.name: v for n, v in b.env.items()}
    for node, value in a.env.items():
        assert same(value, env_b[node.name]), node.name


@FAST
@given(graphs(), st.sampled_from(["all", "stats", 64]), st.sampled_from([True, False, "eager"]))
def test_both_engines_record_the_same_on_generated_graphs(case, keep, stats):
    gm, inputs = case
    compiled = _record_on("compiled", gm, *fresh(inputs), keep=keep, stats=stats, progress=False)
    warned = _record_on.warned  # type: ignore[attr-defined]
    interpreted = _record_on("interpreted", gm, *fresh(inputs), keep=keep, stats=stats)
    assert warned == _record_on.warned  # type: ignore[attr-defined]
    assert_same_recording(compiled, interpreted)


def _failing(x: torch.Tensor) -> Any:
    y = torch.relu(x).view(2, 2)
    y.add_(1)
    return y @ torch.ones(3, 3)  # a shape error


@pytest.mark.parametrize("stats", [True, False, "eager"])
def test_both_engines_record_a_node_that_returns_nothing_alike(stats):
    # torch.export's metadata checks (aten._assert_tensor_metadata) give None: the
    # generated code describes them without looking at inputs
    def f(x):
        torch.ops.aten._assert_tensor_metadata.default(x, dtype=torch.float32)
        y = x * 2
        torch.ops.aten._assert_tensor_metadata.default(y, dtype=torch.float32)
        return y.sum()

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(3, requires_grad=True)
    compiled, interpreted = (_record_on(e, gm, x, stats=stats) for e in ("compiled", "interpreted"))
    assert_same_recording(compiled, interpreted)
    (check, *_) = [r for r in compiled.values() if "assert_tensor_metadata" in r.target]
    assert check.outputs == ()
    assert check.kept
    assert check.value is None


def test_a_failing_node_raises_the_same_error_with_the_same_partial_recording():
    gm = fxviz.trace(_failing, torch.ones(4))
    compiled = _record_on("compiled", gm, torch.ones(4))
    interpreted = _record_on("interpreted", gm, torch.ones(4))
    assert isinstance(compiled, fxviz.NodeError)
    assert isinstance(compiled, RuntimeError)
    assert type(compiled) is type(interpreted)
    assert str(compiled) == str(interpreted)
    assert_same_recording(compiled.recording, interpreted.recording)
    assert compiled.recording["add_"].mutates == ("view",)
    # the traceback shows the generated line that ran the node
    text = "".join(traceback.format_exception(compiled.__cause__))
    assert "<fxviz-record-" in text
    assert "matmul = _fx_f" in text


def test_the_generated_code_is_kept_on_the_graph_until_the_graph_changes():
    gm = fxviz.trace(lambda x: torch.relu(x) + 1, torch.ones(2))
    first = _codegen.compiled_for(gm.graph, keep_values=True)
    assert _codegen.compiled_for(gm.graph, keep_values=True) is first
    add = next(n for n in gm.graph.nodes if n.name == "add")
    add.args = (add.args[0], 5)  # an edit: the code is generated again
    gm.recompile()
    second = _codegen.compiled_for(gm.graph, keep_values=True)
    assert second is not first
    assert "add = _fx_f2(relu, 5)" in second.source
    assert fxviz.record(gm, torch.ones(2)).output.tolist() == [6.0, 6.0]
    with gm.graph.inserting_after(add):
        neg = gm.graph.call_function(torch.neg, (add,))
    add.replace_all_uses_with(neg, delete_user_cb=lambda user: user is not neg)
    gm.recompile()
    assert fxviz.record(gm, torch.ones(2)).output.tolist() == [-6.0, -6.0]


def test_the_generated_code_dies_with_its_graph():
    gm = fxviz.trace(torch.nn.Linear(3, 2))
    fxviz.record(gm, torch.ones(1, 3))
    graph = weakref.ref(gm.graph)
    function = weakref.ref(_codegen.compiled_for(gm.graph, keep_values=True).function)  # type: ignore[union-attr]
    del gm
    gc.collect()
    assert graph() is None
    assert function() is None


def test_custom_interpreters_and_gradients_keep_the_interpreted_engine():
    class Double(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            return super().call_function(target, args, kwargs) * 2

    gm = fxviz.trace(lambda x: x + 1, torch.ones(1))
    gm.graph.__dict__.pop("_fxviz_compiled", None)
    assert fxviz.record(gm, torch.ones(1), interpreter=Double)["add"].value.item() == 4.0
    rec = fxviz.record(torch.nn.Linear(2, 1), torch.ones(1, 2), backward=True)
    assert rec["linear"].grad is not None
    assert "_fxviz_compiled" not in vars(gm.graph)


@settings(FAST, max_examples=10)
@given(st.integers(1, 3))
def test_progress_bar_counts_every_node(steps):
    gm = fxviz.trace(torch.nn.Sequential(*[torch.nn.ReLU() for _ in range(70 * steps)]))
    saved = _engine.ENGINE
    _engine.ENGINE = "compiled"
    try:
        counted: list[int] = []
        from tqdm.auto import tqdm

        original = tqdm.update

        def update(self: Any, n: int = 1) -> Any:
            counted.append(n)
            return original(self, n)

        tqdm.update = update  # type: ignore[method-assign]
        try:
            fxviz.record(gm, torch.ones(1), progress=True)
        finally:
            tqdm.update = original  # type: ignore[method-assign]
    finally:
        _engine.ENGINE = saved
    assert sum(counted) == len(gm.graph.nodes)


@pytest.mark.parametrize("name", ['say "hi"', "new\nline", "class", "_fx_v0", "ünï"])
def test_node_names_that_are_no_python_names(name):
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.relu, (x,))
    node.name = name
    graph.output(graph.call_method("neg", (node,)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    rec = _record_on("compiled", gm, torch.tensor([-1.0, 2.0]))
    assert rec[name].value.tolist() == [0.0, 2.0]
    assert rec.output.tolist() == [-0.0, -2.0]


def test_a_write_through_a_dunder_method_is_seen_by_both_engines():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.mul, (x, 2))
    z = graph.call_method("__iadd__", (y, 1))
    graph.output(z)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    with pytest.warns(fxviz.FxvizWarning, match="did not foresee"):
        rec = fxviz.record(gm, torch.ones(2))
    assert rec[z.name].mutates == (y.name,)
    assert rec[y.name].outputs[0].max == 2.0  # its statistics are from before the write


def _fails_after_a_batch(x: torch.Tensor) -> Any:
    y = torch.relu(x).view(2, 2).sin() * 2
    return y @ torch.ones(3, 3)  # a shape error, after four nodes that cannot write


def test_a_node_failing_inside_a_batch_keeps_every_node_run_before_it():
    gm = fxviz.trace(_fails_after_a_batch, torch.ones(4))
    compiled = _record_on("compiled", gm, torch.ones(4))
    interpreted = _record_on("interpreted", gm, torch.ones(4))
    assert isinstance(compiled, fxviz.NodeError)
    assert_same_recording(compiled.recording, interpreted.recording)
    names = [r.name for r in compiled.recording.values()]
    assert names == ["x", "relu", "view", "sin", "mul", "_tensor_constant0", "matmul"]
    assert all(r.time_s > 0 for r in compiled.recording.values())
    assert compiled.recording["view"].aliases == ("relu",)


class _Swapped(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sub = torch.nn.Linear(2, 2)


def _graph_reading_sub_weight_around(call: Any) -> torch.fx.GraphModule:
    """``w1 = sub.weight; call(x); w2 = sub.weight`` as a graph over a ``_Swapped``."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    w1 = graph.get_attr("sub.weight")
    called = graph.call_function(call, (x,))
    w2 = graph.get_attr("sub.weight")
    graph.output((w1, called, w2))
    return torch.fx.GraphModule(_Swapped(), graph)


def test_a_module_rebound_by_a_node_is_looked_up_again_after_it():
    """The compiled engine remembers the modules on ``get_attr`` paths for a run; a node
    that runs unknown code (here it swaps ``sub``) makes it look them up again."""
    other = torch.nn.Linear(2, 2)
    gm: Any = None

    def swap(x: torch.Tensor) -> torch.Tensor:
        gm.sub = other
        return x

    gm = _graph_reading_sub_weight_around(swap)
    first = gm.sub.weight
    rec = _record_on("compiled", gm, torch.ones(2))
    w1, _, w2 = rec.output
    assert w1 is first
    assert w2 is other.weight


def test_a_python_segment_that_assigns_a_module_is_looked_up_again_after_it():
    """A capture's ``python`` node replays assignments of the captured run (here
    ``sub = other``): ``get_attr`` paths read after it see what it assigned."""
    from fxviz._capture._segments import PythonSegment

    other = torch.nn.Linear(2, 2)
    gm = _graph_reading_sub_weight_around(torch.relu)  # replaced below
    held = torch.zeros(2)
    segment = PythonSegment(
        "segment", held, fresh=False, replace={id(held): 0}, writes=[(gm, "_modules", "sub", other)]
    )
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.target = segment
    gm.recompile()
    first = gm.sub.weight
    rec = _record_on("compiled", gm, torch.ones(2))
    w1, _, w2 = rec.output
    assert w1 is first
    assert w2 is other.weight


class _Views(torch.nn.Module):
    """Views of a parameter (a chain of them) and of values, for entries made later."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.lin.weight.t()
        h = torch.relu(x @ w + 1)
        flat = h.view(-1)
        return flat.reshape(4, 2), w.reshape(-1)


def test_entries_made_at_first_read_are_those_made_as_the_graph_ran():
    """The compiled engine makes most entries when the recording is first read: what
    they say is still what was true as the graph ran, after an optimizer-like write to a
    parameter and a write into the output, both made before that first read."""
    views: dict[str, Any] = {}
    for engine in ("compiled", "interpreted"):
        torch.manual_seed(0)
        gm = fxviz.trace(_Views(), torch.ones(2, 4))
        rec = fxviz.record(gm, torch.randn(2, 4), engine=engine)
        with torch.no_grad():
            gm.lin.weight.mul_(2)  # the parameter and its views change after the run
        rec.output[0].add_(1)  # so does what the output shares memory with
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            views[engine] = (_record_view(rec), sorted(str(w.message) for w in caught))
    assert views["compiled"] == views["interpreted"]
    nodes = {n["name"]: n for n in views["compiled"][0]["nodes"]}
    assert nodes["t"]["aliases"] == ["lin_weight"]  # a view of the parameter: measured then
    assert nodes["t"]["outputs"][0]["max"] is not None
    changed = {m.split("'")[1] for m in views["compiled"][1]}  # since: shapes only
    assert changed == {"relu", "view", "reshape", "output"}


class _WritesIntoViews(torch.nn.Module):
    """In-place writes into a value and its views, beside values on other memory."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = torch.relu(x * 2)
        flat = h.view(-1)
        t = torch.tanh(x) + 1  # other memory: no write reaches it
        flat[:3] += 1  # into h's memory, through a view
        h.mul_(2)
        return h, flat, t, t.t()


def test_an_in_place_write_makes_only_the_entries_on_the_memory_it_writes():
    """Before a node writes in place, the kept values on that memory are copied; the
    compiled engine makes the entries of those values then (out of their turn: their
    statistics are taken before the write) and leaves the others to the first read. The
    recording is the interpreted engine's all the same."""
    x = torch.randn(3, 3)
    recs = {e: _record_on(e, fxviz.trace(_WritesIntoViews(), x), x) for e in _engine.ENGINES}
    recorder = recs["compiled"]._records._recorder
    unmade = {
        batch.nodes[k].name
        for batch in recorder._pending
        for k, slot in enumerate(getattr(batch, "slots", ()))
        if type(slot) is tuple
    }
    assert "tanh" in unmade  # no write reached its memory: made when first read
    assert not {"relu", "view"} & unmade  # copied and summarised before the write
    assert_same_recording(recs["compiled"], recs["interpreted"])
    assert recs["compiled"]["relu"].outputs[0].max == torch.relu(x * 2).max().item()


class _OverwrittenLater(torch.nn.Module):
    """Values written in place after their node ran: contiguous, permuted (an elementwise
    op on a transposed input keeps its layout) and the tensors of a tuple."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.sin(x) * 3 + 0.1
        b = torch.cos(x.t()) / 7  # strides (1, n): dense, not contiguous
        top = torch.topk(x, 2)
        a.add_(1)
        b.mul_(-2)
        top.values.sub_(5)
        return a, b, top.values, top.indices


@pytest.mark.parametrize("engine", _engine.ENGINES)
def test_statistics_of_a_value_written_later_are_those_it_had_when_its_node_ran(engine: str):
    """A value about to be written is copied, and its statistics may then wait for the
    first read (taken from the copy): bit for bit the numbers taken as its node ran."""
    x = torch.randn(5, 5) * 4
    gm = fxviz.trace(_OverwrittenLater(), x)
    lazy = _record_on(engine, gm, x)
    eager = _record_on(engine, gm, x, stats="eager")
    assert _record_view(lazy) == _record_view(eager)
    b = lazy["truediv"]
    assert b.outputs[0].stride == (1, 5)
    assert b.outputs[0].max == (torch.cos(x.t()) / 7).max().item()


@pytest.mark.parametrize("engine", _engine.ENGINES)
def test_a_dropped_recording_frees_its_values_at_once(engine: str):
    """Recording in a loop must not pile values up until the garbage collector's next
    pass (on a GPU, until memory runs out): nothing a recording holds refers back to it,
    read or not."""
    x = torch.randn(8, 16)
    gm = fxviz.trace(_OverwrittenLater(), x)
    gc.collect()
    gc.disable()
    try:
        for read in (False, True):
            rec = _record_on(engine, gm, x)
            if read:
                rec.table()
            values = [weakref.ref(v) for v in rec.env.values() if type(v) is torch.Tensor]
            values = [r for r in values if r() is not x]  # the input: the test holds it
            assert len(values) > 5
            del rec
            assert [r for r in values if r() is not None] == [], "held until gc.collect()"
    finally:
        gc.enable()


def _write_then_fail(t: torch.Tensor) -> torch.Tensor:
    t.mul_(5)  # writes its input, then fails
    raise ValueError("boom")


torch.fx.wrap("_write_then_fail")


class _FailsAfterWriting(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = x * 2 + 1
        return _write_then_fail(e)


@pytest.mark.parametrize("engine", _engine.ENGINES)
def test_a_node_that_writes_its_input_then_fails_is_said_to_have_written_it(engine: str):
    """A partial recording whose failed node wrote a kept value (code fxviz does not know,
    so nothing was copied) says so, as a whole run does: a warning, and ``mutates``."""
    gm = torch.fx.symbolic_trace(_FailsAfterWriting())
    error = _record_on(engine, gm, torch.arange(3.0))
    assert isinstance(error, fxviz.NodeError)
    rec = error.recording
    assert rec["_write_then_fail"].mutates == ("add",)
    assert rec["add"].outputs[0].max == 5.0  # measured before the call (unknown code)
    warned = _record_on.warned  # type: ignore[attr-defined]
    assert any("_write_then_fail" in m and "add" in m for m in warned), warned
