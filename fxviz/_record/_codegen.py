"""The recording code generated for a graph: one Python function, like the ``forward`` that
``GraphModule`` generates, with each node's recording work written next to it.

Every node runs as ``Interpreter`` would run it (same targets, same argument objects),
with a clock reading after it. When every value is kept, the nodes that cannot write in
place are handed to the run's ``flush`` in batches (values, inputs, clock readings; see
``_engine``), before the next node that may write and every few dozen nodes, so nothing
they note can have changed since they ran; otherwise each goes to ``ran`` as it runs.
Nodes that may write in place (foreseen by ``written_locations``, or code fxviz does not
know) get a ``pre`` call first, which snapshots what is about to be written and notes
version counters, and a ``post`` call after, which checks them. The source is
registered with ``linecache`` so tracebacks show it, and the compiled function is kept on
the graph object (never in a global cache that would hold graphs alive), valid while the
graph's nodes are the same objects with the same ``args``/``kwargs``/``target``.

    >>> import torch
    >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x).add_(1))
    >>> print(compiled_for(gm.graph, keep_values=True).source)  # type: ignore[union-attr]
    def fxviz_record(_fx_rt):
        _fx_ran, _fx_pre, _fx_post = _fx_rt.ran, _fx_rt.pre, _fx_rt.post
        _fx_ph, _fx_fetch, _fx_flush = _fx_rt.placeholder, _fx_rt.fetch_attr, _fx_rt.flush
        # x: placeholder x
        _fx_s0 = _fx_clock()
        x = _fx_ph('x', _fx_k1)
        _fx_c0 = _fx_clock()
        # relu: call_function torch.relu
        relu = _fx_f1(x)
        _fx_c1 = _fx_clock()
        _fx_flush(0, (x, relu), ((), (x,)), (_fx_s0, _fx_c0), (_fx_c0, _fx_c1))
        # add_: call_method add_
        _fx_b = _fx_pre(2, (relu,), [relu])
        _fx_t = _fx_clock()
        add_ = relu.add_(1)
        _fx_post(2, add_, _fx_clock() - _fx_t, (relu,), _fx_b)
        # output: output output
        _fx_s3 = _fx_clock()
        output = add_
        _fx_c3 = _fx_clock()
        _fx_flush(3, (output,), ((add_,),), (_fx_s3,), (_fx_c3,))
        return output, locals()
    <BLANKLINE>
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import math
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch.fx

from fxviz._capture._segments import PythonSegment
from fxviz._nodes import target_text
from fxviz._record._writes import graph_module_target, runs_unknown_code, written_locations

__all__ = ["GENERATED", "Compiled", "compiled_for"]

_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")
_LITERALS = (int, str, bool, type(None))
_serial = itertools.count()
_TICK = 64  # nodes between updates of the progress bar
GENERATED = "<fxviz-record-"  # how the file name of every generated function starts


class Compiled:
    """A graph's generated recording function, and what the run needs to read it back."""

    def __init__(self, graph: torch.fx.Graph, keep_values: bool, submodules: dict[str, Any]):
        self.nodes = list(graph.nodes)
        self.shapes = [_shape(n) for n in self.nodes]
        self.keep_values = keep_values
        self.inputs = [tuple(n.all_input_nodes) for n in self.nodes]
        self.writes = [written_locations(n, submodules) for n in self.nodes]
        self.unknown = [runs_unknown_code(n, submodules) for n in self.nodes]
        # nodes whose record the engine may build inline (not inputs or parameters:
        # their statistics are taken during the run)
        self.plain = [n.op not in ("placeholder", "get_attr") for n in self.nodes]
        self.call_lines: dict[int, int] = {}  # source line of a node's call -> its index
        # the local holding the clock reading taken right before each node's call
        self.starts: dict[int, str] = {}
        self.names = self._names()
        self.locals = [self.names[n] for n in self.nodes]  # in node order
        self.namespace: dict[str, Any] = {"_fx_clock": time.perf_counter}
        self.source = self._generate()
        self.filename = f"{GENERATED}{next(_serial)}>"
        code = compile(self.source, self.filename, "exec")
        exec(code, self.namespace)
        self.function: Callable[..., Any] = self.namespace["fxviz_record"]
        lines = self.source.splitlines(keepends=True)
        linecache.cache[self.filename] = (len(self.source), None, lines, self.filename)
        weakref.finalize(self, linecache.cache.pop, self.filename, None)

    def matches(self, graph: torch.fx.Graph) -> bool:
        """Whether the graph is still the one this code was generated for (O(nodes))."""
        shapes = self.shapes
        count = 0
        for node in graph.nodes:
            if count >= len(shapes):
                return False
            n, op, target, args, kwargs = shapes[count]
            # the private fields the ``args``/``kwargs`` properties return: read per
            # node on every run, the properties cost more than the whole check
            if node is not n or node._args is not args or node._kwargs is not kwargs:
                return False
            if node.target is not target or node.op != op:
                return False
            count += 1
        return count == len(shapes)

    # -- generation ----------------------------------------------------------------------
    def _generate(self) -> str:
        names = self.names
        last_use = _last_uses(self.nodes)
        body = [
            "def fxviz_record(_fx_rt):",
            "    _fx_ran, _fx_pre, _fx_post = _fx_rt.ran, _fx_rt.pre, _fx_rt.post",
            "    _fx_ph, _fx_fetch, _fx_flush = _fx_rt.placeholder, _fx_rt.fetch_attr, _fx_rt.flush",
        ]
        batch: list[int] = []  # nodes run since the last flush, not yet handed over
        clock: str | None = None  # a clock reading taken right before the next line

        def flush() -> None:
            if batch:
                values = _tuple([names[self.nodes[j]] for j in batch])
                inputs = _tuple([_tuple([names[n] for n in self.inputs[j]]) for j in batch])
                starts = _tuple([self.starts[j] for j in batch])
                ends = _tuple([f"_fx_c{j}" for j in batch])
                body.append(f"    _fx_flush({batch[0]}, {values}, {inputs}, {starts}, {ends})")
                batch.clear()

        for i, node in enumerate(self.nodes):
            var = names[node]
            call = self._call(i, node, names)
            inputs = _tuple([names[n] for n in self.inputs[i]])
            checked = bool(self.writes[i]) or self.unknown[i]
            deferred = self.keep_values and not checked
            if not deferred:
                flush()
            body.append(f"    # {_one_line(f'{node.name}: {node.op} {target_text(node)}')}")
            if deferred:
                # handed to ``flush`` later, with the clock readings around its call
                if clock is None:
                    clock = f"_fx_s{i}"
                    body.append(f"    {clock} = _fx_clock()")
                self.starts[i] = clock
                self.call_lines[len(body) + 1] = i
                body.append(f"    {var} = {call}")
                clock = f"_fx_c{i}"
                body.append(f"    {clock} = _fx_clock()")
                batch.append(i)
                if _rebinds(node):
                    body.append("    _fx_rt.rebound()")
                    clock = None
            else:
                if checked:
                    written = self._written(i, node, names)
                    body.append(f"    _fx_b = _fx_pre({i}, {inputs}, {written})")
                body.append("    _fx_t = _fx_clock()")
                self.starts[i] = "_fx_t"
                self.call_lines[len(body) + 1] = i
                body.append(f"    {var} = {call}")
                if checked:
                    body.append(f"    _fx_post({i}, {var}, _fx_clock() - _fx_t, {inputs}, _fx_b)")
                else:
                    body.append(f"    _fx_ran({i}, {var}, _fx_clock() - _fx_t, {inputs})")
                clock = None
            if i % _TICK == _TICK - 1:
                flush()
                body.append(f"    _fx_rt.tick({_TICK})")
                clock = None
            if not self.keep_values and last_use.get(node):
                body.append(f"    del {', '.join(names[n] for n in last_use[node])}")
            if node.op == "output":
                flush()
                body.append(f"    return {var}, locals()")
                break
        return "\n".join(body) + "\n"

    def _names(self) -> dict[torch.fx.Node, str]:
        """Local variable names: the node's own name when it is a plain identifier."""
        names = {}
        for i, node in enumerate(self.nodes):
            name = node.name
            plain = name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
            names[node] = name if plain and not name.startswith("_fx_") else f"_fx_v{i}"
        return names

    def _call(self, i: int, node: torch.fx.Node, names: dict[torch.fx.Node, str]) -> str:
        """The expression that runs ``node`` as ``torch.fx.Interpreter`` runs it, giving
        the value ``GraphModule``'s code gives (see ``graph_module_target``)."""
        op, target = node.op, node.target
        if op == "placeholder":
            return f"_fx_ph({self._const(target)}, {self._const(node.args)})"
        if op == "get_attr":
            return f"_fx_fetch({self._fetch_args(target)})"
        if op == "output":
            return self._expr(node.args[0], names)
        args = [self._expr(a, names) for a in node.args]
        args += [
            f"{key}={self._expr(value, names)}"
            if key.isidentifier() and not keyword.iskeyword(key)
            else f"**{{{key!r}: {self._expr(value, names)}}}"
            for key, value in node.kwargs.items()
        ]
        if op == "call_function":
            # an ATen overload's ``__call__`` is ``return self._op(*args, **kwargs)``: the
            # operator itself, called directly, saves a Python frame a node of an export graph
            if type(target) is torch._ops.OpOverload:
                call = target._op
            else:
                call = graph_module_target(target)  # setitem gives what GraphModule gives
            return f"{self._global(f'_fx_f{i}', call)}({', '.join(args)})"
        if op == "call_module":
            return f"_fx_fetch({self._fetch_args(target)})({', '.join(args)})"
        # call_method: the first argument is the object (as Interpreter.call_method)
        method = str(target)
        if method.isidentifier() and not keyword.iskeyword(method):
            return f"{args[0]}.{method}({', '.join(args[1:])})"
        getter = self._global("_fx_getattr", getattr)
        return f"{getter}({args[0]}, {method!r})({', '.join(args[1:])})"

    def _fetch_args(self, target: Any) -> str:
        owner, _, atom = str(target).rpartition(".")
        return f"{self._const(target)}, {self._const(owner)}, {self._const(atom)}"

    def _written(self, i: int, node: torch.fx.Node, names: dict[torch.fx.Node, str]) -> str:
        """What the node is foreseen to write, as a list expression (``None``: nothing)."""
        if not self.writes[i]:
            return "None"
        found = []
        for kind, key in self.writes[i]:
            if kind == "arg":
                arg = node.args[key] if key < len(node.args) else None
            else:
                arg = node.kwargs.get(key)
            found.append(self._expr(arg, names))
        return f"[{', '.join(found)}]"

    def _expr(self, arg: Any, names: dict[torch.fx.Node, str]) -> str:
        """Source for an argument: node values by name, containers rebuilt as
        ``map_arg`` rebuilds them, other objects passed as themselves."""
        if isinstance(arg, torch.fx.Node):
            return names[arg]
        if isinstance(arg, tuple):
            items = [self._expr(a, names) for a in arg]
            if hasattr(arg, "_fields"):  # a named tuple stays one
                return f"{self._const(type(arg))}({', '.join(items)})"
            return _tuple(items)
        if isinstance(arg, list):
            return f"[{', '.join(self._expr(a, names) for a in arg)}]"
        if isinstance(arg, dict):
            pairs = (f"{self._const(k)}: {self._expr(v, names)}" for k, v in arg.items())
            return f"{{{', '.join(pairs)}}}"
        if isinstance(arg, slice):
            parts = (self._expr(p, names) for p in (arg.start, arg.stop, arg.step))
            return f"{self._global('_fx_slice', slice)}({', '.join(parts)})"
        return self._const(arg)

    def _const(self, value: Any) -> str:
        if type(value) in _LITERALS or (type(value) is float and math.isfinite(value)):
            return repr(value)
        return self._global(f"_fx_k{len(self.namespace)}", value)

    def _global(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name


def compiled_for(
    graph: torch.fx.Graph,
    *,
    keep_values: bool,
    submodules: Callable[[], dict[str, Any]] = dict,
) -> Compiled | None:
    """The graph's generated recording code (``keep_values``: without freeing values after
    their last use), made once and kept on the graph until the graph changes; ``None``
    when only the interpreter can run this graph (see :func:`unsupported`)."""
    cache = vars(graph).get("_fxviz_compiled")
    if cache is None:
        cache = {}
        setattr(graph, "_fxviz_compiled", cache)  # noqa: B010 (a private name on torch's object)
    found = cache.get(keep_values)
    if found is None or not found.matches(graph):
        if unsupported(graph) is not None:
            return None
        try:
            found = Compiled(graph, keep_values, submodules())
        except (SyntaxError, RecursionError, MemoryError):  # too big or too deep for Python
            return None  # the interpreter runs any graph
        cache[keep_values] = found
    return found


def unsupported(graph: torch.fx.Graph) -> str | None:
    """Why the generated code cannot run this graph as the Interpreter would, or ``None``."""
    for node in graph.nodes:
        if node.op not in _OPS:
            return f"node {node.name!r} has op {node.op!r}"
        if (node.op == "call_function") == isinstance(node.target, str):
            return f"node {node.name!r} ({node.op}) has target {node.target!r}"
        if node.op == "call_method" and not node.args:
            return f"node {node.name!r} calls a method without an object"
        if node.op == "output" and not node.args:
            return "the output node has no value"
    return None


def _rebinds(node: torch.fx.Node) -> bool:
    """Whether the node replays a captured run's assignments to module attributes (a
    ``python`` segment that writes), so paths looked up before may lead elsewhere after."""
    return isinstance(node.target, PythonSegment) and bool(node.target.writes)


def _shape(node: torch.fx.Node) -> tuple[Any, ...]:
    return (node, node.op, node.target, node._args, node._kwargs)


def _tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _one_line(text: str) -> str:
    """Text safe in a comment: one line, escapes for anything unprintable."""
    return repr(text)[1:-1]


def _last_uses(nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """For each node, the values whose last use it is (as ``Interpreter.__init__`` builds)."""
    seen: set[torch.fx.Node] = set()
    last: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in reversed(nodes):
        for used in node.all_input_nodes:
            if used not in seen:
                seen.add(used)
                last.setdefault(node, []).append(used)
    return last
