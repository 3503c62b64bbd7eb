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
    fw_out = list(joint.forward(*joint.primals(*inputs)))
    outputs, saved, mutations = joint._split(fw_out)
    tangents = tangents_for(joint, outputs, backward)
    bw_out = joint.backward(*saved, *tangents)
    return JointRun(outputs, saved, tangents, joint._grads(bw_out), mutations)


def joint_backward_inputs(joint: JointGraph, *inputs: Any, backward: Backward = True) -> list[Any]:
    """The backward graph's inputs for a real run: saved tensors, then tangents."""
    run_forward = list(joint.forward(*joint.primals(*inputs)))
    outputs, saved, _ = joint._split(run_forward)
    return [*saved, *tangents_for(joint, outputs, backward)]


def tangents_for(joint: JointGraph, outputs: list[Any], backward: Backward) -> list[torch.Tensor]:
    """The gradients of the outputs that the backward graph starts from."""
    if backward is None or backward is False:
        raise InputError("a joint run needs backward=True, a loss function or gradients")
    leaves = [
        o.detach().requires_grad_(True)
        if isinstance(o, torch.Tensor) and o.is_floating_point()
        else o
        for o in outputs
    ]
    wanted = [o for o in leaves if isinstance(o, torch.Tensor) and o.requires_grad]
    structured = leaves
    if joint._output_structure is not None and callable(backward):
        structured = tree_rebuild(leaves, joint._output_structure)
    roots, given = backward_roots(structured, backward)
    if given is None:  # a loss function: its gradient with respect to each output
        given = list(torch.autograd.grad(roots, wanted, allow_unused=True, materialize_grads=True))
    by_output = {id(t): g for t, g in zip(wanted, given, strict=True)}
    placeholders = {n.name: n for n in joint.backward.graph.find_nodes(op="placeholder")}
    tangents = []
    for name, index in zip(joint.tangents, joint._tangent_of, strict=True):
        grad = by_output.get(id(leaves[index])) if index is not None else None
        if grad is None:  # a tangent for something the loss does not reach
            val = placeholders[name].meta["val"]
            grad = torch.zeros(val.shape, dtype=val.dtype, device=val.device)
        tangents.append(grad)
    return tangents
