"""Which process made a recording: rank, world size, process groups, collectives, DTensors.

Everything here only reads ``torch.distributed`` state; nothing starts a collective (a
collective started by one rank alone would hang the job). The private torch names this
needs (``_resolve_process_group``, ``AsyncCollectiveTensor``) are looked up defensively:
where a torch lacks them, the information is left out, never an error.

    >>> process_state()  # no process group in this process
    (None, None, ())
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

__all__ = [
    "collective_info",
    "collective_text",
    "distributed_nodes",
    "dtensor_layout",
    "is_collective",
    "local_tensor",
    "process_state",
]

# namespaces of the collective ops that appear in FX graphs (functional collectives,
# the c10d ops behind torch.distributed calls, DTensor's own)
_COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d", "_c10d_functional_autograd", "_dtensor")
_COLLECTIVE_MODULES = ("torch.distributed.distributed_c10d", "torch.distributed._functional")
_REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum")


def _distributed() -> Any:
    """``torch.distributed`` when it is initialised in this process, else ``None``."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def process_state() -> tuple[int | None, int | None, tuple[dict[str, Any], ...]]:
    """``(rank, world_size, process_groups)`` of this process, ``(None, None, ())`` when
    ``torch.distributed`` is not initialised. Each group is ``{"name", "ranks",
    "backend"}`` (the default group first)."""
    dist = _distributed()
    if dist is None:
        return None, None, ()
    groups = []
    try:
        names = dict(dist.distributed_c10d._world.pg_names)  # every group this rank is in
    except Exception:  # a torch that keeps its groups elsewhere
        names = {dist.group.WORLD: "0"}
    for pg, name in names.items():
        try:
            ranks = dist.get_process_group_ranks(pg)
            backend = str(dist.get_backend(pg))
        except Exception:
            continue
        groups.append({"name": str(name), "ranks": [int(r) for r in ranks], "backend": backend})
    return int(dist.get_rank()), int(dist.get_world_size()), tuple(groups)


def _op_name(target: Any) -> tuple[str, str] | None:
    """``("_c10d_functional", "all_reduce")`` for a collective op target, else ``None``."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        namespace, _, rest = str(target).partition(".")  # "_c10d_functional.all_reduce.default"
        name = rest.split(".")[0]
        if namespace not in _COLLECTIVE_NAMESPACES or name.startswith("_wrap"):
            return None  # (_wrap_tensor_autograd only marks a result for autograd)
        return namespace, name
    module = getattr(target, "__module__", "") or ""
    if callable(target) and module.startswith(_COLLECTIVE_MODULES):
        return module.rsplit(".", 1)[-1], getattr(target, "__name__", str(target))
    return None


def is_collective(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls a collective (or waits for one), or is a DTensor
    redistribution (``dt.redistribute(...)``, as Dynamo captures DTensor code)."""
    if node.op == "call_method":
        return node.target == "redistribute"
    return node.op == "call_function" and _op_name(node.target) is not None


def _redistribute_text(node: torch.fx.Node) -> str:
    placements = node.kwargs.get("placements", node.args[2] if len(node.args) > 2 else None)
    if isinstance(placements, (tuple, list)):
        return "redistribute → " + ", ".join(repr(p) for p in placements)
    return "redistribute"


def _arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name where the op has a schema, else by kind."""
    target = node.target
    schema = getattr(target, "_schema", None)
    if schema is None and isinstance(target, torch._ops.OpOverloadPacket):
        overloads = target.overloads()
        schema = getattr(target, overloads[0])._schema if overloads else None
    named: dict[str, Any] = {}
    if schema is not None:
        for arg, value in zip(schema.arguments, node.args, strict=False):
            named[arg.name] = value
        named.update(node.kwargs)
        return named
    for value in (*node.args, *node.kwargs.values()):
        if isinstance(value, str) and value.lower() in _REDUCE_OPS:
            named.setdefault("reduce_op", value.lower())
    return named


def collective_text(node: torch.fx.Node) -> str:
    """A short label line: ``all_reduce sum · group 0`` (no process group needed)."""
    if node.op == "call_method" and node.target == "redistribute":
        return _redistribute_text(node)
    found = _op_name(node.target)
    if found is None:
        return ""
    args = _arguments(node)
    parts = [found[1]]
    if isinstance(args.get("reduce_op"), str):
        parts.append(str(args["reduce_op"]))
    if isinstance(args.get("group_name"), str):
        parts.append(f"· group {args['group_name']}")
    return " ".join(parts)


def collective_info(node: torch.fx.Node) -> dict[str, Any] | None:
    """``{"collective", "reduce_op", "group", "ranks", "group_size"}`` of a collective node
    (ranks resolved in this process when its group is known here), else ``None``. A
    DTensor redistribution gives ``{"collective": "redistribute"}``, to which
    :func:`distributed_nodes` adds the placements it goes ``from`` and ``to``."""
    if node.op == "call_method" and node.target == "redistribute":
        return {"collective": "redistribute", "namespace": "DTensor"}
    found = _op_name(node.target)
    if found is None:
        return None
    args = _arguments(node)
    info: dict[str, Any] = {"collective": found[1], "namespace": found[0]}
    reduce_op = args.get("reduce_op", args.get("reduceOp"))
    if reduce_op is not None:
        info["reduce_op"] = str(reduce_op).lower()
    for key in ("group_size", "src"):
        if isinstance(args.get(key), int):
            info[key] = int(args[key])
    group = args.get("group_name")
    if isinstance(group, str):
        info["group"] = group
        ranks = _group_ranks(group)
        if ranks is not None:
            info["ranks"] = ranks
    return info


def _group_ranks(name: str) -> list[int] | None:
    dist = _distributed()
    if dist is None:
        return None
    try:
        resolve = getattr(dist.distributed_c10d, "_resolve_process_group")  # noqa: B009
        return [int(r) for r in dist.get_process_group_ranks(resolve(name))]
    except Exception:  # a group of another rank, or a torch without the lookup
        return None


def _dtensor_type() -> type | None:
    try:
        from torch.distributed.tensor import DTensor
    except Exception:
        return None
    return DTensor


def dtensor_layout(value: Any) -> dict[str, Any] | None:
    """How a DTensor is laid out: ``{"placements", "mesh_shape", "mesh_dims", "mesh",
    "shape", "local_shape", "stats", "stats_of"}`` (``mesh``: the ranks of the device
    mesh, nested as it is; ``stats``: of the global tensor when it is replicated, else of
    the local shard, as ``stats_of`` says: no collective is started), or ``None``."""
    kind = _dtensor_type()
    if kind is None or not isinstance(value, kind):
        return None
    from fxviz._record._summary import summarize

    mesh = value.device_mesh
    placements = [repr(p) for p in value.placements]
    local = local_tensor(value)
    stats = summarize(local)[0].to_dict() if local is not None else {}
    return {
        "placements": placements,
        "mesh_shape": list(mesh.shape),
        "mesh_dims": list(mesh.mesh_dim_names or ()),
        "mesh": mesh.mesh.tolist(),
        "shape": list(value.shape),
        "local_shape": list(value.to_local().shape),
        # a replicated tensor's shard is the whole tensor; any other needs a collective
        "stats_of": "global" if all(p == "Replicate()" for p in placements) else "local shard",
        "stats": {k: stats.get(k) for k in ("min", "max", "mean", "std", "absmax", "nan")},
    }


def local_tensor(value: Any) -> torch.Tensor | None:
    """The plain tensor behind a distributed wrapper: a DTensor's local shard, an
    ``AsyncCollectiveTensor``'s waited result; ``None`` for anything else."""
    kind = _dtensor_type()
    if kind is not None and isinstance(value, kind):
        local = value.to_local()
        return local if type(local) is torch.Tensor else local_tensor(local)
    wait = getattr(value, "trigger_wait", None)
    if type(value).__name__ == "AsyncCollectiveTensor" and callable(wait):
        waited = wait()
        return waited if type(waited) is torch.Tensor else None
    return None


def distributed_nodes(recording: Any) -> dict[str, dict[str, Any]]:
    """Per node, what is distributed about it: ``{"layout": dtensor_layout(...)}`` for a
    node whose (first) kept output is a DTensor, ``{"collective": collective_info(...)}``
    for a collective. A loaded recording answers from its file."""
    saved = getattr(recording, "distributed_nodes", None)
    if isinstance(saved, dict):
        return saved
    out: dict[str, dict[str, Any]] = {}
    graph = getattr(recording.graph_module, "graph", None)
    if isinstance(graph, torch.fx.Graph):
        for node in graph.nodes:
            if node.name in recording and (info := collective_info(node)) is not None:
                out.setdefault(node.name, {})["collective"] = info
    for record in recording.values():
        if not record.kept:
            continue
        value = record.value
        first = value[0] if isinstance(value, (tuple, list)) and value else value
        layout = dtensor_layout(first)
        if layout is not None:
            out.setdefault(record.name, {})["layout"] = layout
    for name, info in out.items():  # a redistribution: the layouts it goes between
        step = info.get("collective")
        if step is not None and step["collective"] == "redistribute" and "layout" in info:
            record = recording[name]
            source = out.get(record.inputs[0], {}).get("layout") if record.inputs else None
            step["from"] = source["placements"] if source else None
            step["to"] = info["layout"]["placements"]
            step["ranks"] = info["layout"]["mesh"]
    return out
