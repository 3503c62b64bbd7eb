"""A private random stream: random ops draw from generators of their own, never from
(or into) torch's global random state, so debuggers in several threads neither disturb
each other nor the caller.

A ``TorchDispatchMode`` (thread-local, like every dispatch mode) hands each random ATen
op (``bernoulli_``, ``normal_``, ``randn``...) a ``torch.Generator`` that starts from the
global state as it was when the stream was made; ops without a ``generator`` argument
use their ``.generator`` overload. The few that have neither (fused attention and RNN
kernels with dropout) fall back to swapping the global state, under a lock, with a
warning: those are the only draws another thread could observe.

    >>> import torch
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> stream = RandomStream()
    >>> with stream.active():
    ...     a = torch.rand(3)
    >>> torch.equal(a, torch.rand(3))  # the same draws; the global stream did not move
    True
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from fxviz._torch_compat import OpOverload, OpOverloadPacket, TorchDispatchMode, op_arguments
from fxviz.errors import FxvizWarning

__all__ = ["RandomStream", "may_draw_random"]

_SEEDED = torch.Tag.nondeterministic_seeded
_GLOBAL_LOCK = threading.Lock()  # only for ops that can only draw from the global state
_WARNED: set[str] = set()


# Words in the names of torch functions, methods and modules that draw random numbers.
_RANDOM_WORDS = (
    *("rand", "dropout", "bernoulli", "normal_", "uniform", "multinomial", "poisson"),
    *("exponential", "geometric", "cauchy", "rrelu", "gumbel", "fractional"),
    *("attention", "lstm", "gru", "rnn", "transformer", "sample", "shuffle"),
)


def may_draw_random(node: Any, submodules: dict[str, Any]) -> bool:
    """Whether running ``node`` may draw random numbers (conservative: anything that is
    not known to torch, such as your own modules and functions, may).

    Only such nodes run under the private stream's dispatch mode, which costs a Python
    call per op.
    """
    op, target = node.op, node.target
    if op in ("placeholder", "get_attr", "output"):
        return False
    if op == "call_module":
        module = submodules.get(str(target))
        if module is None:
            return True
        return any(not _known_deterministic(type(m)) for m in module.modules())
    if isinstance(target, OpOverload):
        return _SEEDED in target.tags
    if isinstance(target, OpOverloadPacket):
        return any(_SEEDED in getattr(target, o).tags for o in target.overloads())
    if op == "call_method":
        return _random_name(str(target))
    where = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", "")
    if where.startswith(("torch", "_operator", "operator", "math", "builtins")) or where == "":
        return _random_name(name)
    return True  # a function of your own: it may call torch.rand


def _random_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _RANDOM_WORDS)


def _known_deterministic(cls: type) -> bool:
    return cls.__module__.startswith("torch.nn.") and not _random_name(cls.__name__)


class RandomStream:
    """Generators per device, seeded from the global random state when made."""

    def __init__(self) -> None:
        self._start = {"cpu": torch.random.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for index in range(torch.cuda.device_count()):
                self._start[f"cuda:{index}"] = torch.cuda.get_rng_state(index)
        self._generators: dict[str, torch.Generator] = {}

    def reset(self) -> None:
        """Start the stream over (the same draws again)."""
        self._generators.clear()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Within this block, this thread's random ops draw from this stream."""
        with _PrivateRandom(self):
            yield

    def generator(self, device: torch.device) -> torch.Generator:
        key = _device_key(device)
        gen = self._generators.get(key)
        if gen is None:
            gen = torch.Generator(device=key)
            state = self._start.get(key)
            if state is None:  # a device first used after the stream was made
                state = _default_generator(key).get_state()
                self._start[key] = state
            gen.set_state(state)
            self._generators[key] = gen
        return gen


class _PrivateRandom(TorchDispatchMode):
    def __init__(self, stream: RandomStream) -> None:
        super().__init__()
        self.stream = stream

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        seeded = _IS_SEEDED.get(func)
        if seeded is None:
            seeded = _IS_SEEDED[func] = _SEEDED in func.tags
        if not seeded:
            return func(*args, **kwargs)
        device = _op_device(args, kwargs)
        if device.type not in ("cpu", "cuda"):
            return func(*args, **kwargs)  # meta draws nothing; other devices: as torch does
        gen = self.stream.generator(device)
        routed = _with_generator(func)
        if routed is None:
            if not _draws_this_time(func, args, kwargs):
                return func(*args, **kwargs)
            return _draw_from_global(func, args, kwargs, gen)
        op, position = routed
        if position is not None and position < len(args):
            if args[position] is None:  # passed positionally, as None
                args = (*args[:position], gen, *args[position + 1 :])
        elif kwargs.get("generator") is None:
            kwargs = {**kwargs, "generator": gen}
        return op(*args, **kwargs)


_IS_SEEDED: dict[Any, bool] = {}
_ROUTES: dict[Any, tuple[Any, int | None] | None] = {}


def _with_generator(func: Any) -> tuple[Any, int | None] | None:
    """The overload of ``func`` that takes a ``generator`` and that argument's position
    (``None`` when keyword-only), or ``None`` when there is none."""
    if func in _ROUTES:
        return _ROUTES[func]
    route = None
    for op in [func, *_sibling_overloads(func)]:
        names = _names(op)
        if "generator" not in names:
            continue
        if op is not func and [n for n in names if n != "generator"] != _names(func):
            continue
        position = names.index("generator")
        kwarg_only = op_arguments(op)[position].kwarg_only
        route = (op, None if kwarg_only else position)
        break
    _ROUTES[func] = route
    return route


def _sibling_overloads(func: Any) -> list[Any]:
    packet = func.overloadpacket
    return [getattr(packet, name) for name in packet.overloads() if "generator" in name]


def _names(func: Any) -> list[str]:
    return [a.name for a in op_arguments(func)]


def _draws_this_time(func: Any, args: Any, kwargs: Any) -> bool:
    """False when a seeded op without a generator argument draws nothing on this call:
    fused attention with ``dropout_p=0`` or an RNN kernel with ``train=False`` (eval)."""
    values = {a.name: a.default_value for a in op_arguments(func) if a.has_default_value()}
    values |= dict(zip(_names(func), args, strict=False)) | kwargs
    for name in ("dropout_p", "dropout"):
        if name in values and not values[name]:
            return False
    return not ("train" in values and values["train"] is False)


def _draw_from_global(func: Any, args: Any, kwargs: Any, gen: torch.Generator) -> Any:
    """Run an op that can only use the global generator, on our stream's state."""
    name = str(func)
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(
            f"{name} takes no generator, so the debugger runs it on the global random "
            "state (set to its own stream and put back, under a lock): another thread "
            "drawing random numbers at that moment sees this op's state",
            FxvizWarning,
            stacklevel=2,
        )
    default = _default_generator(str(gen.device))
    with _GLOBAL_LOCK:
        saved = default.get_state()
        default.set_state(gen.get_state())
        try:
            return func(*args, **kwargs)
        finally:
            gen.set_state(default.get_state())
            default.set_state(saved)


def _op_device(args: Any, kwargs: Any) -> torch.device:
    device = kwargs.get("device")
    if device is not None:
        return torch.device(device)
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    return item.device
    return torch.get_default_device()


def _device_key(device: torch.device) -> str:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index}"
    return device.type


def _default_generator(key: str) -> torch.Generator:
    if key.startswith("cuda"):
        return torch.cuda.default_generators[int(key.split(":")[1])]
    if key == "cpu":
        return torch.default_generator
    raise RuntimeError(f"fxviz keeps no random stream for device {key!r}")
