"""Random ``nn.Module``s, captured by every method, checked against a plain call.

Each generated module chains steps drawn from a grammar of what breaks captures: buffers
read then written in place or replaced, parameters written in place, a Python counter,
a branch only compiled code takes (``torch.compiler.is_compiling()``), a branch on a
tensor's value, a Python loop, batch norm in training mode, and hooks on the root module
(forward, forward-pre, each with or without kwargs). For each module and each capture
method (``auto``, ``symbolic``, ``export``, ``dynamo``, ``real``):

- the capture either refuses (``TraceError``) or holds; either way the model is left
  exactly as it was (values, attributes, autograd version counters);
- ``fxviz.record`` of the capture returns what ``model(x)`` returns on a deep copy, and
  leaves the model in the state that call leaves the copy in;
- ``auto`` always holds, and backward through its recording works.

The default run checks a few hundred modules; ``pytest -m exhaustive`` thousands.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fxviz
from fxviz.errors import TraceError

WIDTH = 4
STEPS = (
    "linear",
    "relu",
    "buffer_inplace",  # y = y * self.b; self.b += 1
    "buffer_replaced",  # y = y + self.b; self.b = self.b * 2
    "param_inplace",  # with no_grad: self.lin.weight.mul_(0.5)
    "counter",  # self.count += 1; y = y * self.count
    "compile_only",  # if torch.compiler.is_compiling(): y = y * 100
    "value_branch",  # if y.sum() > 0: ... else: ...
    "python_loop",  # for _ in range(self.repeat): y = y * 0.5
    "batch_norm",
)
HOOKS = ("forward", "forward_kwargs", "pre", "pre_kwargs")


@dataclasses.dataclass(frozen=True)
class Spec:
    steps: tuple[str, ...]
    hooks: tuple[str, ...]
    training: bool
    seed: int


class Generated(torch.nn.Module):
    """A module whose forward runs ``spec.steps`` in order (one code path for all)."""

    def __init__(self, spec: Spec) -> None:
        super().__init__()
        torch.manual_seed(spec.seed)
        self.steps = spec.steps
        self.lin = torch.nn.Linear(WIDTH, WIDTH)
        self.norm = torch.nn.BatchNorm1d(WIDTH)
        self.register_buffer("b", torch.linspace(0.5, 1.5, WIDTH))
        self.count = 0
        self.repeat = 2
        self.train(spec.training)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        y = x * scale
        for step in self.steps:
            if step == "linear":
                y = self.lin(y)
            elif step == "relu":
                y = torch.relu(y) + 0.1
            elif step == "buffer_inplace":
                y = y * self.b
                self.b += 1
            elif step == "buffer_replaced":
                y = y + self.b
                self.b = self.b * 2
            elif step == "param_inplace":
                with torch.no_grad():
                    self.lin.weight.mul_(0.5)
            elif step == "counter":
                self.count += 1
                y = y * self.count
            elif step == "compile_only":
                if torch.compiler.is_compiling():
                    y = y * 100
            elif step == "value_branch":
                y = y + 1 if y.sum() > 0 else y - 1
            elif step == "python_loop":
                for _ in range(self.repeat):
                    y = y * 0.5
            elif step == "batch_norm":
                y = self.norm(y)
        return y


def _add_hooks(model: torch.nn.Module, hooks: tuple[str, ...]) -> None:
    for hook in hooks:
        if hook == "forward":
            model.register_forward_hook(lambda m, args, out: out * 2)
        elif hook == "forward_kwargs":
            model.register_forward_hook(
                lambda m, args, kwargs, out: out - kwargs.get("scale", 1.0), with_kwargs=True
            )
        elif hook == "pre":
            model.register_forward_pre_hook(lambda m, args: (args[0] + 1, *args[1:]))
        elif hook == "pre_kwargs":
            model.register_forward_pre_hook(
                lambda m, args, kwargs: (args, {**kwargs, "scale": 3.0}), with_kwargs=True
            )


@st.composite
def specs(draw: Any, max_steps: int = 6) -> Spec:
    steps = draw(st.lists(st.sampled_from(STEPS), min_size=1, max_size=max_steps))
    hooks = draw(st.lists(st.sampled_from(HOOKS), max_size=2))
    return Spec(tuple(steps), tuple(hooks), draw(st.booleans()), draw(st.integers(0, 2**16)))


def _build(spec: Spec) -> Generated:
    model = Generated(spec)
    _add_hooks(model, spec.hooks)
    return model


def _state(model: torch.nn.Module) -> dict[str, Any]:
    """Everything a call may change: tensors (values and versions) and plain attributes."""
    state: dict[str, Any] = {"count": model.count, "training": model.training}
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        state[name] = (t.detach().clone(), t._version)
    return state


def _same_state(got: dict[str, Any], want: dict[str, Any], versions: bool) -> bool:
    if got.keys() != want.keys():
        return False
    for key, value in want.items():
        if isinstance(value, tuple):
            if not torch.equal(got[key][0], value[0]):
                return False
            if versions and got[key][1] != value[1]:
                return False
        elif got[key] != value:
            return False
    return True


def _check(spec: Spec, method: str, scale: float) -> None:
    x = torch.randn(3, WIDTH, generator=torch.Generator().manual_seed(spec.seed))
    model = _build(spec)
    reference = copy.deepcopy(model)
    want = reference(x, scale=scale)
    before = _state(model)
    try:
        gm = fxviz.trace(model, x, scale=scale, method=method)
    except TraceError:
        assert method != "auto", spec
        assert _same_state(_state(model), before, versions=True), f"refusal changed {spec}"
        return
    assert _same_state(_state(model), before, versions=True), f"{method} changed the model"
    rec = fxviz.record(gm, x, scale=scale)
    assert rec.complete
    assert torch.equal(rec.output, want), (method, gm.meta["fxviz_method"], spec)
    after = _state(reference)
    assert _same_state(_state(model), after, versions=False), (method, spec)
    if method == "auto" and want.requires_grad and _backward_works(want):
        rec.output.sum().backward()  # as the call's: no "modified by an inplace operation"


def _backward_works(output: torch.Tensor) -> bool:
    try:
        output.sum().backward()
    except RuntimeError:  # y = f(x) * self.b; self.b += 1 fails in eager too
        return False
    return True


FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)


@settings(FAST, max_examples=150)
@given(specs(), st.sampled_from([1.0, 2.0]))
def test_symbolic_holds_or_refuses_and_never_changes_the_model(spec, scale):
    _check(spec, "symbolic", scale)


@settings(FAST, max_examples=20)
@given(specs(), st.sampled_from([1.0, 2.0]))
def test_a_real_run_records_what_a_call_does(spec, scale):
    _check(spec, "real", scale)


@settings(FAST, max_examples=10)
@given(specs(max_steps=4), st.sampled_from([1.0, 2.0]))
def test_auto_records_what_a_call_does(spec, scale):
    _check(spec, "auto", scale)


@settings(FAST, max_examples=12)
@given(specs(max_steps=4))
def test_dynamo_records_what_a_call_does(spec):
    _check(spec, "dynamo", 1.0)


@settings(FAST, max_examples=10)
@given(specs(max_steps=4))
def test_export_holds_or_refuses_and_never_changes_the_model(spec):
    _check(spec, "export", 1.0)


@pytest.mark.exhaustive
@settings(FAST, max_examples=2000)
@given(
    specs(max_steps=10),
    st.sampled_from(["auto", "symbolic", "export", "dynamo", "real"]),
    st.sampled_from([1.0, 0.5, 2.0]),
)
def test_many_generated_modules(spec, method, scale):
    _check(spec, method, scale)


# --- each failure the generated modules stand for, once, by name ---------------------


class Steps(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) * self.steps
        self.steps += 1
        return y


@pytest.mark.parametrize("method", ["auto", "export", "dynamo", "real"])
def test_a_buffer_read_then_updated_is_recorded_as_the_write_it_is(method):
    x = torch.randn(2, 3)
    model = Steps()
    reference = copy.deepcopy(model)
    want = reference(x)  # x·0
    gm = fxviz.trace(model, x, method=method)
    assert model.steps.item() == 0  # tracing alone changes nothing
    rec = fxviz.record(gm, x)
    assert torch.equal(rec.output, want)
    assert model.steps.item() == reference.steps.item() == 1


@pytest.mark.parametrize(
    ("steps", "hooks", "training"),
    [
        (("buffer_inplace", "value_branch"), ("forward",), False),  # self.b += 1
        (("value_branch", "batch_norm"), ("forward",), True),  # statistics: no version bump
        (("buffer_replaced", "value_branch"), ("pre",), False),  # no graph made the output
    ],
)
def test_buffers_a_forward_dynamo_runs_as_python_writes_are_written_by_the_record(
    steps, hooks, training
):
    # a graph break in the steps' loop makes Dynamo run the whole forward as Python; only
    # the hook is a graph
    _check(Spec(steps, hooks, training, 0), "dynamo", 1.0)


def test_symbolic_refuses_a_forward_that_writes_the_model_and_leaves_it_untouched():
    model = Steps()
    with pytest.raises(TraceError, match=r"changes the model \(steps \(written in place\)\)"):
        fxviz.trace(model, method="symbolic")
    assert model.steps.item() == 0
    assert model.steps._version == 0


@pytest.mark.parametrize("method", ["auto", "export", "dynamo", "real"])
@pytest.mark.parametrize("kwargs", [False, True])
def test_root_hooks_run_as_a_call_runs_them(method, kwargs):
    x = torch.randn(2, 3)
    model = torch.nn.Linear(3, 3)
    if kwargs:
        model.register_forward_pre_hook(lambda m, a, k: ((a[0] + 1,), k), with_kwargs=True)
        model.register_forward_hook(lambda m, a, k, out: out * 2, with_kwargs=True)
    else:
        model.register_forward_pre_hook(lambda m, a: (a[0] + 1,))
        model.register_forward_hook(lambda m, a, out: out * 2)
    rec = fxviz.record(fxviz.trace(model, x, method=method), x)
    assert torch.equal(rec.output, model(x))


class _Patched(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) + 1


def test_a_forward_set_on_the_instance_is_what_is_recorded():
    """A call runs ``model.forward`` set on the instance; symbolic tracing would trace the
    class's instead, so ``auto`` moves on and the recording gives the call's output."""
    model, x = _Patched(), torch.randn(2, 3)
    model.forward = lambda x: model.lin(x) * 0
    assert torch.equal(fxviz.record(model, x).output, model(x))
    with pytest.raises(TraceError, match="forward is set on the instance"):
        fxviz.trace(model, method="symbolic")


def test_symbolic_refuses_root_hooks_it_would_skip():
    model = torch.nn.Linear(3, 3)
    model.register_forward_hook(lambda m, a, out: out * 2)
    with pytest.raises(TraceError, match="forward hooks of its own"):
        fxviz.trace(model, method="symbolic")


class CompileOnly(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if torch.compiler.is_compiling():
            return y * 100
        return y


@pytest.mark.parametrize("method", ["auto", "export", "dynamo", "real"])
def test_a_compile_only_branch_is_not_recorded_as_if_eager_ran_it(method):
    x = torch.randn(2, 3)
    model = CompileOnly()
    rec = fxviz.record(fxviz.trace(model, x, method=method), x)
    assert torch.equal(rec.output, model(x))
    assert not torch.compiler.is_compiling()  # the patch is gone


@pytest.mark.parametrize("method", ["dynamo", "real"])
@pytest.mark.parametrize("training", [True, False])
def test_backward_through_a_captured_batch_norm(method, training):
    x = torch.randn(4, 3)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).train(training)
    capture = fxviz.trace(model, x, method=method)
    first, second = capture(x), capture(x)
    second.sum().backward()
    first.sum().backward()  # each call hands back its own tensors
    rec = fxviz.record(capture, x)
    rec.output.sum().backward()
    assert model[0].weight.grad is not None


def test_python_attributes_set_in_forward_are_set_by_the_recorded_run():
    class Keeps(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            self.calls += 1
            self.last = y.relu()
            return y

    x = torch.randn(2, 3)
    model = Keeps()
    gm = fxviz.trace(model, x)
    assert gm.meta["fxviz_method"] == "dynamo"  # symbolic and export refuse it
    assert model.calls == 0
    assert not hasattr(model, "last")
    rec = fxviz.record(gm, x)
    assert model.calls == 1
    assert torch.equal(model.last, rec.output.relu())


def test_export_refuses_a_python_counter_it_would_bake_in():
    class Counts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return self.lin(x) * self.calls

    model = Counts()
    with pytest.raises(TraceError, match="sets calls: an exported graph keeps the value"):
        fxviz.trace(model, torch.randn(2, 3), method="export")
    assert model.calls == 0


def test_values_python_made_are_replayed_as_the_graph_was_given_them():
    @torch.compiler.disable
    def made_in_python(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    class WritesIt(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = made_in_python(x)
            z.add_(x * 2)  # a graph writes, in place, what Python made
            return z.relu()

    x = torch.randn(5)
    capture = fxviz.trace(WritesIt(), x, method="dynamo")
    for _ in range(2):
        assert torch.equal(fxviz.record(capture, x).output, (3 * x).relu())
