"""Gradients per node: tensor hooks on the recorded outputs, fired as autograd computes them.

While the forward pass is recorded, every output tensor that requires grad gets a hook
(``Tensor.register_hook``), and so does every parameter of the module. The backward pass is
then run by autograd itself (``torch.autograd.grad``, so no ``.grad`` is touched); each hook
receives the gradient of the loss with respect to that output, exactly as autograd computed
it, in backward order. A hook registered before an in-place write gets the gradient with
respect to the value as it was when its node ran.

    >>> import torch, fxviz
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    >>> rec = fxviz.record(model, torch.ones(2, 4), backward=True)
    >>> rec["_1"].grad.shape, rec["_1"].grad.min, rec["_1"].grad.max
    ((2, 3), 1.0, 1.0)
    >>> [g.name for g in rec.gradients.order][:2]
    ['_1', 'output']
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import torch

from fxviz._capture._segments import tensors_in
from fxviz._record._moments import _statistics
from fxviz._record._summary import TensorSummary, iter_tensors, summarize
from fxviz.errors import FxvizError, InputError, NodeError, first_line, node_error_type

__all__ = [
    "Backward",
    "GradRecord",
    "GradientWatcher",
    "Gradients",
    "summarize_gradient",
    "summary_norm",
]

Backward = bool | Callable[[Any], torch.Tensor] | torch.Tensor | Sequence[torch.Tensor] | None


def _memory(t: torch.Tensor) -> int:
    """Where ``t``'s values live: its data pointer (a sparse tensor has none: its id)."""
    return t.data_ptr() if t.layout == torch.strided else id(t)


class _Pending:
    """A kept gradient's statistics, taken on first read. Exact: nothing writes into a
    gradient once its hook has seen it, as autograd adds in place only into tensors (and
    storage) nobody else holds, and ``AccumulateGrad`` makes a leaf's ``.grad`` a copy of
    a gradient held elsewhere; the kept value holds this one. One per tensor, shared by
    the records it arrived at."""

    __slots__ = ("grad", "stats", "summary")

    def __init__(self, grad: torch.Tensor, stats: bool) -> None:
        self.grad: torch.Tensor | None = grad
        self.stats = stats
        self.summary: TensorSummary | None = None

    def get(self) -> TensorSummary:
        if self.summary is None:
            assert self.grad is not None
            self.summary = summarize_gradient(self.grad, self.stats)
            self.grad = None
        return self.summary


@dataclasses.dataclass(slots=True)
class GradRecord:
    """The gradient of the loss with respect to one recorded tensor.

    Attributes:
        name: the forward node it belongs to, or the parameter's dotted name.
        kind: ``"node"`` (a node's output) or ``"parameter"``.
        path: where the tensor sits in the node's output (``""`` for a bare tensor).
        summary: statistics of the gradient (a :class:`TensorSummary`); of a kept gradient,
            taken when first read, of a dropped one when it arrived.
        order: position in backward order (0 = the first gradient autograd computed).
        time_s: autograd's time since the previous gradient arrived (statistics excluded).
        value: the gradient itself when the ``keep=`` budget allowed it, else ``None``.
    """

    name: str
    kind: str
    path: str
    _summary: TensorSummary | _Pending = dataclasses.field(repr=False)
    order: int
    time_s: float
    value: torch.Tensor | None = None

    @property
    def summary(self) -> TensorSummary:
        """Statistics of the gradient (see the class docstring)."""
        summary = self._summary
        if isinstance(summary, _Pending):
            summary = summary.get()
            if summary.path != self.path:
                summary = dataclasses.replace(summary, path=self.path)
            self._summary = summary
        return summary

    @property
    def kept(self) -> bool:
        """Whether ``value`` was kept."""
        return self.value is not None


class Gradients(Sequence[GradRecord]):
    """What one backward pass computed: a sequence of :class:`GradRecord`, in backward order.

    ``len``, iteration, ``grads[i]`` and ``reversed`` all follow that order (the
    ``order`` list); look gradients up by name with :meth:`of` (a node's) and
    ``parameters`` (a parameter's).

    Attributes:
        order: every :class:`GradRecord`, in the order autograd computed them.
        parameters: ``{parameter name: GradRecord}``.
        time_s: wall time of the whole backward pass (hooks included; the statistics of
            kept gradients are taken later, when first read).

    Examples:
        >>> import torch, fxviz
        >>> rec = fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3), backward=True)
        >>> len(rec.gradients), [g.name for g in rec.gradients][:2]
        (6, ['linear', 'output'])
        >>> [g for g in rec.gradients if g.kind == "parameter"][-1] is rec.gradients.parameters["weight"]
        True
    """

    def __init__(self) -> None:
        self.order: list[GradRecord] = []
        self.parameters: dict[str, GradRecord] = {}
        self._by_node: dict[str, list[GradRecord]] = {}
        self.time_s = 0.0

    def of(self, name: str) -> list[GradRecord]:
        """The gradients of node ``name``'s output tensors (empty when none arrived)."""
        return self._by_node.get(name, [])

    def first_nonfinite(self) -> GradRecord | None:
        """The first gradient, in backward order, holding a NaN or an infinity."""
        return next((g for g in self.order if g.summary.nonfinite_count), None)

    def _add(self, grad: GradRecord) -> None:
        self.order.append(grad)
        if grad.kind == "parameter":
            self.parameters[grad.name] = grad
        else:
            self._by_node.setdefault(grad.name, []).append(grad)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[GradRecord]:
        return iter(self.order)

    @overload
    def __getitem__(self, index: int) -> GradRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[GradRecord]: ...
    def __getitem__(self, index: int | slice) -> GradRecord | list[GradRecord]:
        if isinstance(index, str):
            raise TypeError(
                f"gradients are indexed by position in backward order; for node {index!r} "
                f"use .of({index!r}), for a parameter .parameters[{index!r}]"
            )
        return self.order[index]

    def __repr__(self) -> str:
        bad = self.first_nonfinite()
        note = f", first NaN/Inf at {bad.name!r}" if bad else ""
        return f"<fxviz.Gradients: {len(self)} gradients, {self.time_s * 1e3:.2f} ms{note}>"


class GradientWatcher:
    """Hooks the tensors of a run, then runs its backward pass.

    ``recorder`` is the run's :class:`~fxviz._record._recorder.Recorder`: its ``keep``
    budget is shared with the gradients kept here.
    """

    def __init__(self, recorder: Any, *, stats: bool = True) -> None:
        self.recorder = recorder
        self.stats = stats
        self.gradients = Gradients()
        self._handles: list[Any] = []
        self._leaves: list[torch.Tensor] = []
        self._seen_leaves: set[int] = set()
        self._last = 0.0
        self._previous: tuple[Any, Any] = (None, None)
        self._given: set[int] = set()  # memory of the gradients the caller passed

    def watch(self, name: str, value: Any) -> None:
        """Hook every tensor of a node's output that requires grad."""
        for path, t in iter_tensors(value):
            if t.requires_grad:
                self._hook(t, name, "node", path)

    def watch_parameters(self, module: torch.nn.Module) -> None:
        """Hook the module's parameters (the leaves whose gradients a training step uses)."""
        for name, p in module.named_parameters():
            if p.requires_grad:
                self._hook(p, name, "parameter", "")

    def _hook(self, t: torch.Tensor, name: str, kind: str, path: str) -> None:
        def arrived(grad: torch.Tensor | None) -> None:
            # autograd calls the hook of every output of a multi-output op it differentiates,
            # with None for one the loss does not use (a VAE's ``logvar`` from
            # ``torch.chunk`` when it decodes the mean): no gradient arrived there
            if grad is not None:
                self._arrived(name, kind, path, grad)

        self._handles.append(t.register_hook(arrived))
        if t.grad_fn is None and id(t) not in self._seen_leaves:
            self._seen_leaves.add(id(t))
            self._leaves.append(t)

    def _arrived(self, name: str, kind: str, path: str, grad: torch.Tensor) -> None:
        elapsed = time.perf_counter() - self._last
        kept = None
        if self._admit(grad):
            # autograd hands the caller's own gradient tensors (backward=tensors) to the
            # outputs' hooks: copied, so that the caller's later writes to them change
            # neither the value kept nor the statistics taken from it when read
            kept = grad.detach().clone() if _memory(grad) in self._given else grad.detach()
        summary: TensorSummary | _Pending
        if grad is self._previous[0]:  # one tensor, several nodes (a node and `output`)
            summary = self._previous[1]
        elif kept is not None:
            summary = _Pending(kept, self.stats)
            self._previous = (grad, summary)
        else:  # dropped: its statistics are all that is left of it
            summary = summarize_gradient(grad, self.stats)
            self._previous = (grad, summary)
        if path and isinstance(summary, TensorSummary):
            summary = dataclasses.replace(summary, path=path)
        order = len(self.gradients.order)
        self.gradients._add(GradRecord(name, kind, path, summary, order, elapsed, kept))
        self._last = time.perf_counter()

    def _admit(self, grad: torch.Tensor) -> bool:
        keep = self.recorder.keep
        if keep == "all":
            return True
        if keep == "stats":
            return False
        cost = grad.numel() * grad.element_size()
        if self.recorder._kept_bytes + cost > keep:
            return False
        self.recorder._kept_bytes += cost
        return True

    def run_backward(self, output: Any, backward: Backward) -> Gradients:
        """Differentiate ``output`` as ``backward`` asks; the hooks record every gradient.

        ``backward``: ``True`` (the sum of every output tensor that requires grad), a
        callable ``output -> scalar loss``, or the gradient(s) of the output tensors.
        """
        try:
            roots, grad_outputs = backward_roots(output, backward)
            if grad_outputs is not None and backward is not True:
                self._given = {_memory(g) for g in grad_outputs}
            start = self._last = time.perf_counter()
            try:
                if self._leaves:
                    torch.autograd.grad(roots, self._leaves, grad_outputs, allow_unused=True)
                else:  # the leaves are outside the graph (a tensor a function closes over)
                    torch.autograd.backward(roots, grad_outputs)
            except RuntimeError as e:
                if isinstance(e, FxvizError):
                    raise
                raise backward_error(e, self.recorder.recording()) from e
            self.gradients.time_s = time.perf_counter() - start
        finally:
            self.remove()
        return self.gradients

    def remove(self) -> None:
        """Take every hook off again (parameters outlive the run)."""
        self._previous = (None, None)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._leaves.clear()


# autograd's words for a saved tensor the forward pass wrote into after saving it
_WRITTEN_AFTER_SAVED = re.compile(
    r"modified by an inplace operation: \[torch\.(\w+) \[([\d, ]*)\]\]"
)


def backward_error(error: RuntimeError, recording: Any) -> NodeError:
    """The error of a backward pass autograd refused, on the forward ``recording`` (kept on
    the error): when a tensor the backward pass needs was written in place after it was
    saved (RWKV's state, written row by row), the nodes that wrote into one of its shape."""
    node, hint = "output", ""
    found = _WRITTEN_AFTER_SAVED.search(str(error))
    writers = [r for r in recording.values() if r.mutates]
    if found and writers:
        shape = tuple(int(d) for d in found.group(2).split(",") if d.strip())
        suspects = [r for r in writers if shape in _written_shapes(r)] or writers
        node = suspects[0].name
        listed = ", ".join(
            f"{r.name} ({r.target}{f' in {r.module}' if r.module else ''})" for r in suspects[:5]
        )
        more = f" and {len(suspects) - 5} more" if len(suspects) > 5 else ""
        hint = (
            f"\nThe forward pass wrote in place into a {found.group(1)} {list(shape)} its backward "
            f"pass needs; nodes that wrote in place into one of that shape: {listed}{more}. "
            "The model's own code writes it (autograd refuses model(*args) alike): make it "
            "write out of place (a Hugging Face model: use_cache=False), or record without "
            "backward=."
        )
    message = (
        f"the backward pass failed: {first_line(error)}{hint}\n"
        "The forward pass recorded is on this error's .recording."
    )
    return node_error_type(NodeError, type(error))(message, node=node, recording=recording)


def _written_shapes(record: Any) -> list[tuple[Any, ...] | None]:
    """The shapes of the inputs a record wrote in place."""
    shapes = dict(zip(record.inputs, record.input_shapes, strict=False))
    return [tuple(s) if s is not None else None for m in record.mutates for s in [shapes.get(m)]]


def backward_roots(
    output: Any, backward: Backward
) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """The tensors to differentiate and the gradients they start from."""
    if callable(backward) and not isinstance(backward, torch.Tensor):
        loss = backward(output)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            got = f"Tensor{list(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss)
            raise InputError(
                f"backward= must return a scalar loss tensor, but it returned {got}; "
                "reduce it, e.g. backward=lambda out: out.sum()"
            )
        if not loss.requires_grad:
            raise InputError(_NOTHING_REQUIRES_GRAD)
        return [loss], None
    tensors = [t for _, t in iter_tensors(output)]
    if not tensors:  # an object that holds its tensors in attributes (a dataclass...)
        tensors = tensors_in(output)
    roots = [t for t in tensors if t.requires_grad]
    if not roots:
        raise InputError(_NOTHING_REQUIRES_GRAD)
    if backward is True:
        return roots, [torch.ones_like(t) for t in roots]
    given = [backward] if isinstance(backward, torch.Tensor) else list(backward)  # type: ignore[arg-type]
    if len(given) != len(roots) or not all(isinstance(g, torch.Tensor) for g in given):
        raise InputError(
            f"backward= got {len(given)} gradient(s) but the output has {len(roots)} tensor(s) "
            "that require grad: pass one gradient a tensor, in output order, or a loss "
            "function (backward=lambda out: ...)"
        )
    for i, (g, t) in enumerate(zip(given, roots, strict=True)):
        if g.shape != t.shape:
            raise InputError(
                f"backward= gradient {i} has shape {list(g.shape)} but output tensor {i} has "
                f"shape {list(t.shape)}; they must match"
            )
    return roots, given


_NOTHING_REQUIRES_GRAD = (
    "backward= was given but nothing in the output requires grad: the model has no "
    "parameters with requires_grad=True and no input requires grad (or it ran under "
    "torch.no_grad()/inference_mode())"
)


def summarize_gradient(grad: torch.Tensor, stats: bool = True) -> TensorSummary:
    """A :class:`TensorSummary` of a gradient: as :func:`summarize`, but ``zeros`` is not
    counted (``None``), as gradients are rarely exactly 0 where that would tell something.

    >>> s = summarize_gradient(torch.tensor([0.0, 3.0, -4.0]))
    >>> s.min, s.max, s.mean, s.zeros
    (-4.0, 3.0, -0.3333333333333333, None)
    """
    (bare,) = summarize(grad, False)
    plain = type(grad) is torch.Tensor and grad.layout == torch.strided
    if not (stats and plain and grad.is_floating_point() and grad.numel() and not grad.is_meta):
        return bare if not stats else summarize(grad, True)[0]
    try:
        measured = _statistics(grad, zeros=False)
    except (RuntimeError, NotImplementedError, TypeError):  # float8: summarize widens it
        return dataclasses.replace(summarize(grad, True)[0], zeros=None)
    names = ("min", "max", "mean", "std", "absmax", "nan", "posinf", "neginf", "zeros")
    return dataclasses.replace(bare, **dict(zip(names, measured, strict=True)))


def summary_norm(summary: TensorSummary | None) -> float | None:
    """The L2 norm of the finite values, from a summary's mean and std (``None`` if unknown).

    >>> import torch
    >>> (s,) = summarize(torch.tensor([3.0, 4.0]))
    >>> round(summary_norm(s), 6)
    5.0
    """
    if summary is None or summary.mean is None:
        return None
    n = summary.numel - summary.nonfinite_count
    std = summary.std or 0.0
    squares = (n - 1) * std * std + n * summary.mean * summary.mean
    return math.sqrt(max(squares, 0.0))
