"""One cell of the conformance matrix: a verb on a model captured one way. Each check
raises ``AssertionError`` when the verb gives a wrong answer; a verb that refuses raises
its ``FxvizError``, which the matrix compares with the documented refusal."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import fxviz
from fxviz._capture import tensors_in
from tests.conformance.zoo import build

KINDS = ("symbolic", "export", "dynamo", "real", "joint", "loaded")
VERBS = (
    "record", "debugger", "backward", "shapes_real", "shapes_fake", "shapes_meta", "save_load",
    "compare_dtype", "compare_pass", "diff", "to_dot", "report",
)  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


class Subject:
    """A zoo model, its inputs, its eager output, and its capture of one kind (made once)."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.model, self.args, self.kwargs = build(name)
        with torch.no_grad():
            self.want = self.model(*self.args, **self.kwargs)
        self._captured: Any = None
        self._error: BaseException | None = None

    @property
    def captured(self) -> Any:
        """What the verbs get: the capture of that kind (made once, with grad mode on, as
        backward needs it), or a loaded file's recording; a capture that failed raises
        its error again in every cell of the row."""
        if self._error is not None:
            raise self._error
        if self._captured is None:
            try:
                self._captured = self._capture()
            except Exception as error:
                self._error = error
                raise
        return self._captured

    def _capture(self) -> Any:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            if self.kind != "loaded":
                return fxviz.trace(self.model, *self.args, method=self.kind, **self.kwargs)
            with torch.no_grad():
                rec = fxviz.record(self.model, *self.args, **self.kwargs)
            path = Path(tempfile.mkdtemp()) / f"{self.name}.fxrec"
            rec.save(path)
            return fxviz.load(path)

    def record(self, **options: Any) -> Any:
        captured = self.captured
        if self.kind == "loaded" and not options:
            return captured
        grad = torch.enable_grad() if "backward" in options else torch.no_grad()
        with grad:
            return fxviz.record(captured, *self.args, **self.kwargs, progress=False, **options)


def same_tensors(got: Any, want: Any) -> None:
    """The same tensors, bitwise, in the same order (caches and model outputs included)."""
    a, b = tensors_in(got), tensors_in(want)
    assert len(a) == len(b) > 0, f"{len(a)} tensors, want {len(b)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x.shape == y.shape, f"output tensor {i}: shape {x.shape}, want {y.shape}"
        assert torch.equal(x, y), f"output tensor {i} differs"


def _joint_outputs(jrec: Any) -> list[torch.Tensor]:
    """The model's outputs among a joint recording's forward outputs (saved tensors after)."""
    return jrec.joint._split(list(jrec.forward.output))[0]


def _holds(got: list[torch.Tensor], want: Any) -> None:
    """Every tensor of ``want`` is one of ``got`` (a joint graph returns the tensors its
    output object is built from, in its own order), to float32 rounding: AOTAutograd's
    forward is decomposed ATen, not eager's kernels (Swin's differs by 2e-9), as with the
    gradients below (tests/test_joint.py holds our own GPT's and CNN's joint graphs to
    eager bitwise, where the decomposition happens to keep the kernels' order)."""
    for i, y in enumerate(tensors_in(want)):
        same = [x for x in got if isinstance(x, torch.Tensor) and x.shape == y.shape]
        assert any(_close(x, y) for x in same), f"output tensor {i} {list(y.shape)} missing"


def _close(x: torch.Tensor, y: torch.Tensor) -> bool:
    if torch.equal(x, y) or not y.is_floating_point() or x.dtype != y.dtype:
        return torch.equal(x, y)
    scale = float(y.abs().max()) if y.numel() else 0.0
    return float((x - y).abs().max()) <= 1e-6 * max(scale, 1.0)


def _record(s: Subject) -> None:
    rec = s.record()
    if s.kind == "joint":  # both passes, as a JointRecording
        assert rec.forward.complete
        assert rec.backward.complete
        _holds(_joint_outputs(rec), s.want)
        return
    assert rec.complete
    want = s.want
    if s.kind in ("symbolic", "export") and not isinstance(want, torch.Tensor):
        want = tensors_in(want)  # one graph returns the flattened tensors
    same_tensors(rec.output, want)
    if s.kind == "loaded":
        assert type(rec.output).__name__ == type(s.want).__name__


def _debugger(s: Subject) -> None:
    captured = s.captured
    with torch.no_grad():  # the mode ``want`` was computed in: a Debugger runs in its own
        dbg = fxviz.Debugger(captured, *s.args, **s.kwargs)
    dbg.continue_()
    assert dbg.done
    assert dbg.error is None
    if s.kind == "joint":  # it steps through the backward graph: the gradients
        same_tensors(dbg.output, s.record().backward.output)
        return
    same_tensors(dbg.output, s.want if s.kind not in ("symbolic", "export") else tensors_in(s.want))


def _loss(output: Any) -> torch.Tensor:
    floats = [t for t in tensors_in(output) if t.is_floating_point() and t.requires_grad]
    return sum(t.float().sum() for t in floats)  # type: ignore[return-value]


def _backward(s: Subject) -> None:
    rec = s.record(backward=_loss)
    params = dict(s.model.named_parameters())
    by_id = {id(p): name for name, p in params.items()}
    got = {}
    if s.kind == "joint":  # a JointRecording: the backward graph's gradients, by primal
        grads = {k: v for k, v in rec.grads.items() if v is not None}
        traced = dict(rec.joint.model.named_parameters(remove_duplicate=False))
        named = {k: (traced.get(k), g) for k, g in grads.items()}
    else:
        traced = dict(rec.graph_module.named_parameters())
        named = {k: (traced.get(k), g.value) for k, g in rec.gradients.parameters.items()}
    for name, (p, grad) in named.items():
        if p is None and s.kind == "joint":
            continue  # an input's gradient
        assert p is not None, f"gradient of {name!r}: not a parameter of the capture"
        assert id(p) in by_id, f"gradient of {name!r}: not a model parameter"
        got[by_id[id(p)]] = grad
    assert got, "no parameter gradient recorded"
    names = list(got)
    want = torch.autograd.grad(
        _loss(s.model(*s.args, **s.kwargs)), [params[n] for n in names], allow_unused=True
    )
    for name, g in zip(names, want, strict=True):
        if g is None:
            assert got[name] is None or not got[name].any(), name
        elif s.kind == "joint":
            # AOTAutograd's backward graph is decomposed ATen, not eager's kernels (an
            # embedding's gradient accumulates by index_put): the same sums, other orders
            scale = float(g.abs().max()) if g.numel() else 0.0
            err = float((got[name] - g).abs().max()) if g.numel() else 0.0
            assert err <= 1e-6 * max(scale, 1.0), f"gradient of {name} differs by {err:.3g}"
        else:
            assert torch.equal(got[name], g), f"gradient of {name} differs"


def _shapes(mode: str) -> Callable[[Subject], None]:
    def check(s: Subject) -> None:
        with torch.no_grad():
            rep = fxviz.shapes(s.captured, *s.args, mode=mode, progress=False, **s.kwargs)
        recording = rep.forward if s.kind == "joint" else rep.recording  # joint: both passes
        got = {tuple(r.shape) for r in recording.values() if r.shape is not None}
        for t in tensors_in(s.want):
            assert tuple(t.shape) in got, f"no node has the output's shape {tuple(t.shape)}"

    return check


_DIGEST = """
import sys, hashlib, torch, fxviz
import transformers, diffusers  # a user's session has the model's library imported
from fxviz._capture import tensors_in
def raw(t):  # see _raw
    return t.detach().reshape(-1).clone(memory_format=torch.contiguous_format).view(torch.uint8).numpy().tobytes()
rec = fxviz.load(sys.argv[1])
h = hashlib.sha256()
for r in rec.values():
    if r.kept:
        for t in tensors_in(r.value):
            h.update(r.name.encode()); h.update(raw(t))
for t in tensors_in(rec.output):
    h.update(raw(t))
cmp = fxviz.compare(rec, rec)
assert cmp.first_divergence is None, cmp.first_divergence
print(type(rec.output).__name__, h.hexdigest())
"""


def _raw(t: torch.Tensor) -> bytes:
    """A tensor's bytes. ``contiguous()`` is no copy for a one-element view with another
    stride (Qwen2-VL's ``image_grid_thw[:, 0]``: shape [1], stride 3), which then cannot be
    viewed as bytes; a clone in the contiguous format always can."""
    flat = t.detach().reshape(-1).clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8).numpy().tobytes()


def _digest(rec: Any) -> str:
    import hashlib

    h = hashlib.sha256()
    for r in rec.values():
        if r.kept:
            for t in tensors_in(r.value):
                h.update(r.name.encode())
                h.update(_raw(t))
    for t in tensors_in(rec.output):
        h.update(_raw(t))
    return f"{type(rec.output).__name__} {h.hexdigest()}"


def _save_load(s: Subject) -> None:
    rec = s.record()
    path = Path(tempfile.mkdtemp()) / "run.fxrec"
    rec.save(path)
    done = subprocess.run(
        [sys.executable, "-c", _DIGEST, str(path)], cwd=ROOT, capture_output=True, text=True,
        timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == _digest(rec)


def _compare_dtype(s: Subject) -> None:
    s.captured
    cmp = fxviz.compare_dtype(s.model, *s.args, dtype=torch.bfloat16, **s.kwargs)
    assert len(cmp.table()) > 0


def _compare_pass(s: Subject) -> None:
    cmp = fxviz.compare_pass(s.captured, lambda gm: None, *s.args, **s.kwargs)
    assert cmp.first_divergence is None


def _diff(s: Subject) -> None:
    with torch.no_grad():
        d = fxviz.diff(s.captured, s.captured, *s.args, **s.kwargs)
    assert d.first_divergence is None


TITLES = {
    "symbolic": "(symbolic_trace)",
    "export": "(torch.export)",
    "dynamo": "(dynamo)",
    "real": "(one real run)",
}


def _drawn(s: Subject) -> Any:
    """What the drawing verbs get: a recording, or the joint graph itself."""
    return s.captured if s.kind == "joint" else s.record()


def _to_dot(s: Subject) -> None:
    source = fxviz.to_dot(_drawn(s)).source
    assert "digraph" in source
    if s.kind in TITLES:  # the title names the capture
        assert f"{type(s.model).__name__} {TITLES[s.kind]}" in source


def _report(s: Subject) -> None:
    page = fxviz.report(_drawn(s))
    assert page is not None
    assert "<html" in page.lower()
    if s.kind in TITLES:
        assert TITLES[s.kind] in page


CHECKS: dict[str, Callable[[Subject], None]] = {
    "record": _record,
    "debugger": _debugger,
    "backward": _backward,
    "shapes_real": _shapes("real"),
    "shapes_fake": _shapes("fake"),
    "shapes_meta": _shapes("meta"),
    "save_load": _save_load,
    "compare_dtype": _compare_dtype,
    "compare_pass": _compare_pass,
    "diff": _diff,
    "to_dot": _to_dot,
    "report": _report,
}
