"""A :class:`Capture`: the graphs one real run went through, stitched into one GraphModule.

Each graph call becomes a copy of its graph's nodes (named ``g0_linear``, ``g1_relu``...;
a graph called again gets ``g1r2_...``; a run that is one graph call keeps the graph's own
names: there is nothing to tell apart); the Python that ran between two calls becomes one
``python`` node that hands the next graph what Python produced in the captured run. So
everything that reads a GraphModule (record, Debugger, shapes, drawings, reports) reads a
capture, in execution order, and its output is the model's own output.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from fxviz._capture._inputs import flatten_inputs
from fxviz._capture._segments import PythonSegment, check_same_inputs, tensors_in
from fxviz._capture._state import tensor_attributes
from fxviz.errors import InputError

__all__ = ["Capture", "GraphBreak", "GraphCall", "stitch"]

_KEPT_META = ("nn_module_stack", "stack_trace", "source_fn_stack")


@dataclasses.dataclass(frozen=True)
class GraphBreak:
    """Where one captured graph ended and Python took over.

    Attributes:
        after: index of the graph call it follows (``-1``: Python before the first graph).
        reason: why the graph ended (Dynamo's graph-break reason).
        file, line, code: the user's source line where it ended (``""``/``0`` if unknown).
        node: the ``python`` node that stands for it in the capture's graph.
        until: where the next graph starts (``file:line: code``), the end of the Python
            that ran in between; empty after the last graph.
    """

    after: int
    reason: str
    file: str = ""
    line: int = 0
    code: str = ""
    node: str = ""
    until: str = ""

    @property
    def where(self) -> str:
        """``model.py:42: if x.sum() > 0:`` (empty when unknown)."""
        if not self.file:
            return ""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}: {self.code}".rstrip(": ")

    def __str__(self) -> str:
        text = f"{self.reason} at {self.where}" if self.where else self.reason
        if not self.until or self.until == self.where:
            return text
        return f"{text}; Python ran until {self.until}"


@dataclasses.dataclass
class GraphCall:
    """One call of a captured graph during the run: which graph, with what, giving what."""

    graph: int
    inputs: Sequence[Any]
    outputs: Any
    prefix: str = ""
    # Inputs Python made, as they were when the call began (by id): the graph may write
    # them in place, and the capture must hand the next run what the graph was given.
    before: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)
    # The model's tensors the Python before this call wrote in place, with their values
    # when it was done: the capture's ``python`` node writes them again.
    written: list[tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)


class Capture(torch.fx.GraphModule):
    """The graphs one run of a model went through, with the Python between them.

    A ``torch.fx.GraphModule`` (so everything in fxviz takes it), made by
    ``fxviz.trace(model, *args, method="dynamo" | "real" | "auto", **kwargs)``.

    Attributes:
        method: ``"dynamo"`` or ``"real"``: how it was captured.
        graphs: the distinct graphs captured, in the order they were made.
        calls: every graph call of the run, in order (``graph`` indexes ``graphs``).
        breaks: where a graph ended and Python took over, one per ``python`` node.
        guards: what Dynamo checks before reusing a graph (text), when known.
        recompiles: graphs Dynamo made again for a frame it had compiled (new values
            failed its guards: a Python float, a new shape).
        input_names: the placeholders, named after the model's parameters.
    """

    method: str
    graphs: list[torch.fx.GraphModule]
    calls: list[GraphCall]
    breaks: list[GraphBreak]
    guards: list[str]
    recompiles: list[str]
    input_names: list[str]
    _signature: Callable[..., Any]
    _example: list[Any]

    def flat_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The placeholders' values for ``model(*args, **kwargs)``."""
        names, leaves = flatten_inputs(self._signature, args, kwargs)
        if names != self.input_names:
            raise InputError(
                f"the inputs ({', '.join(names) or 'none'}) are not those this capture was "
                f"made with ({', '.join(self.input_names) or 'none'})"
            )
        check_same_inputs(self._example, leaves)
        return leaves

    def summary(self) -> str:
        """``dynamo: 3 graphs, 4 calls, 3 breaks``; ``dynamo: 1 graph, 1 call, no breaks``.

        Breaks count the Python that ran before or between graph calls, not the Python
        after the last call (``python_return``, which hands the model's output back)."""
        graphs, calls = len(self.graphs), len(self.calls)
        breaks = sum(b.node != "python_return" for b in self.breaks)
        parts = [f"{graphs} graph{'s' * (graphs != 1)}", f"{calls} call{'s' * (calls != 1)}"]
        parts.append(f"{breaks or 'no'} break{'s' * (breaks != 1)}")
        return f"{self.method}: " + ", ".join(parts)

    def __repr__(self) -> str:
        return f"<fxviz.Capture {self.summary()}>"

    def __deepcopy__(self, memo: dict[int, Any]) -> Capture:
        """A copy that is a whole capture: ``GraphModule``'s own copies the module state
        and graph only, and a copy without the capture's attributes could not be run."""
        copied = super().__deepcopy__(memo)
        for name in _CAPTURE_ATTRIBUTES:
            setattr(copied, name, copy.deepcopy(getattr(self, name), memo))
        return copied  # type: ignore[return-value]  (the same class as self)


_CAPTURE_ATTRIBUTES = (  # what ``stitch`` sets on a Capture besides its graph
    "method", "graphs", "calls", "breaks", "guards", "recompiles", "input_names",
    "_signature", "_example",
)  # fmt: skip


def stitch(
    model: Any,
    names: list[str],
    leaves: list[Any],
    graphs: list[torch.fx.GraphModule],
    calls: list[GraphCall],
    output: Any,
    *,
    method: str,
    breaks: Callable[[int], GraphBreak],
    guards: Sequence[str] = (),
    recompiles: Sequence[str] = (),
    writes: Sequence[tuple[Any, str | None, str, Any]] = (),
    written: Sequence[tuple[torch.Tensor, torch.Tensor]] = (),
) -> Capture:
    """Stitch the graph ``calls`` of one run into a :class:`Capture`.

    ``breaks(k)`` describes the Python after call ``k`` (``-1``: before the first call).
    Values are matched by identity: a tensor a graph takes that an input, a parameter or
    an earlier graph produced becomes an edge; anything else came from Python.
    ``writes`` (``(module, registry, name, value)``): the attributes the run assigned,
    which the ``python_return`` node assigns again, with this call's tensors.
    ``written``: the model's tensors the Python after the last call wrote in place, with
    their values at the end (those before a call are ``GraphCall.written``).
    """
    builder = _Builder(model)
    placeholders = [builder.graph.placeholder(name) for name in names]
    for node, value in zip(placeholders, leaves, strict=True):
        builder.know(value, node)
    made_breaks: list[GraphBreak] = []
    previous: list[torch.fx.Node] = list(placeholders)
    first_python = True
    seen: dict[int, int] = {}
    for k, call in enumerate(calls):
        runs = seen[call.graph] = seen.get(call.graph, 0) + 1
        call.prefix = _prefix(call.graph, runs) if len(calls) > 1 else ""
        gm = graphs[call.graph]
        inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        from_python = [
            (ph, v)
            for ph, v in zip(inputs, call.inputs, strict=False)
            if isinstance(v, torch.Tensor) and builder.lookup(v) is None
        ]
        if k > 0 or from_python or call.written:
            info = breaks(k - 1)
            expected = list(leaves) if first_python else None
            args = [*placeholders] if first_python else []
            args += [n for n in previous if n not in args]
            values = tuple(
                call.before[id(v)] if id(v) in call.before else _fresh(v) for _, v in from_python
            )
            name = f"python{len(made_breaks)}"
            segment = PythonSegment(
                name, values, expected=expected, written=builder.written(call.written, args)
            )
            node = builder.graph.call_function(segment, tuple(args))
            node.name = name
            node.meta["fxviz_break"] = info
            made_breaks.append(dataclasses.replace(info, node=node.name))
            first_python = False
            for i, (ph, v) in enumerate(from_python):
                item = builder.graph.call_function(operator.getitem, (node, i))
                item.name = builder.graph._graph_namespace.create_name(call.prefix + ph.name, None)
                item.meta["fxviz_graph"] = call.graph
                builder.know(v, item)
        previous = builder.inline(call, gm, inputs)
    tail_args = [*placeholders] if first_python else []
    tail_args += [n for n in previous if n not in tail_args]
    # The output is rebuilt from the values this call computed, never the captured run's
    # tensors (their autograd graph saw the model's state before it was restored).
    replace: dict[int, int] = {}
    for t in tensors_in([output, [value for *_, value in writes]]):
        node = builder.lookup(t)
        if node is not None and id(t) not in replace:
            if node not in tail_args:
                tail_args.append(node)
            replace[id(t)] = tail_args.index(node)
    info = breaks(len(calls) - 1)
    tail_written = builder.written(written, tail_args)
    tail = builder.graph.call_function(
        PythonSegment(
            "python_return",
            output,
            expected=list(leaves) if first_python else None,
            fresh=False,
            replace=replace,
            writes=writes,
            written=tail_written,
        ),
        tuple(tail_args),
    )
    tail.name = "python_return"
    tail.meta["fxviz_break"] = info
    made_breaks.append(dataclasses.replace(info, node=tail.name))
    builder.graph.output(tail)
    capture = Capture(builder.root, builder.graph, class_name=_class_name(model))
    capture.method = method
    capture.graphs = list(graphs)
    capture.calls = list(calls)
    capture.breaks = made_breaks
    capture.guards = list(guards)
    capture.recompiles = list(recompiles)
    for call in capture.calls:  # the stitched graph holds what it needs: free the rest
        call.inputs, call.outputs, call.before, call.written = (), None, {}, []
    capture.input_names = list(names)
    capture._signature = _stand_in(model)
    capture._example = list(leaves)
    return capture


def _stand_in(model: Any) -> Callable[..., Any]:
    """A function with ``model``'s call signature and name, for :meth:`Capture.flat_inputs`
    to bind inputs with, holding no reference to the model (a capture kept by the captures'
    cache, weakly keyed by its model, must not keep it alive); the model itself where its
    signature cannot be read (a builtin)."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return model

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a stand-in for a model's signature: it runs nothing")

    stand_in.__signature__ = signature
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else None
    stand_in.__name__ = stand_in.__qualname__ = name or getattr(model, "__name__", "fn")
    return stand_in


class _Builder:
    """Builds the stitched graph and the root module its ``get_attr`` nodes read."""

    def __init__(self, model: Any) -> None:
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self._known: dict[int, torch.fx.Node] = {}
        self._keep_alive: list[Any] = []
        self._params: dict[int, str] = {}
        self._model: Any = model
        if isinstance(model, torch.nn.Module):
            state = [*model.named_parameters(), *model.named_buffers()]
            for path, t in [*state, *tensor_attributes(model)]:
                self._params.setdefault(id(t), path)
                self._keep_alive.append(t)

    def _owner_type(self, path: str) -> type:
        try:
            return type(self._model.get_submodule(path))
        except (AttributeError, TypeError):
            return torch.nn.Module

    def know(self, value: Any, node: torch.fx.Node) -> None:
        if isinstance(value, torch.Tensor):
            self._known.setdefault(id(value), node)
            self._keep_alive.append(value)

    def lookup(self, value: torch.Tensor) -> torch.fx.Node | None:
        node = self._known.get(id(value))
        if node is not None:
            return node
        path = self._params.get(id(value))
        if path is None:
            return None
        _set_attr(self.root, path, value)
        node = self.graph.get_attr(path)
        self._known[id(value)] = node
        return node

    def written(
        self, written: Sequence[tuple[torch.Tensor, torch.Tensor]], args: list[torch.fx.Node]
    ) -> dict[int, torch.Tensor]:
        """Where in ``args`` (appended when missing) a ``python`` node takes each model
        tensor it writes in place, with the value it writes."""
        found: dict[int, torch.Tensor] = {}
        for target, value in written:
            node = self.lookup(target)
            if node is None:  # not the model's: nothing a graph or the caller reads
                continue
            if node not in args:
                args.append(node)
            found[args.index(node)] = value
        return found

    def inline(
        self, call: GraphCall, gm: torch.fx.GraphModule, inputs: list[torch.fx.Node]
    ) -> list[torch.fx.Node]:
        """Copy ``gm``'s nodes for this call; returns the nodes of its outputs."""
        env: dict[torch.fx.Node, Any] = {}
        owner = None  # the path of the module whose forward this graph is
        for ph, value in zip(inputs, call.inputs, strict=False):
            found = self.lookup(value) if isinstance(value, torch.Tensor) else None
            env[ph] = found if found is not None else value
            if owner is None and found is not None and found.op == "get_attr":
                owner = _owner_path(str(ph.target), str(found.target))
        returned: list[torch.fx.Node] = []
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                returned = _output_nodes(node.args[0], env)
                break
            target = node.target
            if node.op == "get_attr":
                value = _get_attr(gm, str(target))
                found = self.lookup(value) if isinstance(value, torch.Tensor) else None
                if found is not None:  # one of the model's parameters or buffers
                    env[node] = found
                    continue
            if node.op in ("get_attr", "call_module"):
                target = f"{call.prefix}{str(node.target).replace('.', '_')}"
                if not hasattr(self.root, target):
                    _set_attr(self.root, target, _get_attr(gm, str(node.target)))
            new = self.graph.create_node(
                node.op,
                target,
                torch.fx.map_arg(node.args, env.__getitem__),
                torch.fx.map_arg(node.kwargs, env.__getitem__),
                name=call.prefix + node.name,
                type_expr=node.type,
            )
            new.meta = {k: node.meta[k] for k in _KEPT_META if k in node.meta}
            stack = _clean_stack(new.meta.get("nn_module_stack") or {}, owner)
            if owner:  # the graph is a submodule's forward: its nodes sit in that module
                stack = {"fxviz_owner": (owner, self._owner_type(owner)), **stack}
            if stack:
                new.meta["nn_module_stack"] = stack
            new.meta["fxviz_graph"] = call.graph
            env[node] = new
        outs = call.outputs if isinstance(call.outputs, (tuple, list)) else [call.outputs]
        for node, value in zip(returned, outs, strict=False):
            if isinstance(node, torch.fx.Node):
                self.know(value, node)
        return [n for n in returned if isinstance(n, torch.fx.Node)]


def _prefix(graph: int, runs: int) -> str:
    """``g0_``, ``g1_``; ``g1r2_`` for the second call of graph 1."""
    return f"g{graph}" + (f"r{runs}" if runs > 1 else "") + "_"


def _output_nodes(value: Any, env: dict[torch.fx.Node, Any]) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [env.get(v, v) if isinstance(v, torch.fx.Node) else v for v in value]
    return [env.get(value, value) if isinstance(value, torch.fx.Node) else value]


def _fresh(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _get_attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set_attr(root: torch.nn.Module, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        child = getattr(root, part, None)
        if child is None:
            child = torch.nn.Module()
            root.add_module(part, child)
        root = child
    if isinstance(value, torch.nn.Parameter):
        root.register_parameter(leaf, value)
    elif isinstance(value, torch.nn.Module):
        root.add_module(leaf, value)
    elif isinstance(value, torch.Tensor):
        root.register_buffer(leaf, value)
    else:
        setattr(root, leaf, value)


# The module whose forward Dynamo compiled: ``self``, or ``args[0]`` when a decorator
# (``def wrapper(*args, **kwargs)``, as Hugging Face wraps its forwards) is the frame.
_SELF = re.compile(r"^L\['self'\]\.?|^L__self___?|^L\['args'\]\[0\]\.?|^L__args___0___?")
_INDEX = re.compile(r"\[(\d+)\]")
_KEY = re.compile(r"\._modules\['([^']+)'\]|\['([^']+)'\]")


def _clean_stack(stack: dict[str, Any], owner: str | None = None) -> dict[str, Any]:
    """Dynamo writes module paths as ``L['self'].layers[0]``, relative to the module whose
    forward it compiled (``owner``); fxviz uses ``layers.0`` from the model's root."""
    clean = {}
    for key, (path, kind) in stack.items():
        if isinstance(path, str):
            path = _SELF.sub("", path)
            path = _KEY.sub(lambda m: "." + (m.group(1) or m.group(2)), path)
            path = _INDEX.sub(r".\1", path).strip(".")
            if owner:
                path = f"{owner}.{path}" if path else ""
        if path and path != owner:
            clean[key] = (path, kind)
    return clean


_PARAMETER_INPUT = re.compile(r"^l_(?:self|args_0)_(.*)_$", re.IGNORECASE)
_ATTRIBUTE_KIND = re.compile(r"_(?:modules|parameters|buffers)_")


def _owner_path(placeholder: str, parameter: str) -> str | None:
    """``l_self_modules_fc_parameters_weight_`` read as ``head.fc.weight`` means the graph
    is ``head``'s forward: Dynamo names lifted parameters relative to ``self``."""
    match = _PARAMETER_INPUT.match(placeholder)
    if match is None:
        return None
    relative = ".".join(p for p in _ATTRIBUTE_KIND.split("_" + match.group(1)) if p)
    if parameter == relative:
        return ""
    if parameter.endswith("." + relative):
        return parameter[: -len(relative) - 1]
    return None


def _class_name(model: Any) -> str:
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else "fn"
    return f"Captured{name}"
