"""``fxviz.shapes`` of a :class:`~fxviz.JointGraph`: both passes, on the tensors' shapes.

The forward graph runs on the parameters and the inputs; the backward graph on the saved
tensors and output gradients the forward run says it makes (their shapes and dtypes),
so in ``mode="fake"`` or ``"meta"`` neither pass computes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fxviz._capture import JointGraph
from fxviz._record._joint import JointRecording
from fxviz._shapes._spec import TensorSpec

__all__ = ["joint_shapes"]


def joint_shapes(
    joint: JointGraph, inputs: tuple[Any, ...], shape_pass: Callable[..., Any], **options: Any
) -> JointRecording:
    """A :class:`JointRecording` of both passes run by ``shape_pass`` (the shape pass,
    ``options`` its own): ``jrec.forward[name].shape``, ``fxviz.to_dot(jrec)``."""
    forward = shape_pass(joint.forward, *joint.primals(*inputs), **options)
    backward = shape_pass(joint.backward, *_backward_specs(joint, forward), **options)
    return JointRecording(joint, forward.recording, backward.recording, grads={})


def _backward_specs(joint: JointGraph, forward: Any) -> list[Any]:
    """The backward graph's inputs as specs: the saved tensors and the outputs' gradients
    (shaped as the outputs) as the forward run made them; the traced example's where the
    run does not say (a symbolic size, a non-tensor output)."""
    placeholders = joint.backward.graph.find_nodes(op="placeholder")
    traced = [_spec(n.meta.get("val")) for n in placeholders]
    output = forward.recording.get("output")
    made = [TensorSpec(tuple(s.shape), s.dtype) for s in output.outputs] if output else []
    if len(made) != len(joint._fw_outputs) or any(
        not all(isinstance(d, int) for d in s.shape) for s in made
    ):
        return traced
    _, saved, _ = joint._split(made)
    tangents = [
        made[i] if i is not None else traced[len(saved) + k]
        for k, i in enumerate(joint._tangent_at)
    ]
    specs = [*saved, *tangents]
    if len(specs) != len(traced):
        return traced
    return [_strided(s, n.meta.get("val")) for s, n in zip(specs, placeholders, strict=True)]


def _strided(spec: Any, val: Any) -> Any:
    """A saved tensor the backward graph views with its traced strides (a transposed
    activation in a diffusers UNet) as zeros with those strides: a spec is contiguous."""
    if not (isinstance(spec, TensorSpec) and isinstance(val, torch.Tensor)):
        return spec
    if val.is_contiguous() or tuple(val.shape) != tuple(spec.shape):
        return spec
    try:
        stride = tuple(int(s) for s in val.stride())
    except TypeError:  # a symbolic stride
        return spec
    return torch.empty_strided(spec.shape, stride, dtype=spec.dtype).zero_()


def _spec(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(int(d) for d in value.shape), value.dtype)
    return value
