"""A joint graph run and recorded: the forward graph, then the backward graph on the
real saved tensors (the record layer's half of ``fxviz.trace(model, x, method="joint")``).

    >>> import torch, fxviz
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    >>> joint = fxviz.trace(model, torch.randn(2, 4), method="joint")
    >>> jrec = fxviz.record(joint, torch.randn(2, 4))
    >>> sorted(jrec.grads)
    ['0.bias', '0.weight']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from fxviz._capture._joint import JointGraph
from fxviz._capture._subject import refuse, register_traceable
from fxviz._providers import provider
from fxviz._record._grads import Backward, backward_roots
from fxviz._torch_compat import tree_rebuild
from fxviz.errors import InputError

__all__ = [
    "JointRecording",
    "JointRun",
    "joint_backward_inputs",
    "output_gradients",
    "run_joint",
    "tangents_for",
]


@dataclasses.dataclass
class JointRun:
    """One real run of a joint graph: what the forward returned and saved, what the
    backward took and returned. ``grads`` maps each parameter (dotted name) or input
    (``"input_0"``...) to its gradient (``None`` where it gets none)."""

    outputs: list[Any]
    saved: list[Any]
    tangents: list[torch.Tensor]
    grads: dict[str, torch.Tensor | None]
    mutations: dict[str, torch.Tensor]


@dataclasses.dataclass
class JointRecording:
    """``forward`` and ``backward`` :class:`fxviz.Recording` of one run, and the gradients."""

    joint: JointGraph
    forward: Any
    backward: Any
    grads: dict[str, torch.Tensor | None]

    def first_nonfinite(self) -> tuple[str, str | None, str | None] | None:
        """``(backward node, forward node, model node)`` of the first backward node whose
        output held a NaN or Inf, or ``None``."""
        bad = self.backward.first_nonfinite()
        if bad is None:
            return None
        fw = self.joint.link(bad.name)
        return bad.name, fw, self.joint.source(fw) if fw else None

    def to_dot(self, selected: str | None = None, side: str = "backward", **options: Any) -> Any:
        """Both passes side by side, with shapes and statistics; see :meth:`JointGraph.to_dot`."""
        return provider("joint.to_dot")(self.joint, self, selected, side, **options)

    def report(self, path: Any = None, *, title: str | None = None) -> str | None:
        """One offline HTML page with both passes side by side (returned when ``path`` is
        ``None``); the same as ``fxviz.report(self, path)``."""
        return provider("report")(self, path, title=title or "fxviz: forward and backward")

    def save(self, path: Any, **options: Any) -> None:
        """Refused: a file holds one recording (save each pass, as below)."""
        raise InputError(
            "a JointRecording holds two recordings and a file holds one: save each pass, "
            "jrec.forward.save(path) and jrec.backward.save(other_path)"
        )


register_traceable(
    JointRecording,
    refuse(
        "a JointRecording is a finished run of both passes: pass jrec.joint to run it "
        "again, or jrec.forward / jrec.backward (Recordings) to fxviz.compare"
    ),
)


def run_joint(joint: JointGraph, *inputs: Any, backward: Backward = True) -> JointRun:
    """Run the forward graph, then the backward graph on its saved tensors."""
    primals = joint.primals(*inputs)
    fw_out = list(joint.forward(*primals))
    outputs, saved, mutations = joint._split(fw_out)
    tangents, through_views = output_gradients(joint, fw_out, backward, primals)
    bw_out = joint.backward(*saved, *tangents)
    return JointRun(outputs, saved, tangents, joint._grads(bw_out, through_views), mutations)


def joint_backward_inputs(joint: JointGraph, *inputs: Any, backward: Backward = True) -> list[Any]:
    """The backward graph's inputs for a real run: saved tensors, then tangents."""
    fw_out = list(joint.forward(*joint.primals(*inputs)))
    _, saved, _ = joint._split(fw_out)
    return [*saved, *tangents_for(joint, fw_out, backward)]


def tangents_for(joint: JointGraph, fw_out: list[Any], backward: Backward) -> list[torch.Tensor]:
    """The gradients the backward graph starts from, given all that the forward graph
    returned (``fw_out``)."""
    return output_gradients(joint, fw_out, backward)[0]


def output_gradients(
    joint: JointGraph,
    fw_out: list[Any],
    backward: Backward,
    primals: Sequence[Any] = (),
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """The tangents (one a forward output the backward graph differentiates), and the
    gradients that reach a primal (of ``primals``, the forward's inputs) through an output
    that views it.

    AOTAutograd gives no tangent to an output that views another output, an intermediate
    or an input: its runtime makes that output again as a view of its base, outside the
    graphs, so the output's gradient flows into its base's tangent, or straight into the
    input, as in eager. The outputs are rebuilt here the same way, as views of their
    bases (the tensors they share storage with), before the loss sees them.
    """
    if backward is None or backward is False:
        raise InputError("a joint run needs backward=True, a loss function or gradients")
    with torch.enable_grad():  # the seeds are differentiated here, whatever the caller's mode
        return _output_gradients(joint, fw_out, backward, primals)


def _output_gradients(
    joint: JointGraph, fw_out: list[Any], backward: Backward, primals: Sequence[Any]
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    owners = {p: _leaf(fw_out[p]) for p in joint._tangent_at if p is not None}
    bases = _Bases(list(owners.values()), primals)
    leaves = []
    for p in joint._output_at:
        value = fw_out[p]
        if p in owners or not (isinstance(value, torch.Tensor) and value.is_floating_point()):
            leaves.append(owners.get(p, value))
        else:
            leaves.append(bases.view(value))
    structured: Any = leaves
    if joint._output_structure is not None and callable(backward):
        structured = tree_rebuild(leaves, joint._output_structure)
    roots, given = backward_roots(structured, backward)
    targets = [
        t
        for t in [*owners.values(), *bases.inputs.values()]
        if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    found = (
        torch.autograd.grad(roots, targets, given, allow_unused=True, materialize_grads=True)
        if targets
        else ()
    )
    by_leaf = {id(t): g for t, g in zip(targets, found, strict=True)}
    placeholders = {n.name: n for n in joint.backward.graph.find_nodes(op="placeholder")}
    tangents = []
    for name, p in zip(joint.tangents, joint._tangent_at, strict=True):
        grad = by_leaf.get(id(owners[p])) if p is not None else None
        if grad is None:  # a tangent the run does not give (a mutated input's)
            val = placeholders[name].meta["val"]
            grad = torch.zeros(val.shape, dtype=val.dtype, device=val.device)
        tangents.append(grad)
    through_views = {
        joint.primal_names[i]: by_leaf[id(t)] for i, t in bases.inputs.items() if id(t) in by_leaf
    }
    return tangents, through_views


def _leaf(value: Any) -> Any:
    """A forward output as a tensor to differentiate the loss by (itself otherwise)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().requires_grad_(True)
    return value


class _Bases:
    """The tensors an output may view: the outputs with a tangent, then the primals."""

    def __init__(self, owners: list[Any], primals: Sequence[Any]) -> None:
        self._owners = [t for t in owners if isinstance(t, torch.Tensor)]
        self._primals = list(primals)
        self.inputs: dict[int, torch.Tensor] = {}  # primal index -> its leaf, when viewed

    def view(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` again as a view of the base whose memory holds it (a leaf of its own,
        where none does)."""
        base = next((t for t in self._owners if _holds(t, value)), None)
        if base is None:
            index = next((i for i, p in enumerate(self._primals) if _holds(p, value)), None)
            if index is not None and index not in self.inputs:
                primal = self._primals[index]
                self.inputs[index] = primal.detach().requires_grad_(primal.requires_grad)
            base = self.inputs.get(index) if index is not None else None
        if base is None:
            return _leaf(value)
        return base.as_strided(value.size(), value.stride(), value.storage_offset())


def _holds(base: Any, value: torch.Tensor) -> bool:
    """Whether ``value`` lies in ``base``'s memory: the same storage, within its extent."""
    if not isinstance(base, torch.Tensor) or value.numel() == 0 or base.numel() == 0:
        return False
    if value.device.type == "meta" or base.device != value.device:
        return False
    if base.untyped_storage().data_ptr() != value.untyped_storage().data_ptr():
        return False
    low, high = _extent(base)
    v_low, v_high = _extent(value)
    return low <= v_low and v_high <= high


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """The first and last storage element ``t`` reaches."""
    offset = int(t.storage_offset())
    reach = [(int(n) - 1) * int(s) for n, s in zip(t.size(), t.stride(), strict=True)]
    return offset + sum(r for r in reach if r < 0), offset + sum(r for r in reach if r > 0)
