"""fxviz's recording interpreters are drop-ins for torch.fx's: every public behaviour of
``Interpreter``, ``Transformer`` and ``ShapeProp`` is run with plain torch and with each
fxviz recording class, and the results, ``env``, exceptions and side effects compared."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.shape_prop import ShapeProp

import fxviz
from fxviz._record import RecordingInterpreter, recording_class
from fxviz.examples import NegSigmSwapInterpreter, NegSigmSwapXformer, neg_sigmoid


def _recording_variants(cls: type) -> list[Callable[..., Any]]:
    variants: list[Callable[..., Any]] = [recording_class(cls)]
    if cls is torch.fx.Interpreter:
        variants.append(RecordingInterpreter)
    return variants


def _all_variants(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    recording = _recording_variants(cls)
    return [("torch", cls)] + [(getattr(v, "__name__", "?"), v) for v in recording]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor, scale: float = 2.0) -> Any:
        self.calls.add_(x.new_ones(()))  # a side effect on a buffer
        y = torch.relu(self.lin(x)) * scale
        return y.sum(dim=1), y.neg()


def _env_snapshot(env: dict[torch.fx.Node, Any]) -> dict[str, Any]:
    return {node.name: value for node, value in env.items()}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@pytest.mark.parametrize("gc", [True, False])
def test_run_gives_the_same_output_env_and_side_effects(gc: bool):
    results = []
    for _, cls in _all_variants(torch.fx.Interpreter):
        torch.manual_seed(0)
        gm = torch.fx.symbolic_trace(Net())
        interp = cls(gm, garbage_collect_values=gc)
        out = interp.run(torch.ones(2, 4))
        results.append((out, _env_snapshot(interp.env), gm.calls.clone(), interp.extra_traceback))
    plain = results[0]
    for other in results[1:]:
        assert _same(other[0], plain[0])
        assert other[1].keys() == plain[1].keys()
        assert all(_same(other[1][k], plain[1][k]) for k in plain[1])
        assert torch.equal(other[2], plain[2])
        assert other[3] is plain[3] is True


def test_collected_values_are_dropped_from_the_recording_and_kept_when_asked():
    gm = torch.fx.symbolic_trace(Net())
    x = torch.ones(2, 4)
    for cls in _recording_variants(torch.fx.Interpreter):
        collecting = cls(gm, garbage_collect_values=True)
        collecting.run(x)
        rec = collecting.recording
        assert not any(r.kept for r in rec.values())  # as keep="stats"
        assert rec["relu"].outputs[0].min == 0.0  # statistics are kept
        assert rec["relu"].value is None
        keeping = cls(gm, garbage_collect_values=False)
        keeping.run(x)
        assert all(r.kept for r in keeping.recording.values())
        assert torch.equal(keeping.recording["relu"].value, keeping.env[_node(gm, "relu")])


def test_positional_graph_argument_and_default_constructor():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    other = torch.fx.symbolic_trace(lambda x: x * 3)
    x = torch.randn(3)
    outs = [cls(gm, True, other.graph).run(x) for _, cls in _all_variants(torch.fx.Interpreter)]
    assert all(torch.equal(o, x * 3) for o in outs)
    defaults = [cls(gm).garbage_collect_values for _, cls in _all_variants(torch.fx.Interpreter)]
    assert defaults == [True] * len(defaults)


def test_boxed_run_clears_the_list_and_checks_the_count():
    gm = torch.fx.symbolic_trace(Net())
    for _, cls in _all_variants(torch.fx.Interpreter):
        args = [torch.ones(2, 4), 3.0]
        out = cls(gm).boxed_run(args)
        assert args == []
        assert _same(out, gm(torch.ones(2, 4), 3.0))
    messages = []
    for _, cls in _all_variants(torch.fx.Interpreter):
        with pytest.raises(RuntimeError) as info:
            cls(gm).boxed_run([torch.ones(2, 4)])
        messages.append(str(info.value))
    assert len(set(messages)) == 1
    assert "missing arguments" in messages[0]


class CountingInterpreter(torch.fx.Interpreter):
    """Overrides run_node and every call_* hook, logging each call."""

    def __init__(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        super().__init__(module, *args, **kwargs)
        self.log: list[tuple[str, Any]] = []

    def run_node(self, n: torch.fx.Node) -> Any:
        self.log.append(("run_node", n.name))
        return super().run_node(n)

    def placeholder(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("placeholder", target))
        return super().placeholder(target, args, kwargs)

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("get_attr", target))
        return super().get_attr(target, args, kwargs)

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("call_function", getattr(target, "__name__", target)))
        if target is operator.mul:  # change what a node computes
            return operator.add(*args, **kwargs)
        return super().call_function(target, args, kwargs)

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("call_method", target))
        return super().call_method(target, args, kwargs)

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("call_module", target))
        return super().call_module(target, args, kwargs)

    def output(self, target: Any, args: Any, kwargs: Any) -> Any:
        self.log.append(("output", target))
        return super().output(target, args, kwargs)


def test_overridden_hooks_run_in_the_same_order_with_the_same_effect():
    gm = torch.fx.symbolic_trace(Net())
    seen = []
    for _, cls in _all_variants(CountingInterpreter):
        interp = cls(gm)
        out = interp.run(torch.ones(2, 4))
        seen.append((interp.log, out))
    assert all(log == seen[0][0] for log, _ in seen)
    assert all(_same(out, seen[0][1]) for _, out in seen)
    assert ("call_module", "lin") in seen[0][0]
    rec_cls = recording_class(CountingInterpreter)
    interp = rec_cls(gm, garbage_collect_values=False)
    interp.run(torch.ones(2, 4), 5.0)
    x = torch.relu(gm.lin(torch.ones(2, 4)))
    assert torch.equal(interp.recording["mul"].value, x + 5.0)  # the override's value


def test_initial_env_evaluates_only_the_missing_nodes():
    gm = torch.fx.symbolic_trace(Net())
    relu = _node(gm, "relu")
    given = torch.full((2, 3), 7.0)
    logs = []
    for _, cls in _all_variants(CountingInterpreter):
        interp = cls(gm, garbage_collect_values=False)
        out = interp.run(torch.ones(2, 4), initial_env={relu: given})
        logs.append((interp.log, out, _env_snapshot(interp.env)))
    plain_log, plain_out, _plain_env = logs[0]
    assert ("run_node", "relu") not in plain_log
    assert ("call_module", "lin") in plain_log  # lin is evaluated (it is not in initial_env)
    for log, out, env in logs[1:]:
        assert log == plain_log
        assert _same(out, plain_out)
        assert env["relu"] is given
    interp = recording_class(CountingInterpreter)(gm)
    interp.run(torch.ones(2, 4), initial_env={relu: given})
    assert "relu" not in interp.recording  # only what ran is recorded


def test_enable_io_processing_false_takes_flat_inputs_and_returns_the_raw_output():
    def f(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"sum": inputs["a"] + inputs["b"]}

    ph = torch.fx._symbolic_trace.PH
    gm = torch.fx.symbolic_trace(f, concrete_args={"inputs": {"a": ph, "b": ph}})
    a, b = torch.ones(2), torch.full((2,), 2.0)
    for _, cls in _all_variants(torch.fx.Interpreter):
        structured = cls(gm).run({"a": a, "b": b})
        assert isinstance(structured, dict)
        assert torch.equal(structured["sum"], a + b)
        raw = cls(gm).run(a, b, enable_io_processing=False)
        assert isinstance(raw, list)
        assert torch.equal(raw[0], a + b)


def test_star_args_and_default_placeholders():
    def star(x: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        return x + rest[0]

    def default(x: torch.Tensor, k: int = 3) -> torch.Tensor:
        return x * k

    star_gm = torch.fx.symbolic_trace(star)
    default_gm = torch.fx.symbolic_trace(default)
    x = torch.ones(2)
    for _, cls in _all_variants(torch.fx.Interpreter):
        assert torch.equal(cls(star_gm).run(x, x * 2, x * 5), x * 3)
        assert torch.equal(cls(default_gm).run(x), x * 3)
        assert torch.equal(cls(default_gm).run(x, 4), x * 4)


def test_run_node_called_directly_with_a_hand_made_env():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    x = torch.randn(3)
    placeholder, sigmoid = list(gm.graph.nodes)[:2]
    for _, cls in _all_variants(torch.fx.Interpreter):
        interp = cls(gm)
        interp.env = {placeholder: x}
        assert torch.equal(interp.run_node(sigmoid), torch.sigmoid(x))


class RaisingInterpreter(torch.fx.Interpreter):
    error: BaseException = TypeError("bad operand")

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target is torch.sigmoid:
            raise self.error
        return super().call_function(target, args, kwargs)


class CustomError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"code {code}: {detail}")
        self.code = code


@pytest.mark.parametrize(
    "make_error",
    [
        lambda: TypeError("bad operand"),
        lambda: ValueError("bad value"),
        lambda: KeyError("missing"),
        lambda: OSError(2, "no such file"),
        lambda: CustomError(7, "custom"),
        lambda: torch.OutOfMemoryError("pretend OOM"),
    ],
    ids=["TypeError", "ValueError", "KeyError", "OSError", "custom", "OutOfMemoryError"],
)
@pytest.mark.parametrize("extra_traceback", [True, False])
def test_a_failing_node_raises_what_plain_torch_raises(make_error: Any, extra_traceback: bool):
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    caught = []
    for _, cls in _all_variants(RaisingInterpreter):
        interp = cls(gm)
        interp.error = make_error()
        interp.extra_traceback = extra_traceback
        with pytest.raises(Exception) as info:  # noqa: PT011 (the type is what we compare)
            interp.run(torch.ones(2))
        caught.append((info.value, interp))
    plain, _ = caught[0]
    for error, interp in caught[1:]:
        assert isinstance(error, type(plain))  # except <what torch raises> still catches it
        assert isinstance(error, type(make_error()))  # and the node's own type
        assert isinstance(error, fxviz.NodeError)
        assert error.node == "sigmoid"
        assert str(error.__cause__) == str(plain)  # torch's own text, "While executing" too
        assert error.recording["sigmoid"].error is not None
        assert list(error.recording) == ["x", "sigmoid"]
        assert interp.extra_traceback is extra_traceback  # no flag left changed
    if isinstance(plain, CustomError):
        assert caught[1][0].code == 7
    if isinstance(plain, OSError) and not isinstance(plain, fxviz.NodeError):
        assert "no such file" in str(caught[1][0])
    assert type(caught[1][0]) is fxviz.errors.node_error_type(fxviz.NodeError, type(make_error()))


def test_record_keeps_the_exception_type_and_the_node_error_class_is_cached():
    with pytest.raises(TypeError) as info:
        fxviz.record(lambda x: x + "a", torch.ones(1))
    assert isinstance(info.value, fxviz.NodeError)
    with pytest.raises(TypeError) as again:
        fxviz.record(lambda x: x - "b", torch.ones(1))
    assert type(again.value) is type(info.value)
    assert type(info.value).__name__ == "NodeError[TypeError]"


def test_transformer_output_metadata_and_stack_traces_are_the_same():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    for node in gm.graph.nodes:
        node.meta["stack_trace"] = f'  File "model.py", line 1, in forward\n    {node.name}'
        node.meta["custom"] = node.name.upper()
    outputs = []
    for _, cls in _all_variants(NegSigmSwapXformer):
        new = cls(gm).transform()
        nodes = [
            (n.op, n.target, n.meta.get("stack_trace"), n.meta.get("custom"))
            for n in new.graph.nodes
        ]
        outputs.append((nodes, new.code))
    assert all(o == outputs[0] for o in outputs)
    assert any(stack for _, _, stack, _ in outputs[0][0])
    rec_cls = recording_class(NegSigmSwapXformer)
    xformer = rec_cls(gm)
    xformer.transform()
    assert list(xformer.recording) == [n.name for n in gm.graph.nodes]


def test_interpreter_subclass_changes_values_the_same_way():
    gm = torch.fx.symbolic_trace(neg_sigmoid)
    x = torch.randn(4)
    outs = [cls(gm).run(x) for _, cls in _all_variants(NegSigmSwapInterpreter)]
    assert all(torch.equal(o, outs[0]) for o in outs)


def test_shape_prop_writes_the_same_metadata():
    metas = []
    for _, cls in _all_variants(ShapeProp):
        gm = torch.fx.symbolic_trace(Net())
        cls(gm).propagate(torch.ones(2, 4))
        metas.append([str(n.meta.get("tensor_meta")) for n in gm.graph.nodes])
    assert all(m == metas[0] for m in metas)


def _nonzero_graph(x: torch.Tensor) -> Any:
    y = torch.nonzero(x)
    return y * 2, y.sum(), y.shape[0]


@pytest.mark.parametrize("stats", [True, False])
def test_shape_prop_recorded_in_fake_mode_with_data_dependent_sizes(stats: bool):
    results = []
    for name, cls in _all_variants(ShapeProp):
        gm = torch.fx.symbolic_trace(_nonzero_graph)
        with FakeTensorMode(shape_env=ShapeEnv()) as mode:
            x = torch.empty(4, 5)
            interp = cls(gm, fake_mode=mode)
            if name != "torch":
                interp.fxviz_configure(stats=stats)
            out = interp.propagate(x)
        results.append((out, [str(n.meta.get("tensor_meta")) for n in gm.graph.nodes]))
        if name != "torch":
            rec = interp.recording
            assert rec.complete
            assert rec["nonzero"].shape == ("u0", 2)
            assert rec["nonzero"].dtype == torch.int64
            assert rec["nonzero"].outputs[0].min is None  # nothing that needs a guard
            assert rec["nonzero"].outputs[0].numel == -1
    assert all(str(o[0]) == str(results[0][0]) for o in results)
    assert all(o[1] == results[0][1] for o in results)


def _node(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.name == name)


def test_shapes_and_debugger_keep_the_exception_type_too():
    with pytest.raises(TypeError) as info:
        fxviz.shapes(lambda x: x + "a", torch.ones(2))
    assert isinstance(info.value, fxviz.ShapeError)
    assert info.value.report is not None
    dbg = fxviz.Debugger(lambda x: x + "a", torch.ones(2))
    dbg.continue_()
    assert isinstance(dbg.error, TypeError)
    assert dbg.current.name == "add"


def test_debugger_and_predicates_under_fake_mode_with_data_dependent_sizes():
    def f(x: torch.Tensor) -> Any:
        y = torch.nonzero(torch.nn.functional.dropout(x, 0.5))
        return y.float() * 2, y.sum()

    gm = torch.fx.symbolic_trace(f)
    with FakeTensorMode(shape_env=ShapeEnv()):
        x = torch.empty(4, 5)
        dbg = fxviz.Debugger(gm, x)
        dbg.break_when(fxviz.has_nonfinite)
        dbg.break_when(fxviz.dtype_changed)
        assert dbg.continue_().name == "nonzero"  # int64 from float32: dtype_changed
        while not dbg.done:
            dbg.continue_()
        rec = dbg.recording
        assert rec["nonzero"].shape == ("u0", 2)
        assert rec["float_1"].shape == ("u0", 2)
        assert rec["mul"].outputs[0].numel == -1  # unknown without a guard
        dbg.restart()
        dbg.continue_()
        assert dbg.stop_reason == "dtype_changed"


def test_typed_node_errors_pickle_without_the_recording():
    import pickle

    with pytest.raises(TypeError) as info:
        fxviz.record(lambda x: x + "a", torch.ones(1))
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is type(info.value)
    assert str(copy) == str(info.value)
    assert copy.node == "add"
    assert copy.recording is None
