"""A Dynamo capture never records a branch only compiled code takes: it is checked against
one eager call, captured again with the model's own files told ``is_compiling() == False``
(an installed library's model: transformers' Mamba), or refused, and ``auto`` then
captures one real run."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

import fxviz
from fxviz._capture import tensors_in
from fxviz.errors import TraceError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# An installed library: compiled code adds one (a "fast path" that gives other numbers).
_LIBRARY = """
import torch


def scan(x):
    if torch.compiler.is_compiling():
        return x + 1
    return x


def scale(x, w):
    if torch.compiler.is_compiling():  # the same values by another path: other gradients
        return x * w + (w - w.detach()) * 0.5
    return x * w


def scale_unless_exporting(x, w):
    if torch.compiler.is_exporting():  # as transformers' causal mask: torch.export only
        return x * w + (w - w.detach()) * 0.5
    return x * w


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return scan(self.lin(x))
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    """``fakelib``, imported from a ``site-packages`` folder (an installed library)."""
    root = tmp_path / "site-packages"
    root.mkdir()
    (root / "fakelib.py").write_text(textwrap.dedent(_LIBRARY))
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop("fakelib", None)
    yield importlib.import_module("fakelib")
    sys.modules.pop("fakelib", None)


class UserModel(torch.nn.Module):
    """The user's own model calling the library's function (not one of its modules)."""

    def __init__(self, library):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scan = library.scan

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > -1e9:  # a tensor's value steers Python: no one graph holds it
            y = y * 2
        return self.scan(y)


def test_a_library_models_compile_only_branch_is_not_captured(library):
    torch.manual_seed(0)
    model, x = library.Block(), torch.randn(2, 4)
    capture = fxviz.trace(model, x, method="dynamo")
    with torch.no_grad():
        got, want = fxviz.record(capture, x).output, model(x)
    assert torch.equal(tensors_in(got)[0], want)  # x, not x + 1


def test_a_compile_only_branch_outside_the_models_files_is_refused_and_auto_runs_it(library):
    torch.manual_seed(0)
    model, x = UserModel(library), torch.randn(2, 4)
    with pytest.raises(TraceError, match=r"do not compute what a call computes .*method='real'"):
        fxviz.trace(model, x, method="dynamo")
    capture = fxviz.trace(model, x)  # auto: symbolic and export cannot, Dynamo differs
    assert capture.meta["fxviz_method"] == "real"
    with torch.no_grad():
        assert torch.equal(tensors_in(fxviz.record(capture, x).output)[0], model(x))


def test_the_check_leaves_model_inputs_and_random_stream_as_they_were():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    x = torch.randn(2, 4)
    before = torch.random.get_rng_state()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    capture = fxviz.trace(model, x, method="dynamo")  # random, yet the same as one call
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    torch.random.set_rng_state(before)
    want = model(x)
    torch.random.set_rng_state(before)
    assert torch.equal(tensors_in(fxviz.record(capture, x).output)[0], want)


class Scaled(torch.nn.Module):
    """The user's model calling a library function whose compiled branch gives eager's
    output with other gradients (as transformers' explicit causal mask does)."""

    def __init__(self, library):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.w = torch.nn.Parameter(torch.tensor(1.5))
        self.scale = library.scale

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > -1e9:  # no one graph holds it: auto tries Dynamo
            y = y * 2
        return self.scale(y, self.w)


def _eager_gradients(model: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each parameter's gradient of ``model(x).sum()``, by name."""
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(model(x).sum(), list(params.values()))
    return dict(zip(params, grads, strict=True))


def test_a_compile_only_branch_with_eagers_output_but_other_gradients_is_not_recorded(library):
    torch.manual_seed(0)
    model, x = Scaled(library), torch.randn(2, 4)
    want = _eager_gradients(model, x)
    capture = fxviz.trace(model, x, method="dynamo")
    with torch.no_grad():  # its forward pass is eager's
        assert torch.equal(tensors_in(fxviz.record(capture, x).output)[0], model(x))
    with pytest.raises(TraceError, match=r"gradients of this Dynamo capture are not eager's"):
        fxviz.record(capture, x, backward=True)
    with torch.no_grad():  # captured without gradients: checked on one more run with them
        capture = fxviz.trace(model, x, method="dynamo")
    with pytest.raises(TraceError, match=r"not eager's .*fakelib\.py:\d+ \(scale\)"):
        fxviz.record(capture, x, backward=True)
    rec = fxviz.record(model, x, backward=True)  # auto: one real run's backward pass
    assert rec.graph_module.meta["fxviz_method"] == "real"
    got = rec.gradients.parameters
    assert set(got) == set(want)
    for name, g in want.items():
        assert torch.equal(got[name].value, g), name


def test_a_gradient_only_difference_asked_from_a_library_is_captured_once(library, monkeypatch):
    # no file of the model's asked is_compiling(): capturing again with those files told
    # False cannot help, and costs a second Dynamo capture (seconds for an LLM)
    from fxviz._capture import _dynamo

    calls = []
    once = _dynamo._capture_once
    monkeypatch.setattr(_dynamo, "_capture_once", lambda *a: calls.append(a[3]) or once(*a))
    model, x = Scaled(library), torch.randn(2, 4)
    capture = fxviz.trace(model, x, method="dynamo")
    assert calls == [frozenset()]  # one capture, with no file told False
    with pytest.raises(TraceError, match=r"not eager's .*no file of its modules asked"):
        fxviz.record(capture, x, backward=True)


def test_the_gradient_check_waits_for_the_first_backward_pass_and_runs_once(library, monkeypatch):
    # a forward-only capture (fxviz.debug, record without backward=) never pays for the
    # check: one more run of the capture and of the model, with their backward passes
    from fxviz._capture import _gradient_check

    checks = []
    check = _gradient_check.gradient_divergence
    monkeypatch.setattr(
        _gradient_check, "gradient_divergence", lambda *a: checks.append(a) or check(*a)
    )
    torch.manual_seed(0)
    model, x = Scaled(library), torch.randn(2, 4)
    capture = fxviz.trace(model, x, method="dynamo")
    with torch.no_grad():
        fxviz.record(capture, x)
    fxviz.Debugger(capture, x).continue_()
    assert checks == []
    for _ in range(2):  # the answer is kept with the capture
        with pytest.raises(TraceError) as refused:
            fxviz.record(capture, x, backward=True)
        assert str(refused.value) == (
            "the gradients of this Dynamo capture are not eager's (the gradient of w differs "
            "from eager's (by up to 4)): the code takes a branch only compiled code takes "
            "(torch.compiler.is_compiling(); library code told it True: fakelib.py:12 "
            "(scale)), with the same output; with no file of its modules asked. Record the "
            "backward pass of one real run: fxviz.record(fxviz.trace(model, *args, "
            "method='real'), *args, backward=...) (fxviz.record(model, ..., backward=...) does)"
        )
    assert len(checks) == 1


def test_a_recapture_with_eagers_output_still_has_its_gradients_checked():
    # Jamba (transformers): its own mamba scan takes associative_scan only when compiling
    # (other logits: captured again with modeling_jamba.py told False), while masking_utils,
    # an installed library still told True, builds an explicit causal mask: eager's output,
    # other gradients. The recapture was kept unchecked and its backward pass recorded.
    # (From transformers 5.24 the masks agree: the check passes, and the gradients
    # recorded are eager's.)
    from tests.conformance.cells import _loss
    from tests.conformance.expected import CAPTURED_MASKS_DIFFER
    from tests.conformance.zoo import build

    model, args, kwargs = build("jamba")
    capture = fxviz.trace(model, *args, method="dynamo", **kwargs)
    with torch.no_grad():
        got = fxviz.record(capture, *args, **kwargs, progress=False).output
        assert torch.equal(got.logits, model(*args, **kwargs).logits)
    if CAPTURED_MASKS_DIFFER:
        with pytest.raises(
            TraceError,
            match=r"not eager's .*masking_utils\.py.*with the files of its modules told "
            r"is_compiling\(\) False too",
        ):
            fxviz.record(capture, *args, **kwargs, backward=_loss, progress=False)
        return
    rec = fxviz.record(capture, *args, **kwargs, backward=_loss, progress=False)
    params = dict(model.named_parameters())
    want = torch.autograd.grad(_loss(model(*args, **kwargs)), list(params.values()))
    got_grads = rec.gradients.parameters
    assert set(got_grads) == set(params)
    for name, w in zip(params, want, strict=True):
        assert torch.allclose(got_grads[name].value, w, atol=1e-6), name


def test_the_gradient_check_of_a_model_whose_own_backward_fails_lets_the_recording_say_why():
    # RWKV (transformers) writes its state in place after autograd saved it: eager's
    # backward pass fails, so the Dynamo capture's gradient check has nothing to compare
    # with. The check's bare RuntimeError escaped record(backward=); the recording's
    # backward pass now fails as one real run's does, naming the nodes that wrote.
    from tests.hf_models import rwkv

    model, ids = rwkv()
    capture = fxviz.trace(model, input_ids=ids, method="dynamo")
    with pytest.raises(fxviz.NodeError, match=r"(?s)the backward pass failed: .*wrote in place"):
        fxviz.record(capture, input_ids=ids, backward=lambda out: out.logits.sum())


class ExportScaled(torch.nn.Module):
    """A model symbolic tracing cannot take (a branch on a shape) that calls a library
    function whose branch under torch.export gives eager's output with other gradients."""

    def __init__(self, library):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.w = torch.nn.Parameter(torch.tensor(1.5))
        self.scale = library.scale_unless_exporting

    def forward(self, x):
        y = self.lin(x)
        if x.shape[0] > 1:  # a shape steers Python: torch.export specializes it
            y = y * 2
        return self.scale(y, self.w)


def test_an_exported_graphs_gradients_are_checked_at_its_first_backward_pass(library):
    from fxviz._capture._gradient_check import UNCHECKED

    torch.manual_seed(0)
    model, x = ExportScaled(library), torch.randn(2, 4)
    want = _eager_gradients(model, x)
    capture = fxviz.trace(model, x, method="export")
    assert UNCHECKED in capture.meta  # a forward-only capture pays nothing for it
    with torch.no_grad():
        assert torch.equal(fxviz.record(capture, x).output, model(x))
    with pytest.raises(
        TraceError, match=r"gradients of this export capture are not eager's \(the gradient of w "
    ):
        fxviz.record(capture, x, backward=True)
    rec = fxviz.record(model, x, backward=True)  # auto: export, refused, one real run
    assert rec.graph_module.meta["fxviz_method"] == "real"
    got = rec.gradients.parameters
    for name, g in want.items():
        assert torch.equal(got[name].value, g), name


def test_an_exported_graph_with_eagers_gradients_records_its_backward_pass(library):
    torch.manual_seed(0)
    model, x = library.Block(), torch.randn(2, 4)
    capture = fxviz.trace(model, x, method="export")
    rec = fxviz.record(capture, x, backward=True)
    assert rec.graph_module.meta["fxviz_method"] == "export"
    assert set(rec.gradients.parameters) == {"lin.weight", "lin.bias"}
