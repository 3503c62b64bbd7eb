"""Leave the model as the capture found it: the recording that follows is *the* run.

A capture runs (or traces) the model once; recording the capture runs its graphs again.
What the capture changed — parameters, buffers, plain tensor attributes and the caller's
input tensors written in place, parameters and buffers replaced, plain attributes set in
``forward``, the random stream — is put back exactly afterwards (values, identities and
autograd version counters), so the recorded run starts from the state the model and its
inputs had, and tracing alone changes nothing. Parameters are copied for that only up to
:data:`PARAMETER_COPY_BYTES` in all; past it, a run that writes one is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from fxviz._torch_compat import same_bits, version_of
from fxviz.errors import TraceError

__all__ = [
    "MISSING",
    "PARAMETER_COPY_BYTES",
    "ModelState",
    "UnrestorableWrite",
    "WriteWatch",
    "attribute_writes",
    "restored_attributes",
    "restored_state",
    "state_value_reads",
    "tensor_attributes",
]

_REGISTRIES = ("_parameters", "_buffers", "_modules")
MISSING: Any = object()  # an attribute that was not there
# A run's parameters are copied first (to put back what it writes) only up to this many
# bytes in all: past it (a model near the machine's memory) the copies would double what
# the model holds, for a write that forward rarely makes. Such a write is then refused
# (see ``restored_state``), not left in the model.
PARAMETER_COPY_BYTES = 1 << 30


class UnrestorableWrite(TraceError):
    """A run wrote a parameter in place that was not copied first (the model's parameters
    being past :data:`PARAMETER_COPY_BYTES`): the model is left as that run left it, and
    nothing may run it again (``method="auto"`` tries no other method)."""


class ModelState:
    """A snapshot of a model's tensors and attributes, to compare with and restore.

    Examples:
        >>> import torch
        >>> lin = torch.nn.Linear(2, 2)
        >>> state = ModelState(lin)
        >>> with torch.no_grad():
        ...     _ = lin.weight.add_(1)
        >>> state.changes()
        ['weight (written in place)']
        >>> state.restore(); state.changes()
        []
    """

    def __init__(self, model: Any, *, parameters: bool = True, inputs: Sequence[Any] = ()) -> None:
        """``parameters=False``: parameters' values are not copied (a trace that never
        runs them for real cannot write them): their writes are found by version and
        reported, not undone. ``inputs``: the tensors among them (the caller's, which a
        run may write in place) are kept and put back too."""
        self.modules: list[tuple[str, torch.nn.Module, dict[str, Any], dict[str, dict]]] = []
        self.tensors: list[tuple[str, torch.Tensor, int | None, torch.Tensor | None]] = []
        self.parameter_bytes = 0
        self.uncopied: set[int] = set()  # the parameters a write of the run leaves written
        for i, t in enumerate(_versioned(inputs)):
            self.tensors.append((f"input {i}", t, version_of(t), t.detach().clone()))
        if not isinstance(model, torch.nn.Module):
            return
        for path, module in model.named_modules(remove_duplicate=True):
            if isinstance(module, torch.jit.ScriptModule):
                continue  # TorchScript holds its own state; tracing cannot assign to it
            attrs = {k: v for k, v in vars(module).items() if k not in _REGISTRIES}
            registries = {r: dict(getattr(module, r)) for r in _REGISTRIES}
            self.modules.append((path, module, attrs, registries))
        seen = {id(t) for _, t, _, _ in self.tensors}
        named = []
        for path, t in model.named_parameters():
            if id(t) not in seen:
                seen.add(id(t))
                named.append((path, t))
        self.parameter_bytes = sum(t.numel() * t.element_size() for _, t in named)
        copied = parameters and self.parameter_bytes <= PARAMETER_COPY_BYTES
        if parameters and not copied:  # see ``lost``
            self.uncopied = {id(t) for _, t in named}
        for path, t in named:
            self.tensors.append((path, t, version_of(t), t.detach().clone() if copied else None))
        for path, t in [*model.named_buffers(), *tensor_attributes(model)]:
            if id(t) not in seen:
                seen.add(id(t))
                self.tensors.append((path, t, version_of(t), t.detach().clone()))

    def changes(self) -> list[str]:
        """What differs from the snapshot: ``['steps (written in place)', 'count (set)']``."""
        found = [f"{p} (written in place)" for p, t, v, s in self.tensors if _written(t, v, s)]
        for path, module, attrs, registries in self.modules:
            prefix = f"{path}." if path else ""
            now = {k: v for k, v in vars(module).items() if k not in _REGISTRIES}
            for key in sorted(set(now) | set(attrs)):
                if key not in now or key not in attrs or not _same(now[key], attrs[key]):
                    found.append(f"{prefix}{key} (set)")
            for registry, before in registries.items():
                after = getattr(module, registry)
                for key in sorted(set(after) | set(before)):
                    if after.get(key) is not before.get(key):
                        found.append(f"{prefix}{key} (replaced)")
        return found

    def lost(self) -> list[str]:
        """The parameters written in place that :meth:`restore` cannot put back: not
        copied, the model's parameters being past :data:`PARAMETER_COPY_BYTES`."""
        return [p for p, t, v, _ in self.tensors if id(t) in self.uncopied and version_of(t) != v]

    def writes(self) -> list[tuple[torch.nn.Module, str | None, str, Any]]:
        """What ``forward`` assigned: ``(module, registry or None, name, value)``, the
        value ``MISSING`` where it was deleted (in-place tensor writes not included)."""
        found: list[tuple[torch.nn.Module, str | None, str, Any]] = []
        for _, module, attrs, registries in self.modules:
            now = {k: v for k, v in vars(module).items() if k not in _REGISTRIES}
            for key in set(now) | set(attrs):
                if key not in attrs or not _same(now.get(key, MISSING), attrs[key]):
                    found.append((module, None, key, now.get(key, MISSING)))
            for registry, before in registries.items():
                after = getattr(module, registry)
                for key in set(after) | set(before):
                    if after.get(key, MISSING) is not before.get(key, MISSING):
                        found.append((module, registry, key, after.get(key, MISSING)))
        return found

    def restore(self) -> None:
        """Put every value, identity, attribute and version counter back."""
        for _, module, attrs, registries in self.modules:
            for key in [k for k in vars(module) if k not in _REGISTRIES and k not in attrs]:
                delattr(module, key)
            for key, value in attrs.items():
                if not _same(vars(module).get(key, MISSING), value):
                    object.__setattr__(module, key, value)
            for registry, before in registries.items():
                after = getattr(module, registry)
                if after.keys() != before.keys() or any(
                    after[k] is not v for k, v in before.items()
                ):
                    after.clear()
                    after.update(before)
        changed = [
            (t, v, saved)
            for _, t, v, saved in self.tensors
            if _written(t, v, saved) and id(t) not in self.uncopied
        ]
        with torch.no_grad():
            for t, _, saved in changed:
                if saved is None:
                    continue
                if t.shape != saved.shape:  # resized: its memory too (resize_ keeps a prefix)
                    t.resize_(saved.shape)
                t.copy_(saved)
        counted = [(t, v) for t, v, _ in changed if v is not None]  # inference tensors: none
        _set_versions([t for t, _ in counted], [v for _, v in counted])


class WriteWatch:
    """The model's parameters, buffers and plain tensor attributes (and the caller's input
    tensors), to tell which ones a stretch of a run wrote in place (the Python Dynamo ran
    between two graph calls: no graph holds its writes).

    :meth:`mark` notes where they stand; :meth:`written` gives those written since, each
    with a copy of its value now. Version counters tell, except for the running
    statistics of a norm module in training mode: eager batch norm updates them without
    bumping the counter, so those are compared by value.

    Examples:
        >>> import torch
        >>> norm = torch.nn.BatchNorm1d(2)
        >>> watch = WriteWatch(norm); watch.mark()
        >>> _ = norm(torch.randn(3, 2))
        >>> sorted(n for n, b in norm.named_buffers() if any(b is t for t, _ in watch.written()))
        ['num_batches_tracked', 'running_mean', 'running_var']
    """

    def __init__(self, model: Any, inputs: Sequence[Any] = ()) -> None:
        """``inputs``: the caller's tensors among them are watched too."""
        found = {id(t): t for t in _versioned(inputs)}
        self.statistics: list[torch.Tensor] = []
        if isinstance(model, torch.nn.Module):
            state = [*model.parameters(), *model.buffers()]
            for t in _versioned([*state, *(t for _, t in tensor_attributes(model))]):
                found.setdefault(id(t), t)
            for module in model.modules():
                if module.training:
                    stats = (getattr(module, n, None) for n in ("running_mean", "running_var"))
                    self.statistics += [found[id(t)] for t in stats if id(t) in found]
        self.tensors = list(found.values())
        self._versions: list[int] = []
        self._values: list[torch.Tensor] = []

    def mark(self) -> None:
        """Note where the tensors stand now."""
        self._versions = [t._version for t in self.tensors]
        self._values = [t.detach().clone() for t in self.statistics]

    def close(self) -> None:
        """Let go of the model's tensors (a watch kept longer must not keep the model)."""
        self.tensors, self.statistics, self._versions, self._values = [], [], [], []

    def written(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(tensor, copy of its value)`` for each tensor written since :meth:`mark`."""
        found = {
            id(t): t
            for t, version in zip(self.tensors, self._versions, strict=True)
            if t._version != version
        }
        for t, saved in zip(self.statistics, self._values, strict=True):
            if id(t) not in found and _written(t, t._version, saved):
                found[id(t)] = t
        return [(t, t.detach().clone()) for t in found.values()]


def tensor_attributes(model: Any) -> list[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for each plain tensor attribute of ``model``'s modules, neither
    parameter nor buffer (``self.scale = torch.ones(3)``, a cache, a counter): state a
    forward may write in place like a buffer's. Inference tensors are left out (they
    have no version counter)."""
    found: list[tuple[str, torch.Tensor]] = []
    if not isinstance(model, torch.nn.Module):
        return found
    for path, module in model.named_modules():
        if isinstance(module, torch.jit.ScriptModule):
            continue
        prefix = f"{path}." if path else ""
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not value.is_inference():
                found.append((prefix + key, value))
    return found


def _versioned(values: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among ``values``, each once, but inference tensors (no version
    counter: nothing outside inference mode writes them)."""
    found: dict[int, torch.Tensor] = {}
    for v in values:
        if isinstance(v, torch.Tensor) and not v.is_inference():
            found.setdefault(id(v), v)
    return list(found.values())


def _written(t: torch.Tensor, version: int | None, saved: torch.Tensor | None) -> bool:
    """Whether ``t`` was written since ``saved`` was taken. The version counter says so,
    except for writes made under a tracing mode (``make_fx`` updates batch-norm
    statistics without bumping it) and for inference tensors (none): the values are
    compared too."""
    if version_of(t) != version:
        return True
    if saved is None:
        return False
    if t.is_meta or t.shape != saved.shape or t.dtype != saved.dtype:
        return t.shape != saved.shape
    return not same_bits(t, saved)


def _same(a: Any, b: Any) -> bool:
    """The same object, or an equal plain value (torch.export puts equal copies of some
    attributes back; a tensor compares by identity only)."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # containers of tensors, objects whose == raises
        return False


def _set_versions(tensors: list[torch.Tensor], versions: list[int]) -> None:
    """Autograd's version counters back to what they were (a graph that saved a buffer
    before the capture still backpropagates). Private API, checked on torch 2.4 - 2.13;
    without it the counters stay bumped (values are restored all the same)."""
    if not tensors:
        return
    autograd = getattr(torch._C, "_autograd", None)
    setter = getattr(autograd, "_unsafe_set_version_counter", None)
    if setter is None:
        return
    try:
        setter(tuple(tensors), tuple(versions))
    except TypeError:  # torch < 2.5 takes one tensor at a time
        for t, v in zip(tensors, versions, strict=True):
            setter(t, v)


@contextlib.contextmanager
def restored_state(
    model: Any, state: ModelState | None = None, inputs: Sequence[Any] = ()
) -> Iterator[ModelState]:
    """Run the block, then restore ``model`` and the tensors among ``inputs`` (see
    :class:`ModelState`) and the CPU (and CUDA) random streams."""
    state = ModelState(model, inputs=inputs) if state is None else state
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield state
    except BaseException as error:
        lost = state.lost()
        if lost:  # the model stays as the run left it: nothing may run it again
            raise _unrestorable(lost, state) from error
        _restore(state, cpu, cuda)
        raise
    lost = state.lost()
    if lost:  # the model stays as the run left it: one call's state, whole
        raise _unrestorable(lost, state)
    _restore(state, cpu, cuda)


def _restore(state: ModelState, cpu: torch.Tensor, cuda: list[torch.Tensor] | None) -> None:
    state.restore()
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _unrestorable(lost: list[str], state: ModelState) -> UnrestorableWrite:
    """The error of a run that wrote uncopied parameters ``lost``."""
    return UnrestorableWrite(
        f"the run wrote the parameter{'s' if len(lost) > 1 else ''} "
        f"{', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''} in place, which fxviz "
        "cannot put back: it copies a model's parameters before running it only up to "
        f"{_size(PARAMETER_COPY_BYTES)} in all, and this model's are "
        f"{_size(state.parameter_bytes)}. The model is left as that one call left it "
        "(its buffers and the random stream too). Capture it without running it "
        "(method='symbolic' or 'export'), or, where memory allows, raise "
        "fxviz._capture._state.PARAMETER_COPY_BYTES past that size."
    )


def _size(nbytes: int) -> str:
    """``nbytes`` for a person: ``1.25 GiB``, ``96.0 MiB``, ``48 bytes``."""
    if nbytes >= 1 << 30:
        return f"{nbytes / 2**30:.2f} GiB"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 1 << 20 else f"{nbytes} bytes"


# What hands a tensor's values to Python (a branch, a loop count, a number)
_VALUE_READS = frozenset(
    getattr(owner, name)
    for owner, names in (
        (torch.Tensor, ("item", "tolist", "numpy", "equal", "allclose", "is_nonzero")),
        (torch.Tensor, ("__bool__", "__int__", "__float__", "__index__", "__complex__")),
        (torch, ("equal", "allclose", "is_nonzero")),
    )
    for name in names
)


@contextlib.contextmanager
def state_value_reads(model: Any) -> Iterator[list[str]]:
    """Collect the buffers and plain tensor attributes of ``model`` (or views of them)
    whose values the block hands to Python (``.item()``, ``if t:``, ``.tolist()``).

    Symbolic tracing runs the forward on proxies, but buffers and tensor attributes are
    real tensors there: a Python branch on one of their values is taken once, on the
    value it had then (before the graph's own writes run), and baked into the graph."""
    found: list[str] = []
    state = (
        [*model.named_buffers(), *tensor_attributes(model)]
        if isinstance(model, torch.nn.Module)
        else []
    )
    storages = {_storage(t): path for path, t in reversed(state)}
    storages.pop(None, None)
    if not storages:
        yield found
        return
    with _ValueReads(storages, found):
        yield found


class _ValueReads(torch.overrides.TorchFunctionMode):
    """Notes the path of each tensor in ``storages`` (by storage) a value read is made of."""

    def __init__(self, storages: dict[int | None, str], found: list[str]) -> None:
        super().__init__()
        self.storages, self.found = storages, found

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in _VALUE_READS:
            for arg in args:
                path = self.storages.get(_storage(arg)) if isinstance(arg, torch.Tensor) else None
                if path is not None and path not in self.found:
                    self.found.append(path)
        return func(*args, **(kwargs or {}))


def _storage(t: torch.Tensor) -> int | None:
    """Where ``t``'s memory lies (views of one tensor share it); ``None`` for a tensor
    without storage."""
    try:
        return t.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):
        return None


@contextlib.contextmanager
def attribute_writes(model: Any) -> Iterator[list[str]]:
    """Collect the plain attributes of ``model``'s modules that the block assigns a new
    value to, even when something puts the old value back afterwards (``torch.export``
    restores them, while its graph keeps the value it saw: ``self.count += 1`` is baked
    in and never written)."""
    found: list[str] = []
    if not isinstance(model, torch.nn.Module):
        yield found
        return
    paths = {id(m): p for p, m in model.named_modules()}
    original = torch.nn.Module.__setattr__

    def tracking(module: torch.nn.Module, name: str, value: Any) -> None:
        path = paths.get(id(module))
        if (
            path is not None
            and name not in module._parameters
            and name not in module._buffers
            and name not in module._modules
            and not isinstance(value, (torch.Tensor, torch.nn.Module))
            and not _same(vars(module).get(name, MISSING), value)
        ):
            found.append(f"{path}.{name}" if path else name)
        original(module, name, value)

    torch.nn.Module.__setattr__ = tracking  # type: ignore[method-assign]
    try:
        yield found
    finally:
        torch.nn.Module.__setattr__ = original


@contextlib.contextmanager
def restored_attributes(model: Any) -> Iterator[None]:
    """Run the block, then put back every module's plain attributes as they were.

    Tracing runs ``forward`` on proxies, fake or meta tensors; a forward that assigns an
    attribute (torchvision's anchor generator replaces its list of cell anchors with
    moved copies) would otherwise leave those on the user's model.
    """
    saved = (
        [(m, dict(vars(m))) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    )
    try:
        yield
    except UnrestorableWrite:
        raise  # the model stays as the run that wrote it left it, attributes too
    except BaseException:
        _put_back_attributes(saved)
        raise
    _put_back_attributes(saved)


def _put_back_attributes(saved: list[tuple[torch.nn.Module, dict[str, Any]]]) -> None:
    """Each module's ``__dict__`` as it was (see :func:`restored_attributes`)."""
    for module, attributes in saved:
        state = vars(module)
        changed = state.keys() != attributes.keys() or any(
            state[k] is not v for k, v in attributes.items()
        )  # by identity: == would compare tensors (or proxies) by value
        if changed:
            state.clear()
            state.update(attributes)
