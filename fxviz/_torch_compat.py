"""The one place where fxviz touches private ``torch._*`` APIs.

Each helper states what it relies on, so a torch upgrade breaks here, loudly, and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload, OpOverloadPacket  # private module, public classes
from torch.fx.node import _get_qualified_name  # private since torch 1.8
from torch.utils import _pytree as pytree  # private, stable since torch 1.13

__all__ = [
    "OpOverload",
    "OpOverloadPacket",
    "extract_tensor_metadata",
    "fake_tensor",
    "graph_tail",
    "has_plain_codegen",
    "input_spec_mismatch",
    "qualified_name",
    "reparametrize",
    "shares_storage",
    "storage_id",
    "tree_leaves",
    "tree_map_only_tensors",
]


def qualified_name(fn: Callable[..., Any]) -> str:
    """``torch.relu`` -> ``"torch.relu"``; ``operator.add`` -> ``"operator.add"``."""
    try:
        name = _get_qualified_name(fn)
    except Exception:  # odd callables (C builtins without __module__, partials)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return name.replace("_operator.", "operator.", 1)


def tree_leaves(value: Any) -> list[Any]:
    """Flatten nested tuples/lists/dicts (and registered pytrees) into their leaves."""
    return pytree.tree_leaves(value)


def tree_map_only_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of ``value``; other leaves pass through."""
    return pytree.tree_map_only(torch.Tensor, fn, value)


def has_plain_codegen(graph: torch.fx.Graph) -> bool:
    """True when the graph takes its placeholders positionally (no pytree in/out spec)."""
    return type(graph._codegen) is torch.fx.graph.CodeGen


def graph_tail(graph: torch.fx.Graph) -> torch.fx.Node:
    """The graph's last node, or its root sentinel while it is empty (O(1))."""
    return graph._root._prev


def storage_id(t: torch.Tensor) -> int | None:
    """Identity of the storage under ``t``, shared by its views (real, meta or fake)."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):
        return None  # sparse, nested or subclass tensors without one storage


def fake_tensor(mode: Any, t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A FakeTensor of ``t``'s shape, dtype and strides that claims to live on ``device``."""
    from torch._subclasses.fake_tensor import FakeTensor  # private class, stable since 2.0

    device = torch.device(device)
    fake = FakeTensor(mode, t.detach().to("meta"), device)
    # Autograd metadata for a device this build lacks (a CPU-only torch pretending CUDA)
    # aborts the process in C++, so only CPU and meta fakes carry requires_grad.
    if t.requires_grad and t.is_floating_point() and device.type in ("cpu", "meta"):
        fake.requires_grad_(True)
    return fake


def extract_tensor_metadata(t: torch.Tensor) -> Any:
    """``ShapeProp``'s ``TensorMetadata`` for ``t`` (what ``node.meta["tensor_meta"]`` holds)."""
    from torch.fx.passes.shape_prop import _extract_tensor_metadata  # private helper

    return _extract_tensor_metadata(t)


def reparametrize(module: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> Any:
    """A context in which ``module``'s named parameters/buffers are ``tensors`` (restored
    after); what ``torch.func.functional_call`` uses underneath."""
    from torch.nn.utils.stateless import _reparametrize_module  # private, stable since 2.0

    return _reparametrize_module(module, tensors)


def input_spec_mismatch(graph: torch.fx.Graph, inputs: tuple[Any, ...]) -> str | None:
    """For a graph with a pytree input spec (``torch.export``): what is wrong with
    ``inputs``, or ``None`` when they fit (``gm(*inputs)`` checks the same)."""
    info = getattr(graph._codegen, "pytree_info", None)
    expected = getattr(info, "in_spec", None)
    if expected is None:
        return None
    given = pytree.tree_flatten((tuple(inputs), {}))[1]
    if given == expected:
        return None
    args_spec = expected.child(0) if hasattr(expected, "child") else expected.children_specs[0]
    want = args_spec.num_children
    if want != len(inputs):
        return f"it takes {want} input(s) but {len(inputs)} were given"
    return f"expected inputs structured as {_spec_text(expected)}, got {_spec_text(given)}"


def _spec_text(spec: Any) -> str:
    return " ".join(str(spec).split())


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors use the same storage (views, in-place results, ``detach()``);
    real, meta and fake tensors alike, in about 0.3 µs."""
    try:
        return torch._C._is_alias_of(a, b)
    except (RuntimeError, TypeError):
        return False


def aot_graphs(
    fn: Callable[..., Any], flat_args: list[Any], num_params_buffers: int
) -> tuple[torch.fx.GraphModule | None, torch.fx.GraphModule | None, Any]:
    """The forward and backward ATen graphs AOTAutograd makes of ``fn`` (default
    partitioner), and ``fn``'s outputs. Node metadata is kept (``nn_module_stack``,
    ``from_node`` on forward nodes; ``seq_nr`` and ``fwd_nn_module_stack`` on backward ones).

    Relies on ``torch._functorch.aot_autograd.aot_function`` (private, stable since 2.0)
    and ``torch.fx.traceback.preserve_node_meta``. The backward graph is made by one
    ``torch.autograd.grad`` over the outputs (no ``.grad`` is touched).
    """
    import torch.fx.traceback as fx_traceback
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_function

    graphs: dict[str, torch.fx.GraphModule] = {}

    def keep(kind: str) -> Callable[..., Any]:
        def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            graphs[kind] = gm
            return make_boxed_func(gm.forward)

        return compiler

    compiled = aot_function(
        fn,
        fw_compiler=keep("forward"),
        bw_compiler=keep("backward"),
        num_params_buffers=num_params_buffers,
    )
    with fx_traceback.preserve_node_meta():
        outputs = compiled(*flat_args)
    roots = [t for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    leaves = [a for a in flat_args if isinstance(a, torch.Tensor) and a.requires_grad]
    if roots and leaves:
        grads = [torch.ones_like(t) for t in roots]
        torch.autograd.grad(roots, leaves, grads, allow_unused=True)
    return graphs.get("forward"), graphs.get("backward"), outputs


def aot_descriptor(desc: Any) -> tuple[str, int | None]:
    """What an AOTAutograd input/output descriptor (``node.meta["desc"]``, torch >= 2.9)
    says: ``("PlainAOTOutput", 0)``, ``("TangentAOTInput", 0)`` (the output it is the
    tangent of), ``("GradAOTOutput", 3)`` (the input it is the gradient of),
    ``("InputMutationAOTOutput", 7)`` (the input it updates)..."""
    if desc is None:
        return "", None
    kind = type(desc).__name__
    inner = next(
        (getattr(desc, a) for a in ("output", "grad_of", "mutated_input") if hasattr(desc, a)),
        None,
    )
    index = getattr(inner if inner is not None else desc, "idx", None)
    return kind, index


def tree_structure(value: Any) -> Any:
    """The pytree structure of ``value`` (to rebuild it from its leaves)."""
    return pytree.tree_flatten(value)[1]


def tree_rebuild(leaves: list[Any], structure: Any) -> Any:
    """``value`` again from its leaves and :func:`tree_structure`."""
    return pytree.tree_unflatten(leaves, structure)


class ProvenanceInterpreter(torch.fx.Interpreter):
    """An Interpreter whose every node tags what it traces with ``from_node`` (torch's own
    ``set_current_meta`` skips nodes with empty ``meta``, as symbolic tracing leaves
    top-level functions). Relies on ``torch.fx.traceback.current_meta`` (private)."""

    def run_node(self, n: torch.fx.Node) -> Any:
        import torch.fx.traceback as fx_traceback

        if n.meta or not fx_traceback.has_preserved_node_meta():
            return super().run_node(n)
        saved = fx_traceback.current_meta
        fx_traceback.current_meta = {
            "from_node": [fx_traceback.NodeSource(n, "", fx_traceback.NodeSourceAction.CREATE)]
        }
        try:
            return super().run_node(n)
        finally:
            fx_traceback.current_meta = saved
