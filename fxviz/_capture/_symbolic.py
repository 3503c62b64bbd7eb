"""``torch.fx.symbolic_trace``, refusing the forwards whose graph would not do what a call
does: Python that ran once while tracing and left no node.

Symbolic tracing runs ``forward`` on Proxies and keeps the torch calls they reach. What
acts on global state instead is run, not recorded. A ``with torch.no_grad():`` region is
kept as Dynamo keeps it: a ``torch._C._set_grad_enabled`` node where the grad mode
changes. A ``torch.autocast`` region (even one that changes nothing while tracing:
``enabled=False``), a ``torch.inference_mode`` region (its nodes would run in the
caller's dtype and mode), and a random draw with no traced input (``torch.rand(1)``, or
from a generator a module holds: drawn once, kept as a constant, and the random stream
moved) raise here, so that ``auto`` goes on: ``torch.export`` keeps autocast regions
and draws, Dynamo inference_mode regions (export drops them, and refuses them too).

    >>> import torch
    >>> class Teacher(torch.nn.Module):
    ...     def forward(self, x):
    ...         with torch.no_grad():
    ...             y = x * 2
    ...         return y + x
    >>> print(watchful_symbolic_trace(Teacher()).code.strip())
    def forward(self, x):
        is_grad_enabled = torch.is_grad_enabled()
        _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None
        mul = x * 2
        _set_grad_enabled_1 = torch._C._set_grad_enabled(is_grad_enabled);  is_grad_enabled = _set_grad_enabled_1 = None
        add = mul + x;  mul = x = None
        return add
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from fxviz._torch_compat import autocast_state

__all__ = ["SymbolicTraceRefused", "global_mode", "watchful_symbolic_trace"]


class SymbolicTraceRefused(RuntimeError):
    """The forward runs Python the symbolic graph cannot hold (``auto`` tries export)."""


def global_mode() -> tuple[Any, ...]:
    """The global state a node's op runs under: grad mode, inference mode, autocast.

    >>> with torch.no_grad():
    ...     global_mode()[:2]
    (False, False)
    """
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        *autocast_state(),
        _autocast_nesting(),  # a region that changes nothing here (enabled=False) counts
    )


def _autocast_nesting() -> int:
    """How many ``torch.autocast`` regions are open (torch reads it only by moving it)."""
    level = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return level


class _WatchfulTracer(torch.fx.Tracer):
    """A Tracer that keeps grad-mode changes as nodes and notes the other global modes
    each node was made under."""

    def __init__(self) -> None:
        super().__init__()
        self.modes: set[tuple[Any, ...]] = set()
        self.start = self.grad = torch.is_grad_enabled()  # grad = the last node's mode
        self.caller: torch.fx.Node | None = None  # the mode the graph is run in

    def create_node(self, kind: str, *args: Any, **kwargs: Any) -> torch.fx.Node:
        mode = global_mode()
        self.modes.add(mode[1:])
        grad = mode[0]  # at the output: as forward leaves it (set_grad_enabled(False))
        if kind != "placeholder" and grad != self.grad:
            if self.caller is None:
                self.caller = super().create_node("call_function", torch.is_grad_enabled, (), {})
            # back to the start: the caller's own mode, whichever it is when the graph runs
            to = self.caller if grad == self.start else grad
            super().create_node("call_function", torch._C._set_grad_enabled, (to,), {})
            self.grad = grad
        return super().create_node(kind, *args, **kwargs)


def watchful_symbolic_trace(root: Any, concrete_args: Any = None) -> torch.fx.GraphModule:
    """``torch.fx.symbolic_trace(root, concrete_args)``, or :class:`SymbolicTraceRefused`
    when a node was made in a grad-mode or autocast region, or the trace drew random
    numbers (the caller's random stream is put back as it was)."""
    start = global_mode()[1:]
    rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    own = [(g, g.get_state()) for g in _own_generators(root)]  # torch.randn(generator=g)
    tracer = _WatchfulTracer()
    try:
        graph = tracer.trace(root, concrete_args)
    finally:  # tracing is no call: a forward that turns gradients off leaves them here
        torch.set_grad_enabled(tracer.start)
    drew = not torch.equal(torch.random.get_rng_state(), rng)
    for generator, state in own:
        drew |= not torch.equal(generator.get_state(), state)
        generator.set_state(state)
    if cuda_rng is not None:
        drew |= not all(map(torch.equal, torch.cuda.get_rng_state_all(), cuda_rng))
        torch.cuda.set_rng_state_all(cuda_rng)
    torch.random.set_rng_state(rng)
    other = tracer.modes - {start}
    if any(mode[0] != start[0] for mode in other):
        raise SymbolicTraceRefused(
            "forward enters torch.inference_mode(): symbolic tracing runs that Python "
            "once and its graph keeps no region. Dynamo keeps the region"
        )
    if other:
        raise SymbolicTraceRefused(
            "forward enters a torch.autocast region: symbolic tracing runs that Python "
            "once and its graph keeps no region, so the nodes inside would run in the "
            "caller's dtype. torch.export keeps the region"
        )
    if drew:
        raise SymbolicTraceRefused(
            "forward draws random numbers with no traced input (torch.rand(1), "
            "torch.randn(n)): symbolic tracing drew them once and would keep them as "
            "constants. torch.export keeps the draw as a node"
        )
    name = root.__class__.__name__ if isinstance(root, torch.nn.Module) else root.__name__
    return torch.fx.GraphModule(tracer.root, graph, name)


def _own_generators(root: Any) -> list[torch.Generator]:
    """The ``torch.Generator`` objects ``forward`` can reach without an argument: the
    modules' attributes (in a list, a dict or a plain object such as a config, too)
    and the globals and closures of the functions (each module class's ``forward``)."""
    found: dict[int, torch.Generator] = {}

    def look(value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.Generator):
            found[id(value)] = value
        elif depth == 0 and isinstance(value, (list, tuple)):
            for v in value:
                look(v, 1)
        elif depth == 0 and isinstance(value, dict):
            for v in value.values():
                look(v, 1)
        elif depth == 0 and _plain_object(value):
            for v in vars(value).values():
                look(v, 1)

    functions = []
    if isinstance(root, torch.nn.Module):
        for m in root.modules():
            for v in vars(m).values():
                look(v)
        functions = list({type(m).forward for m in root.modules()})
    elif callable(root):
        functions = [root]
    for fn in functions:
        fn = getattr(fn, "__func__", fn)
        for v in getattr(fn, "__globals__", {}).values():
            if isinstance(v, torch.Generator):
                found[id(v)] = v
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                look(cell.cell_contents)
            except ValueError:  # a cell not filled yet
                continue
    return list(found.values())


def _plain_object(value: Any) -> bool:
    """An object of plain attributes (a config): no module, tensor, class or function."""
    return (
        hasattr(value, "__dict__")
        and not isinstance(value, (torch.nn.Module, torch.Tensor, type))
        and not callable(value)
    )
