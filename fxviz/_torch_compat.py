"""The one place where fxviz touches private ``torch._*`` APIs.

Each helper states what it relies on and the torch versions it was checked on, so a torch
upgrade breaks here, loudly, and nowhere else. CI tests torch 2.13.0 (``pyproject.toml``
declares that range); "checked on" lists the versions these were read against.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

# Private modules, public classes/functions; all checked on torch 2.4 - 2.13.
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx.graph import CodeGen
from torch.fx.node import _get_qualified_name
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "CONV_MODULES",
    "NORM_MODULES",
    "REGION_EXITS",
    "OpOverload",
    "OpOverloadPacket",
    "TorchDispatchMode",
    "autocast_as",
    "autocast_state",
    "autocast_state_as",
    "built_output",
    "cpu_attention_kernel",
    "device_factories",
    "extract_tensor_metadata",
    "fake_mode",
    "fake_tensor",
    "foreach_norms",
    "graph_tail",
    "has_plain_codegen",
    "input_spec_mismatch",
    "is_alias_of",
    "is_fake",
    "op_arguments",
    "op_name",
    "op_written_arguments",
    "permuted_dense",
    "positional_graph",
    "qualified_name",
    "reparametrize",
    "same_bits",
    "shares_storage",
    "storage_id",
    "store_node_value",
    "stored_values",
    "thread_scoped_fx_patches",
    "tree_leaves",
    "tree_map_only_tensors",
    "writes_nothing",
]

# The regions a Dynamo graph opens and closes with nodes of its own: each enter function
# and the exit function that takes what it returned (private names, checked on torch 2.13).
REGION_EXITS: dict[Callable[..., Any], Callable[[Any], Any]] = {
    enter: leave
    for enter, leave in (
        (
            getattr(torch.amp.autocast_mode, "_enter_autocast", None),
            getattr(torch.amp.autocast_mode, "_exit_autocast", None),
        ),
        (
            getattr(torch.autograd.grad_mode, "_enter_inference_mode", None),
            getattr(torch.autograd.grad_mode, "_exit_inference_mode", None),
        ),
    )
    if enter is not None and leave is not None
}

_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple[tuple[bool, torch.dtype], ...]:
    """``(enabled, dtype)`` of autocast on the CPU and on CUDA, in this thread."""
    return tuple(
        (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES
    )


@contextlib.contextmanager
def autocast_as(
    device_type: str, dtype: torch.dtype | None, enabled: bool, cache: bool | None = None
) -> Iterator[None]:
    """``torch.autocast(device_type, dtype, enabled=enabled)`` set as it is asked, even for
    a device this machine lacks (``torch.autocast("cuda")`` turns itself off without
    CUDA: fake tensors on a pretended device need it on); then as it was."""
    before = (
        torch.is_autocast_enabled(device_type),
        torch.get_autocast_dtype(device_type),
        torch.is_autocast_cache_enabled(),
    )
    torch.set_autocast_enabled(device_type, enabled)
    if dtype is not None:
        torch.set_autocast_dtype(device_type, dtype)
    if cache is not None:
        torch.set_autocast_cache_enabled(cache)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        torch.set_autocast_enabled(device_type, before[0])
        torch.set_autocast_dtype(device_type, before[1])
        torch.set_autocast_cache_enabled(before[2])
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()


@contextlib.contextmanager
def autocast_state_as(state: tuple[tuple[bool, torch.dtype], ...]) -> Iterator[None]:
    """Autocast as :func:`autocast_state` gave it, for the block."""
    with contextlib.ExitStack() as stack:
        for device_type, wanted in zip(_AUTOCAST_DEVICES, state, strict=True):
            now = (torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))
            if now != wanted:
                stack.enter_context(autocast_as(device_type, wanted[1], wanted[0]))
        yield


# Base classes of every convolution / batch-norm module (private names, public classes).
# Checked on torch 2.4 - 2.13.
CONV_MODULES: tuple[type[torch.nn.Module], ...] = (torch.nn.modules.conv._ConvNd,)
NORM_MODULES: tuple[type[torch.nn.Module], ...] = (
    torch.nn.LayerNorm,
    torch.nn.modules.batchnorm._NormBase,
)


def qualified_name(fn: Callable[..., Any]) -> str:
    """``torch.relu`` -> ``"torch.relu"``; ``operator.add`` -> ``"operator.add"``."""
    try:
        name = _get_qualified_name(fn)
    except Exception:  # odd callables (C builtins without __module__, partials)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return name.replace("_operator.", "operator.", 1)


def tree_map_only_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of ``value``; other leaves pass through."""
    return pytree.tree_map_only(torch.Tensor, fn, value)


def has_plain_codegen(graph: torch.fx.Graph) -> bool:
    """True when the graph takes its placeholders positionally (no pytree in/out spec)."""
    return type(graph._codegen) is CodeGen


def graph_tail(graph: torch.fx.Graph) -> torch.fx.Node:
    """The graph's last node, or its root sentinel while it is empty (O(1))."""
    return graph._root._prev


def version_of(t: torch.Tensor) -> int | None:
    """Autograd's version counter of ``t``, or ``None`` for an inference tensor (made
    under ``torch.inference_mode()``: it has none, and nothing outside that mode writes it).

    >>> with torch.inference_mode():
    ...     made = torch.zeros(2)
    >>> version_of(torch.zeros(2)), version_of(made)
    (0, None)
    """
    try:
        return t._version
    except RuntimeError:
        return None


def storage_id(t: torch.Tensor) -> int | None:
    """Identity of the storage under ``t``, shared by its views (real, meta or fake)."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):
        return None  # sparse, nested or subclass tensors without one storage


def fake_mode() -> Any:
    """A ``FakeTensorMode`` that accepts real inputs (converted on entry).

    ``torch._subclasses`` is private; checked on torch 2.4 - 2.13.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


@functools.cache
def device_factories() -> frozenset[Any]:
    """The torch functions that make a tensor on the default device when given none
    (``torch.arange``, ``torch.zeros``...): what ``with torch.device(...)`` retargets.

    ``torch.utils._device._device_constructors`` is private; checked on torch 2.4 - 2.13.
    Empty when it is gone (a meta pass then stops at such a call and says so).
    """
    try:
        from torch.utils._device import _device_constructors
    except ImportError:
        return frozenset()
    return frozenset(_device_constructors())


def is_fake(t: torch.Tensor) -> bool:
    """Whether ``t`` is a FakeTensor (checked on torch 2.4 - 2.13)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def fake_tensor(mode: Any, t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A FakeTensor of ``t``'s shape, dtype and strides that claims to live on ``device``.

    The ``FakeTensor(mode, meta, device)`` constructor is private; checked on torch 2.4 - 2.13.
    """
    from torch._subclasses.fake_tensor import FakeTensor

    device = torch.device(device)
    fake = FakeTensor(mode, t.detach().to("meta"), device)
    # Autograd metadata for a device this build lacks (a CPU-only torch pretending CUDA)
    # aborts the process in C++, so only CPU and meta fakes carry requires_grad.
    if t.requires_grad and t.is_floating_point() and device.type in ("cpu", "meta"):
        fake.requires_grad_(True)
    return fake


def torch_modes_active() -> bool:
    """Whether a ``TorchFunctionMode`` or ``TorchDispatchMode`` is active (a user's
    ``FlopCounterMode`` around a call, a ``with torch.device(...)`` block).

    >>> torch_modes_active()
    False
    """
    return bool(torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack())


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


def op_name(op: OpOverload | OpOverloadPacket) -> str:
    """``aten::batch_norm`` for an overload or its packet (``OpOverload._schema`` and
    ``OpOverloadPacket._qualified_op_name`` are private; checked on torch 2.4 - 2.13)."""
    if isinstance(op, OpOverload):
        return op._schema.name
    return op._qualified_op_name


def op_arguments(op: OpOverload) -> list[Any]:
    """The op's schema arguments (``.name``, ``.kwarg_only``, ``.has_default_value()``,
    ``.default_value``). ``OpOverload._schema`` is private; checked on torch 2.4 - 2.13."""
    return list(op._schema.arguments)


def op_written_arguments(op: OpOverload) -> list[tuple[int, str, bool]]:
    """``(position, name, keyword_only)`` of each argument the op's schema marks as
    written (``Tensor(a!)``): what an in-place or ``out=`` op writes into.

    ``OpOverload._schema`` is private; checked on torch 2.4 - 2.13.
    """
    return [
        (i, arg.name, arg.kwarg_only)
        for i, arg in enumerate(op._schema.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write
    ]


def cpu_attention_kernel() -> OpOverloadPacket | None:
    """``aten._scaled_dot_product_flash_attention_for_cpu``, the attention kernel real and
    fake CPU runs pick, which ``FlopCounterMode`` has no formula for (a private aten op;
    checked on torch 2.4 - 2.13), or ``None`` where this torch lacks it."""
    return getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def store_node_value(interp: torch.fx.Interpreter, node: torch.fx.Node, value: Any) -> None:
    """What ``Interpreter.run`` does after each ``run_node``: keep the value in ``env`` and
    free the values whose last user this was (``user_to_last_uses`` is undocumented;
    the loop body is copied from ``torch/fx/interpreter.py``, checked on torch 2.4 - 2.13).
    Used by the Debugger, which runs one node at a time."""
    interp.env[node] = value
    if interp.garbage_collect_values:
        for used in interp.user_to_last_uses.get(node, ()):
            interp.env.pop(used, None)


# ``shares_storage`` without its guard, for the compiled recording engine's hot path, which
# calls it only on plain tensors (checked on torch 2.4 - 2.13)
is_alias_of = torch._C._is_alias_of  # pyright: ignore[reportAttributeAccessIssue]


_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def stored_values(t: torch.Tensor) -> torch.Tensor | None:
    """The values ``t`` holds in memory: ``t`` itself when strided, a sparse tensor's
    stored values (its implicit zeros left out; of a COO tensor, once its duplicate
    indices are added up), ``None`` for other layouts.

    >>> stored_values(torch.sparse_coo_tensor([[0, 2]], [5.0, 6.0], (4,))).tolist()
    [5.0, 6.0]
    """
    if t.layout == torch.strided:
        return t
    if t.layout == torch.sparse_coo:  # duplicate indices add up: coalesced first
        return (t if t.is_coalesced() else t.coalesce())._values()
    if t.layout in _COMPRESSED:
        return t.values()
    return None


def permuted_dense(x: torch.Tensor) -> bool:
    """Whether ``x`` covers a block of memory exactly once, in some order of its dims."""
    if x.is_contiguous():  # the common case, in that order
        return True
    expected = 1
    for stride, size in sorted(
        (st, sz) for st, sz in zip(x.stride(), x.shape, strict=True) if sz != 1
    ):
        if stride != expected:
            return False
        expected *= size
    return True


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same values bit for bit (a NaN equals the same NaN,
    ``-0.0`` is not ``0.0``): of the same shape, dtype and layout; a sparse or jagged
    tensor by the indices and values it stores, never made dense; without a copy where
    both cover their memory alike (a layout that overlaps, an expanded one: by value,
    NaN equal to NaN).

    >>> nan = torch.tensor([float("nan"), 1.0])
    >>> same_bits(nan, nan.clone()), torch.equal(nan, nan.clone())
    (True, False)
    >>> same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))
    False
    >>> s = torch.sparse_coo_tensor([[0, 3]], [1.0, 2.0], (10**9,))
    >>> same_bits(s, s.clone()), same_bits(s, s * 2)
    (True, False)
    """
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
        return False
    if a.is_nested or a.layout != torch.strided:
        ours, theirs = _stored_parts(a), _stored_parts(b)
        if ours is None or theirs is None:
            return False  # a layout without parts to compare: not known to be the same
        return all(same_bits(x, y) for x, y in zip(ours, theirs, strict=True))
    if a.is_quantized:  # no byte view (it crashes): equal compares values and parameters
        return bool(torch.equal(a, b))
    a, b = a.detach().resolve_conj().resolve_neg(), b.detach().resolve_conj().resolve_neg()
    if a.stride() == b.stride() and permuted_dense(a) and permuted_dense(b):
        try:  # the memory both cover, as bytes
            return torch.equal(_flat_bytes(a), _flat_bytes(b))
        except RuntimeError:  # a dtype with no byte view
            pass
    if torch.equal(a, b):
        return True
    if not (a.is_floating_point() or a.is_complex()):
        return False
    return bool(((a == b) | (a.isnan() & b.isnan())).all())  # rare: laid out otherwise


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a tensor that covers one block of memory once (``permuted_dense``)."""
    return t.as_strided((t.numel(),), (1,)).view(torch.uint8)


def _stored_parts(t: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
    """The strided tensors a sparse or jagged tensor is made of (indices and values)."""
    if t.is_nested and t.layout == torch.jagged:
        return (t.offsets(), t.values())  # pyright: ignore[reportAttributeAccessIssue]
    if t.layout == torch.sparse_coo:
        t = t if t.is_coalesced() else t.coalesce()
        return (t._indices(), t._values())
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return (t.crow_indices(), t.col_indices(), t.values())
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return (t.ccol_indices(), t.row_indices(), t.values())
    return None


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors use the same storage (views, in-place results, ``detach()``);
    real, meta and fake tensors alike, in about 0.3 µs."""
    try:
        return torch._C._is_alias_of(a, b)  # pyright: ignore[reportAttributeAccessIssue]
    except (RuntimeError, TypeError):
        return False


_PATCH_LOCK = threading.Lock()
_patch_users = 0


@contextlib.contextmanager
def thread_scoped_fx_patches() -> Iterator[None]:
    """While active, what ``torch.fx.symbolic_trace`` patches (``nn.Module.__call__`` and
    ``__getattr__``, wrapped functions) acts only in the thread that is tracing; other
    threads calling the same functions get the originals, so their plain forwards run
    undisturbed.

    Relies on ``torch.fx._symbolic_trace._Patcher.patch``/``patch_method`` (private,
    stable since torch 1.10), through which every such patch goes.
    """
    from torch.fx._symbolic_trace import _Patcher

    global _patch_users
    with _PATCH_LOCK:
        if _patch_users == 0:
            _Patcher.patch = _scoped_patch(_Patcher.patch, _ORIGINAL_PATCH)
            _Patcher.patch_method = _scoped_patch(_Patcher.patch_method, _ORIGINAL_PATCH_METHOD)
        _patch_users += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _patch_users -= 1
            if _patch_users == 0:
                _Patcher.patch = _ORIGINAL_PATCH[0]
                _Patcher.patch_method = _ORIGINAL_PATCH_METHOD[0]


_ORIGINAL_PATCH: list[Any] = []
_ORIGINAL_PATCH_METHOD: list[Any] = []


def _scoped_patch(patch: Any, keep: list[Any]) -> Any:
    """``_Patcher.patch``/``patch_method`` that install a thread-checking wrapper."""
    if not keep:
        keep.append(patch)
    original = keep[0]

    @functools.wraps(original)
    def scoped(self: Any, where: Any, name: str, new_fn: Any, deduplicate: bool = True) -> None:
        if isinstance(where, dict):
            before = where.get(name, getattr(builtins, name, None))
        else:
            before = getattr(where, name)
        return original(self, where, name, _only_in_this_thread(new_fn, before), deduplicate)

    return scoped


def _only_in_this_thread(new_fn: Callable[..., Any], before: Any) -> Callable[..., Any]:
    owner = threading.get_ident()

    @functools.wraps(new_fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == owner or before is None:
            return new_fn(*args, **kwargs)
        return before(*args, **kwargs)

    return dispatch


def positional_graph(gm: torch.fx.GraphModule, build: Any = None) -> None:
    """Make an exported module take its inputs as flat, named placeholders (keyword inputs
    included) and build its structured output in a last ``unflatten`` node, in place
    (``build``: that node's function, called with the flat outputs; by default pytree's
    unflatten of the graph's output spec)."""
    info = getattr(gm.graph._codegen, "pytree_info", None)  # private: _PyTreeCodeGen
    if info is None:
        return
    from torch.fx.graph import CodeGen

    gm.graph._codegen = CodeGen()
    _output_through(gm, _Unflatten(info.out_spec) if build is None else build)
    # The exported module checks each call against the (args, kwargs) structure it no
    # longer takes (a forward pre-hook); its placeholders are positional now.
    gm._forward_pre_hooks.clear()


def built_output(gm: torch.fx.GraphModule, build: Any) -> None:
    """Have an exported module return ``build(flat outputs)`` from a last ``unflatten``
    node instead of unflattening its output spec, its inputs left as they are."""
    codegen: Any = gm.graph._codegen  # private: _PyTreeCodeGen
    info = getattr(codegen, "pytree_info", None)
    if info is not None:
        codegen.pytree_info = info._replace(out_spec=None)
    _output_through(gm, build)


def _output_through(gm: torch.fx.GraphModule, build: Any) -> None:
    output = next(iter(reversed(gm.graph.nodes)))
    flat = output.args[0]
    with gm.graph.inserting_before(output):
        node = gm.graph.call_function(build, (list(flat),))
    node._rename("unflatten")  # private; unique in the graph (SigLIP has its own unflatten)
    output.args = (node,)
    gm.recompile()


def writes_nothing(target: Any) -> bool:
    """Whether ``target`` (a node's function, or the module it calls) is graph plumbing
    that writes no tensor: the ``unflatten`` that :func:`positional_graph` adds (or a
    function that says so: ``writes_nothing = True``), or the guard function ``torch.export`` adds to an unlifted module (``torch._assert`` calls
    only; ``torch.export._unlift.GuardsFn``, checked on torch 2.13).

    >>> writes_nothing(_Unflatten(None)), writes_nothing(torch.relu)
    (True, False)
    """
    cls = type(target)
    return (
        cls is _Unflatten
        or getattr(cls, "writes_nothing", False) is True
        or (cls.__name__ == "GuardsFn" and cls.__module__ == "torch.export._unlift")
    )


class _Unflatten:
    """Rebuilds an exported graph's structured output from its flat outputs."""

    __name__ = __qualname__ = "unflatten"
    __module__ = "pytree"

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def __call__(self, flat: list[Any]) -> Any:
        return pytree.tree_unflatten(flat, self.spec)


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
    from torch._functorch._aot_autograd.utils import make_boxed_func
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
    roots = [
        t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.requires_grad
    ]
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


def tree_leaves(value: Any) -> list[Any]:
    """The leaves of a pytree (tuples, lists, dicts, dataclass outputs...)."""
    return pytree.tree_leaves(value)


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


def foreach_norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The 2-norm of each tensor, in float32, in as few kernels as torch allows (the
    training watch's per-step check). ``torch._foreach_norm`` (private; its ``dtype=``
    argument checked on torch 2.4 - 2.13), else one ``linalg.vector_norm`` a tensor."""
    try:
        foreach_norm = getattr(torch, "_foreach_norm")  # noqa: B009 (private: not in torch's stubs)
        return list(foreach_norm(tensors, 2, dtype=torch.float32))
    except (AttributeError, TypeError, RuntimeError):
        return [torch.linalg.vector_norm(t, dtype=torch.float32) for t in tensors]


def functorch_unwrapped(value: Any) -> Any:
    """The plain tensor a functorch wrapper holds (``torch.vmap``'s BatchedTensor, with its
    batch dimension; ``torch.func.grad``'s wrapper), every level peeled; anything else as
    it is. Such wrappers have no storage: statistics and files take what they hold.

    Relies on ``torch._C._functorch.is_functorch_wrapped_tensor``/``get_unwrapped``
    (private, checked on torch 2.13).
    """
    if not isinstance(value, torch.Tensor):
        return value
    _functorch = getattr(torch._C, "_functorch")  # noqa: B009 (private: not in torch's stubs)

    while _functorch.is_functorch_wrapped_tensor(value) or _functorch.is_batchedtensor(value):
        value = _functorch.get_unwrapped(value)
    return value
