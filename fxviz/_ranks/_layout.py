"""Where a rank's value sits in the global tensor: the slice of a single-process
reference that a rank's shard should equal, from its DTensor layout or inferred.

    >>> import torch
    >>> ref = torch.arange(8.0).reshape(2, 4)
    >>> layout = {"placements": ["Shard(dim=1)"], "mesh": [0, 1], "shape": [2, 4]}
    >>> expected_shard(ref, layout, rank=1)
    tensor([[2., 3.],
            [6., 7.]])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["expected_shard", "grad_values", "infer_layout", "mesh_coordinates", "plain"]

_SHARD = re.compile(r"^Shard\(dim=(-?\d+)\)$")


def mesh_coordinates(mesh: Any, rank: int) -> list[int] | None:
    """``rank``'s coordinates in a (nested list) device mesh, ``None`` if not in it."""
    if isinstance(mesh, int):
        return [] if mesh == rank else None
    for i, sub in enumerate(mesh):
        found = mesh_coordinates(sub, rank)
        if found is not None:
            return [i, *found]
    return None


def expected_shard(reference: torch.Tensor, layout: dict[str, Any], rank: int) -> Any:
    """The part of ``reference`` (the global value) that ``rank`` holds under ``layout``:
    a tensor, ``"partial"`` when the rank holds a partial sum (no slice to compare), or
    ``None`` when the layout is not understood (``_StridedShard``...)."""
    mesh = layout.get("mesh")
    coords = mesh_coordinates(mesh, rank)
    placements = layout.get("placements") or []
    if coords is None or len(coords) != len(placements):
        return None
    sizes = _mesh_shape(mesh)
    value = reference
    for placement, coord, size in zip(placements, coords, sizes, strict=True):
        if placement == "Replicate()":
            continue
        if placement.startswith("Partial("):
            return "partial"
        match = _SHARD.match(placement)
        if match is None:
            return None
        chunks = torch.chunk(value, size, dim=int(match.group(1)))  # as DTensor splits
        if coord >= len(chunks):
            shape = list(value.shape)
            shape[int(match.group(1))] = 0
            return value.new_empty(shape)
        value = chunks[coord]
    return value


def _mesh_shape(mesh: Any) -> list[int]:
    shape = []
    while isinstance(mesh, list):
        shape.append(len(mesh))
        mesh = mesh[0] if mesh else None
    return shape


def infer_layout(
    reference_shape: Sequence[int], local_shapes: Mapping[int, Sequence[int]]
) -> dict[str, Any] | None:
    """A layout for plain per-rank tensors (``use_local_output=True``): replicated when
    every rank holds the reference's shape, sharded on the one dimension whose sizes add
    up to the reference's, ``None`` otherwise. Ranks in rank order make a 1-D mesh."""
    ranks = sorted(local_shapes)
    shapes = [tuple(local_shapes[r]) for r in ranks]
    ref = tuple(reference_shape)
    if all(s == ref for s in shapes):
        return {"placements": ["Replicate()"], "mesh": ranks, "inferred": True}
    if any(len(s) != len(ref) for s in shapes):
        return None
    differ = {d for s in shapes for d in range(len(ref)) if s[d] != ref[d]}
    if len(differ) != 1:
        return None
    (dim,) = differ
    if sum(s[dim] for s in shapes) != ref[dim]:
        return None
    return {"placements": [f"Shard(dim={dim})"], "mesh": ranks, "inferred": True}


def plain(value: Any) -> torch.Tensor | None:
    """The first tensor of a value as a plain tensor (a DTensor's local shard, a waited
    collective's result), or ``None``."""
    from fxviz._record._rank import local_tensor

    if isinstance(value, (tuple, list)):
        value = next((v for v in value if isinstance(v, torch.Tensor)), None)
    elif isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, torch.Tensor)), None)
    if not isinstance(value, torch.Tensor):
        return None
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return value.detach()
    local = local_tensor(value)
    return None if local is None else local.detach()


def grad_values(recording: Any) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(per node, per parameter)`` kept gradients of a live or loaded recording."""
    saved = getattr(recording, "saved_grads", None)
    if saved is not None:
        from fxviz._saved._values import decode_value

        trees, read = saved
        nodes = {n: decode_value(t, read) for n, t in (trees.get("nodes") or {}).items()}
        params = {n: decode_value(t, read) for n, t in (trees.get("parameters") or {}).items()}
        return nodes, params
    grads = recording.gradients
    if grads is None:
        return {}, {}
    nodes = {n: r.grad_value for n, r in recording.items() if r.grad_value is not None}
    params = {n: g.value for n, g in grads.parameters.items() if g.value is not None}
    return nodes, params
