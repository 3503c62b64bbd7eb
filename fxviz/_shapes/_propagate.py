"""Shape propagation in three modes: real tensors, fake tensors, or the meta device."""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Iterator
from typing import Any, Literal

import torch
import torch.fx
import torch.utils._pytree as pytree

from fxviz._capture import JointGraph, bind_inputs
from fxviz._capture._cache import capture_once
from fxviz._collector import old_objects_set_aside
from fxviz._record import RecordingInterpreter
from fxviz._record._interpreter import check_inputs, progress_bar
from fxviz._record._summary import iter_tensors
from fxviz._shapes._counting import FlopCounter
from fxviz._shapes._joint_shapes import joint_shapes
from fxviz._shapes._memo import MetaMemo
from fxviz._shapes._report import ShapeReport
from fxviz._shapes._spec import TensorSpec
from fxviz._torch_compat import (
    autocast_as,
    device_factories,
    extract_tensor_metadata,
    fake_mode,
    fake_tensor,
    is_fake,
    reparametrize,
    torch_modes_active,
)
from fxviz.capture import trace
from fxviz.errors import (  # ShapeError re-exported
    FxvizError,
    NodeError,
    PlacementError,
    ShapeError,
    TraceError,
    node_error_type,
)

__all__ = ["Mode", "PlacementError", "ShapeError", "check_placement", "retarget_devices", "shapes"]

Mode = Literal["real", "fake", "meta"]
_MODES = ("real", "fake", "meta")


class _ShapeInterpreter(RecordingInterpreter):
    """Records shapes only, writes ``node.meta["tensor_meta"]`` like ShapeProp.

    In meta mode, device constants baked into the graph (``torch.export`` writes
    ``device=cpu`` into ``arange``/``to``) are retargeted to the meta device, and every node's
    output is checked to be a meta (fake) tensor, so nothing ever computes on real data. In
    fake mode, ``moved`` (the device a capture ran on, the one the run pretends) retargets
    the constants a capture baked in to the pretended device. ``memo``: in meta mode, a
    call that repeats an earlier one's op and input metadata is answered from its outputs
    (:mod:`fxviz._shapes._memo`; the FLOPs the earlier one counted are counted again).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        mode: str = "real",
        counter: FlopCounter | None = None,
        moved: tuple[torch.device, torch.device] | None = None,
        memo: MetaMemo | None = None,
    ) -> None:
        super().__init__(module, keep="stats", stats=False)
        self._mode = mode
        self._counter = counter
        self._moved = (None, _META) if mode == "meta" else moved
        self.memo = memo if mode == "meta" else None

    def fxviz_start(self) -> Any:
        recorder = super().fxviz_start()
        if self._counter is not None:
            recorder.next_run_node = self._counter.wrap(recorder.next_run_node)
        if self._mode != "real":
            run = recorder.next_run_node

            def run_checked(n: torch.fx.Node) -> Any:
                value = run(n)
                check_placement(n, value, self._mode)
                return value

            recorder.next_run_node = run_checked
        return recorder

    _unused_scalar = False

    def _call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self._moved is not None:
            source, to = self._moved
            args, kwargs = retarget_devices((args, kwargs), to, source)
            if target is _WRAP_WITH_AUTOCAST and source is not None and args[0] == source.type:
                # the capture's autocast(x.device.type) region, on the pretended device
                _, dtype, enabled, cache, body, *operands = args
                with autocast_as(to.type, dtype, enabled, cache):
                    return body(*operands)
        if self._mode == "meta" and target in device_factories() and kwargs.get("device") is None:
            kwargs = {**kwargs, "device": _META}  # without a default-device context too
        return self._answered("call_function", super().call_function, target, args, kwargs)

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self._mode == "meta" and target in ("cpu", "cuda"):
            target, args, kwargs = "to", (args[0], _META), {}
        if self._moved is not None:
            source, to = self._moved
            if target == "to":  # x.to("cpu"): a device given as text
                args = tuple(to if _device_text_on(a, source) else a for a in args)
            args, kwargs = retarget_devices((args, kwargs), to, source)
        return self._answered("call_method", super().call_method, target, args, kwargs)

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        return self._answered("call_module", super().call_module, target, args, kwargs)

    def _answered(self, op: str, run: Any, target: Any, args: Any, kwargs: Any) -> Any:
        """``run(target, args, kwargs)``, or the memo's answer for a repeated call (the
        FLOPs it counted credited again)."""
        if self.memo is None:
            return run(target, args, kwargs)
        module = self.fetch_attr(target) if op == "call_module" else None
        return self.memo.call(
            op, target, args, kwargs, lambda: run(target, args, kwargs), module, self._counter
        )

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self._mode != "real" and target in _SCALAR_READS and self._unused_scalar:
            # A captured run's `if t.sum() > 0`: the scalar steered the Python that ran, so
            # the capture already holds the branch taken and no node reads the value.
            return None
        return self._call_function(target, args, kwargs)

    fxviz_convert: Any = None

    def run_node(self, n: torch.fx.Node) -> Any:
        self._unused_scalar = not n.users
        value = super().run_node(n)
        if self._mode != "real" and "fxviz_break" in n.meta and self.fxviz_convert is not None:
            # A capture's Python segment hands back what the real run made, tensors kept in
            # plain Python attributes included (torchvision's anchor lists): the graphs
            # after it see them as fake/meta tensors, as they see parameters.
            value = _abstract(value, self.fxviz_convert, self._mode)
        describe = extract_tensor_metadata if self.memo is None else self.memo.tensor_metadata
        meta = [describe(t) for _, t in iter_tensors(value)]
        if meta:
            n.meta["tensor_meta"] = meta[0] if isinstance(value, torch.Tensor) else meta
        return value


def shapes(
    gm_or_module: Any,
    *inputs: Any,
    mode: Mode = "real",
    device: str | torch.device | None = None,
    progress: bool | None = None,
    flops: bool = True,
    **kwargs: Any,
) -> ShapeReport:
    """Every node's output shapes and dtypes, as a :class:`ShapeReport`.

    Args:
        gm_or_module: a ``GraphModule`` or anything :func:`fxviz.trace` accepts or
            returns (a ``JointGraph``: both passes, as a ``JointRecording`` of shapes).
        *inputs: tensors (real, fake or meta) or :func:`fxviz.spec` specs;
            ``**kwargs`` keyword inputs, as for ``model(*inputs, **kwargs)``.
        mode: ``"real"`` runs the graph; ``"fake"`` runs it on ``FakeTensor``s (parameters
            too: nothing is computed or allocated); ``"meta"`` runs it on the meta device
            (the model may be built there: ``with torch.device("meta"): ...``).
        device: in ``"fake"`` mode, the device to pretend the model and inputs live on
            (``"cuda"`` checks a GPU placement without a GPU).
        progress: show a progress bar (default: only when a run takes over a second).
        flops: count each node's FLOPs and multiply-adds with torch's
            ``FlopCounterMode`` (in every mode; on fake/meta tensors nothing is computed).

    Like ``torch.fx.passes.shape_prop.ShapeProp``, it also writes each node's
    ``node.meta["tensor_meta"]``.

    Raises:
        ShapeError: a node failed; the message names it, its op and its input shapes, and
            ``err.report`` holds the partial report.

    Examples:
        >>> import torch, fxviz
        >>> rep = fxviz.shapes(torch.nn.Linear(8, 2), fxviz.spec(4, 8), mode="fake")
        >>> rep["linear"].shape
        (4, 2)
    """
    if mode not in _MODES:
        raise ValueError(f"unknown mode: {mode!r} (must be one of {list(_MODES)})")
    if device is not None and mode != "fake":
        raise ValueError("device= pretends a placement, so it needs mode='fake'")
    if isinstance(gm_or_module, JointGraph):  # both passes
        return joint_shapes(  # type: ignore[return-value]  (a JointRecording)
            gm_or_module,
            gm_or_module.bind(inputs, kwargs),
            shapes,
            mode=mode,
            device=device,
            progress=progress,
            flops=flops,
        )
    model = gm_or_module
    if mode == "real" and isinstance(model, torch.nn.Module) and _on_meta(model):
        raise FxvizError(
            "the model's parameters are on the meta device and hold no values: use "
            "mode='meta' or mode='fake' to propagate shapes"
        )
    gm = _capture(model, inputs, kwargs)
    inputs = bind_inputs(gm, inputs, kwargs)
    with old_objects_set_aside():  # fake tensors and their caches: many objects a node
        return propagate(
            gm, inputs, mode, model=model, device=device, progress=progress, flops=flops,
            memo=mode == "meta",
        )  # fmt: skip


def _capture(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The model's capture, its specs made meta tensors; where that fails because the
    model's own tensors are real (a CPU buffer sliced by an input's size: export mixes
    meta and cpu), made tensors on the model's device, as a real input would be (the
    caller's random stream left as it was)."""
    home = _real_home(model)
    if home is None or model not in _NEEDS_MADE_INPUTS:
        on_meta = pytree.tree_map_only(
            TensorSpec, lambda s: s.materialize("meta"), (inputs, kwargs)
        )
        try:
            return capture_once(trace, model, *on_meta)
        except TraceError:
            has_specs = any(isinstance(x, TensorSpec) for x in pytree.tree_leaves((inputs, kwargs)))
            if home is None or not has_specs:
                raise
        _NEEDS_MADE_INPUTS.add(model)  # the next call goes straight on
    with torch.random.fork_rng(devices=[]):
        made = pytree.tree_map_only(
            TensorSpec, lambda s: s.materialize(s.device or home), (inputs, kwargs)
        )
    return capture_once(trace, model, *made)


# models whose capture failed on meta inputs and held on made ones
_NEEDS_MADE_INPUTS: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()


def _real_home(model: Any) -> torch.device | None:
    """The device of a module's first tensor that is not on the meta device, if any."""
    if isinstance(model, torch.nn.Module):
        for t in [*model.parameters(), *model.buffers()]:
            if not t.is_meta:
                return t.device
    return None


def propagate(
    gm: torch.fx.GraphModule,
    inputs: tuple[Any, ...],
    mode: Mode,
    *,
    model: Any = None,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    flops: bool = True,
    suggest: bool = True,
    default_meta: bool = True,
    memo: bool | MetaMemo = False,
) -> ShapeReport:
    """:func:`shapes` on a traced ``gm`` and its bound ``inputs`` (``model``: what was
    traced, for the fake device). ``suggest=False``: when a meta run fails, do not try a
    fake run to suggest it (a caller that falls back to one itself). ``default_meta=False``:
    in meta mode, only the graph's own factory calls make meta tensors, not those inside
    modules; that skips the ``torch.device("meta")`` mode every torch call goes through (a
    third of a meta pass on a 3,000-node stack), and a module that makes a tensor stops
    the run with a PlacementError. ``memo=True``: in meta mode, a call that repeats an
    earlier one (the same op on inputs of the same metadata) is not run again, its FLOPs
    counted again (:mod:`fxviz._shapes._memo`; a ``MetaMemo`` given is the one used),
    unless a torch function or dispatch mode of the caller's is active (it sees every
    call)."""
    home = gm if model is None else model
    if torch_modes_active():  # a mode of the caller's sees every call: none is answered
        memo = False
    moved = _moved(gm, home, inputs, device) if mode == "fake" else None
    with _mode_context(mode, home, device) as convert:
        # tensors and specs inside containers too (a dict batch, an LSTM's (h0, c0))
        converted = tuple(pytree.tree_map(convert, x) for x in inputs)
        check_inputs(gm, converted)
        # every mode in a plain call's grad mode: layers choose their path by it (the
        # inference fast path of nn.MultiheadAttention gives other outputs)
        grad = torch.enable_grad()
        if mode == "meta":
            placement = _placement(
                gm, (None, _META), torch.device("meta") if default_meta else None
            )
        else:
            placement = _placement(gm, moved, None)
        counter = FlopCounter() if flops else None
        counting = counter.active() if counter is not None else contextlib.nullcontext()
        with grad, placement, _parameters(mode, gm, convert):
            made = memo if isinstance(memo, MetaMemo) else MetaMemo() if memo else None
            interp = _ShapeInterpreter(gm, mode, counter, moved, made)
            interp.fxviz_convert = convert
            try:
                with progress_bar(interp, progress, "fxviz shapes"), counting:
                    interp.run(*converted)
            except NodeError as error:
                report = ShapeReport(gm, error.recording, mode=mode, flops=_flops(counter))
                fake_works = suggest and mode == "meta" and _fake_works(gm, inputs)
                cause = error.__cause__
                typed = ShapeError if cause is None else node_error_type(ShapeError, type(cause))
                raise typed(
                    _explain(str(error), mode, cause, fake_works), node=error.node, report=report
                ) from error.__cause__
    return ShapeReport(gm, interp.recording, mode=mode, flops=_flops(counter))


_WRAP_WITH_AUTOCAST = getattr(torch.ops.higher_order, "wrap_with_autocast", None)


def _abstract(value: Any, convert: Any, mode: str) -> Any:
    if isinstance(value, torch.Tensor):
        done = value.is_meta if mode == "meta" else is_fake(value)
        return value if done else convert(value)
    if type(value) in (tuple, list):
        return type(value)(_abstract(v, convert, mode) for v in value)
    return value


def _flops(counter: FlopCounter | None) -> dict[str, int] | None:
    return None if counter is None else counter.flops


_META = torch.device("meta")
_SCALAR_READS = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)


def retarget_devices(
    value: Any, to: torch.device = _META, source: torch.device | None = None
) -> Any:
    """Every ``torch.device`` (or device string given as ``device=``) inside ``value``
    made ``to``; only those on ``source`` when it is given.

    Example:
        >>> retarget_devices(((1,), {"device": torch.device("cpu")}))
        ((1,), {'device': device(type='meta')})
        >>> retarget_devices([torch.device("cpu"), "meta"], torch.device("cuda"), torch.device("cpu"))
        [device(type='cuda'), 'meta']
    """
    if isinstance(value, torch.device):
        return to if _on(value, source) else value
    # plain tuples only: a value such as ``x.max(-1)`` (torch.return_types.max, a tuple)
    # is an argument of the getattr that reads ``.values`` and must keep its type
    if type(value) is tuple:
        return tuple(retarget_devices(v, to, source) for v in value)
    if isinstance(value, list):
        return [retarget_devices(v, to, source) for v in value]
    if isinstance(value, dict):
        return {
            k: to
            if k == "device" and _device_text_on(v, source)
            else retarget_devices(v, to, source)
            for k, v in value.items()
        }
    return value


def _on(device: torch.device, source: torch.device | None) -> bool:
    """Whether ``device`` is ``source`` (any device when ``source`` is ``None``; ``cuda``
    and ``cuda:0`` alike)."""
    if source is None:
        return True
    return device.type == source.type and (
        device.index is None or source.index is None or device.index == source.index
    )


def _device_text_on(value: Any, source: torch.device | None) -> bool:
    """Whether ``value`` is a device given as text (``"cpu"``), on ``source``."""
    if not isinstance(value, str):
        return False
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError):
        return False
    return _on(device, source)


def _moved(
    gm: torch.fx.GraphModule, home: Any, inputs: tuple[Any, ...], device: Any
) -> tuple[torch.device, torch.device] | None:
    """In a fake run, ``(the device the capture ran on, the device the run pretends)``
    when they differ and the graph was captured by running the model (export, Dynamo, a
    real run: each bakes the devices it saw into ``arange``, ``to`` and
    ``_assert_tensor_metadata``); ``None`` otherwise. A symbolic trace's device constants
    are the model's own code (``x.to("cpu")``) and stay as they are."""
    source = _capture_device(gm, home, inputs)
    target = torch.device(device) if device is not None else _home_device(home)
    if target.index is None and target.type not in ("cpu", "meta"):
        target = torch.device(target.type, 0)  # where a fake tensor says it is ("cuda:0")
    if source is None or (_on(source, target) and _on(target, source)) or not _baked(gm):
        return None
    return source, target


def _baked(gm: torch.nn.Module) -> bool:
    """Whether ``gm``'s device constants are the ones a capture saw (not the user's own)."""
    if not isinstance(gm, torch.fx.GraphModule):
        return False
    method = gm.meta.get("fxviz_method")
    if method is not None:
        return method != "symbolic"
    return any(isinstance(n.target, torch._ops.OpOverload) for n in gm.graph.nodes)


def _capture_device(gm: torch.fx.GraphModule, home: Any, inputs: tuple[Any, ...]) -> Any:
    """The device ``gm`` was captured on: its own inputs' traced values say (export and
    AOT graphs keep them), else the model's first parameter or buffer, else the first
    input tensor's (``None``: no tensor says)."""
    for n in gm.graph.nodes:
        if n.op not in ("placeholder", "get_attr"):
            break
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            return val.device
    if isinstance(home, torch.nn.Module):
        for t in [*home.parameters(), *home.buffers()]:
            return t.device
    for x in inputs:
        if isinstance(x, TensorSpec):
            return torch.device(x.device or "cpu")
        if isinstance(x, torch.Tensor):
            return x.device
    return None


def check_placement(node: torch.fx.Node, value: Any, mode: str) -> None:
    """Raise :class:`PlacementError` when ``node`` produced a real tensor in a meta or
    fake run (that would be a real computation on real data). A capture's Python segment
    (``meta["fxviz_break"]``) computes nothing: it hands back what the real run made."""
    if "fxviz_break" in node.meta or node.op == "output":  # output: checked where made
        return
    for where, t in iter_tensors(value):
        ok = t.is_meta if mode == "meta" else is_fake(t)
        if not ok:
            kind = f"on {t.device}" if mode == "meta" else f"a real {t.device} tensor"
            raise PlacementError(
                f"in mode={mode!r} node {node.name!r} ({node.op} {node.target}) produced "
                f"{kind} (output {where or 0}, {list(t.shape)}): it computed on real data, "
                "which this mode promises never to do. Code inside that op makes tensors "
                "on a fixed device; try mode='fake', or mode='real' to compute for real"
            )


def _fake_works(gm: torch.fx.GraphModule, inputs: tuple[Any, ...]) -> bool:
    """Whether a fake run of ``gm`` gets through (to suggest it when meta fails)."""
    try:
        shapes(gm, *inputs, mode="fake", progress=False)
    except Exception:
        return False
    return True


@contextlib.contextmanager
def _mode_context(mode: str, model: Any, device: Any) -> Iterator[Any]:
    """Yields a function that turns one input into this mode's kind of tensor."""
    if mode == "real":
        yield lambda x: x.materialize() if isinstance(x, TensorSpec) else x
        return
    if mode == "meta":
        yield lambda x, keep_device=False: _to_meta(x)
        return
    faking = fake_mode()
    target = torch.device(device) if device is not None else _home_device(model)

    def to_fake(x: Any, keep_device: bool = False) -> Any:
        if isinstance(x, TensorSpec):  # made inside the fake mode: a FakeTensor, no data
            where = device if device is not None else x.device or target
            return x.materialize(where, allocates=False)
        if isinstance(x, torch.Tensor) and not is_fake(x):
            moved = x.is_meta or (device is not None and not keep_device)
            return fake_tensor(faking, x, target if moved else x.device)
        return x

    with faking:
        yield to_fake


@contextlib.contextmanager
def _placement(
    gm: torch.nn.Module,
    moved: tuple[torch.device | None, torch.device] | None,
    default: torch.device | None,
) -> Iterator[None]:
    """Factory calls without a device make ``default``'s tensors (when given), and graphs
    nested in ``gm`` (higher-order ops' bodies, run without the interpreter) have their
    device constants retargeted as ``moved`` says (``(from, to)``; from ``None``: every
    device) for the run, then restored."""
    changed = [] if moved is None else _retarget_nested(gm, moved[1], moved[0])
    try:
        with default if default is not None else contextlib.nullcontext():
            yield
    finally:
        for _sub, n, args, kwargs in changed:
            n.args, n.kwargs = args, kwargs
        for sub in dict.fromkeys(sub for sub, *_ in changed):
            sub.recompile()


def _retarget_nested(
    gm: torch.nn.Module, to: torch.device, source: torch.device | None
) -> list[tuple[torch.fx.GraphModule, torch.fx.Node, Any, Any]]:
    """Retarget the device constants of the graphs nested in ``gm``; what each edited node
    held before, to put back."""
    changed = []
    for sub in gm.modules():
        if sub is gm or not isinstance(sub, torch.fx.GraphModule):
            continue
        before = [(n, (n.args, n.kwargs)) for n in sub.graph.nodes]
        after = [_retarget_node(n, both, to, source) for n, both in before]
        edits = [
            (n, both, new) for (n, both), new in zip(before, after, strict=True) if new != both
        ]
        for n, (args, kwargs), new in edits:
            changed.append((sub, n, args, kwargs))
            n.args, n.kwargs = new
        if edits:
            sub.recompile()
    return changed


def _retarget_node(
    node: torch.fx.Node, both: Any, to: torch.device, source: torch.device | None
) -> Any:
    """A nested graph's node's ``(args, kwargs)`` with its devices retargeted, an autocast
    region's device type too (an inner ``autocast(x.device.type, enabled=False)``: torch
    runs that region itself, and turns off autocast for the pretended device type)."""
    args, kwargs = retarget_devices(both, to, source)
    if node.target is _WRAP_WITH_AUTOCAST and source is not None and args[:1] == (source.type,):
        args = (to.type, *args[1:])
    return args, kwargs


@contextlib.contextmanager
def _parameters(mode: str, gm: torch.nn.Module, convert: Any) -> Iterator[None]:
    """In fake/meta mode, let the graph see fake/meta parameters and buffers (the
    module itself is left as it was)."""
    if mode == "real":
        yield
        return
    converted: dict[int, torch.Tensor] = {}  # tied names share one converted tensor
    state = {}
    # a symbolic trace's constants are tensors forward made with no device (torch.arange(4)):
    # on the default device wherever the model lives, so a pretended device leaves them
    # (a capture's constants may have taken the input's device: they move with the model)
    kept = set() if mode != "fake" or _baked(gm) else _constant_names(gm)
    for name, t in _named_tensors(gm):
        if is_fake(t) or (mode == "meta" and t.is_meta):
            continue
        if id(t) not in converted:
            converted[id(t)] = convert(t, keep_device=name in kept)
        state[name] = converted[id(t)]
    with reparametrize(gm, state):
        yield


def _constant_names(gm: torch.nn.Module) -> set[str]:
    """The tensors symbolic tracing made constants of (``_tensor_constant0``: a tensor
    forward made from no traced value; ``GraphModule`` keeps them as buffers)."""
    return {
        name
        for name, _ in _named_tensors(gm)
        if _TRACER_CONSTANT.fullmatch(name.rpartition(".")[2])
    }


_TRACER_CONSTANT = re.compile(r"_tensor_constant\d+")


def _named_tensors(gm: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and buffer under every name (tied weights included) and the tensor
    constants graphs fetch with ``get_attr`` (``_tensor_constant0``, nested graphs too)."""
    found = [
        *gm.named_parameters(remove_duplicate=False),
        *gm.named_buffers(remove_duplicate=False),
    ]
    known = {name for name, _ in found}
    for prefix, sub in gm.named_modules(remove_duplicate=False):
        graph = getattr(sub, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        for node in graph.nodes:
            name = f"{prefix}.{node.target}" if prefix else str(node.target)
            if node.op != "get_attr" or name in known:
                continue
            try:
                value = _resolve(sub, str(node.target))
            except AttributeError:
                continue
            if isinstance(value, torch.Tensor):
                found.append((name, value))
                known.add(name)
    return found


def _resolve(module: torch.nn.Module, path: str) -> Any:
    value: Any = module
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _to_meta(x: Any) -> Any:
    if isinstance(x, TensorSpec):
        return x.materialize("meta")
    if isinstance(x, torch.Tensor) and not x.is_meta:
        return x.detach().to("meta").requires_grad_(x.requires_grad and x.is_floating_point())
    return x


def _on_meta(model: torch.nn.Module) -> bool:
    return any(t.is_meta for t in [*model.parameters(), *model.buffers()])


def _home_device(model: Any) -> torch.device:
    """Where a fake run pretends to be: the model's own device, or the CPU for meta models."""
    if isinstance(model, torch.nn.Module):
        for t in [*model.parameters(), *model.buffers()]:
            if not t.is_meta:
                return t.device
    return torch.device("cpu")


_NO_KERNEL = (
    "fake impl",
    "'Meta' backend",
    "meta tensor",
    "meta kernel",
    "no fake",
    "Expected inputs of BF16",
)
_DEVICE_MISSING = ("is not linked with support for", "not compiled with")
_DATA_DEPENDENT = ("DataDependentOutputException", "DynamicOutputShapeException")
# what torch says of an op whose output's shape comes from its input's values
# (repeat_interleave's meta kernel with tensor counts: Qwen2-VL's vision tower)
_NEEDS_VALUES = ("data-dependent", "data-independent", ".item()", "without output_size")


def _explain(message: str, mode: str, cause: BaseException | None, fake_works: bool = False) -> str:
    """Add what to do when the op cannot run without data in this mode."""
    tail = "The report of the nodes before it is on this error's .report."
    if fake_works:
        return (
            f"{message}\nmode='fake' gets through this model without data (it was tried): "
            f"use mode='fake'. {tail}"
        )
    if mode == "real" or cause is None:
        return f"{message}\n{tail}"
    kind = type(cause).__name__
    text = str(cause)
    if mode == "fake" and any(marker in text for marker in _DEVICE_MISSING):
        # e.g. BatchNorm in training mode: its running-stat update calls Tensor.copy_,
        # whose Python binding sets a device guard even on fake tensors.
        head = message.split("\nWhat to do:")[0]
        return (
            f"{head}\nIn mode='fake' this op needs real support for the pretended device, "
            "which this PyTorch build lacks. What to do: put the model in eval mode (model.eval(); "
            "BatchNorm in training mode updates its running statistics on the device), "
            f"run without device=, or run on a machine whose PyTorch has that device. {tail}"
        )
    if kind in _DATA_DEPENDENT or any(marker in text for marker in _NEEDS_VALUES):
        why = (
            "this op needs the tensor's values (.item() gives a Python number, nonzero a "
            "shape), which a {mode} run does not have"
        )
    elif (
        isinstance(cause, NotImplementedError)
        or kind == "UnsupportedOperatorException"
        or any(marker in text for marker in _NO_KERNEL)
    ):
        why = "this op has no {mode} kernel, so it cannot run without data"
    else:
        return f"{message}\n{tail}"
    return (
        f"{message}\nIn mode={mode!r} {why.format(mode=mode)}: use mode='real' (with real "
        f"inputs) for this model. {tail}"
    )
