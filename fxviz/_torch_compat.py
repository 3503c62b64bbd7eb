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
    "positional_graph",
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


def positional_graph(gm: torch.fx.GraphModule) -> None:
    """Make an exported module take its inputs as flat, named placeholders (keyword inputs
    included) and build its structured output in a last ``unflatten`` node, in place."""
    info = getattr(gm.graph._codegen, "pytree_info", None)  # private: _PyTreeCodeGen
    if info is None:
        return
    out_spec = info.out_spec
    from torch.fx.graph import CodeGen

    gm.graph._codegen = CodeGen()
    output = next(iter(reversed(gm.graph.nodes)))
    flat = output.args[0]
    with gm.graph.inserting_before(output):
        node = gm.graph.call_function(_Unflatten(out_spec), (list(flat),))
    node.name = "unflatten"
    output.args = (node,)
    gm.recompile()
    # The exported module checks each call against the (args, kwargs) structure it no
    # longer takes (a forward pre-hook); its placeholders are positional now.
    gm._forward_pre_hooks.clear()


class _Unflatten:
    """Rebuilds an exported graph's structured output from its flat outputs."""

    __name__ = __qualname__ = "unflatten"
    __module__ = "pytree"

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def __call__(self, flat: list[Any]) -> Any:
        return pytree.tree_unflatten(flat, self.spec)
