"""The backward pass as a graph: AOTAutograd's forward and backward ATen graphs, linked.

``fxviz.trace(model, x, method="joint")`` returns a :class:`JointGraph`: the forward graph
(parameters, buffers and inputs in; outputs and the tensors saved for backward out), the
backward graph (saved tensors and output gradients in; input gradients out), and links from
each backward node to the forward node it differentiates (``seq_nr``) and from each forward
node to the node of the traced model it came from (``from_node``). Running it is the
record layer's (:mod:`fxviz._record._joint`), drawing it the render layer's.

    >>> import torch, fxviz
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    >>> joint = fxviz.trace(model, torch.randn(2, 4), method="joint")
    >>> joint.link("tanh_backward"), joint.source("tanh")
    ('tanh', '_1')
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

from fxviz._capture._rebuild import RebuiltOutput
from fxviz._providers import provider
from fxviz._torch_compat import (
    ProvenanceInterpreter,
    aot_descriptor,
    aot_graphs,
    reparametrize,
    tree_leaves,
    tree_structure,
)
from fxviz.errors import InputError, TraceError

__all__ = ["JointGraph", "trace_joint"]


class JointGraph:
    """AOTAutograd's forward and backward graphs of a model, with links between them.

    Attributes:
        forward: the forward ``GraphModule`` (ATen ops). It takes the parameters, the
            buffers and the inputs (``primal_names``) and returns the buffers it updates,
            the outputs, then the tensors saved for backward.
        backward: the backward ``GraphModule``: it takes the saved tensors (``saved``),
            then one gradient per output (``tangents``), and returns one gradient per
            forward input (``grad_of``; ``None`` for those that get none).
        model: the traced model (``fxviz.trace(model)``) the graphs were made from.
    """

    def __init__(
        self,
        model: torch.fx.GraphModule,
        forward: torch.fx.GraphModule,
        backward: torch.fx.GraphModule,
        primal_names: list[str],
        n_state: int,
        output_structure: Any = None,
    ) -> None:
        self.model, self.forward, self.backward = model, forward, backward
        self._output_structure = output_structure
        self.primal_names = primal_names
        self._n_state = n_state  # parameters and buffers, before the inputs
        out_descs = forward.graph.output_node().meta.get("desc")
        if out_descs is None:
            raise TraceError("method='joint' needs torch >= 2.9 (AOTAutograd descriptors)")
        self._fw_outputs = [aot_descriptor(d) for d in out_descs]
        placeholders = backward.graph.find_nodes(op="placeholder")
        self.tangents = [n.name for n in placeholders if n.name.startswith("tangents")]
        self.saved = [n.name for n in placeholders if not n.name.startswith("tangents")]
        # each tangent's forward output, as a position in the forward's outputs: a user
        # output, an intermediate base AOTAutograd added (several outputs view it) or a
        # mutated input; an output that views another output or an input gets none
        position = {d: i for i, d in enumerate(out_descs)}
        plain = sorted(
            (i, p) for p, (kind, i) in enumerate(self._fw_outputs) if kind == "PlainAOTOutput"
        )
        self._output_at = [p for _, p in plain]  # the model's outputs, in its order
        self._tangent_at: list[int | None] = [
            position.get(getattr(n.meta.get("desc"), "output", None))
            for n in placeholders
            if n.name in self.tangents
        ]
        bw_descs = backward.graph.output_node().meta.get("desc") or []
        self.grad_of = [
            None if d is None else primal_names[aot_descriptor(d)[1]]  # type: ignore[index]
            for d in bw_descs
        ]
        self.links = _backward_links(forward, backward)

    # -- links ---------------------------------------------------------------------------
    def link(self, name: str) -> str | None:
        """The forward node that backward node ``name`` differentiates (or, for a saved
        tensor, the forward node that made it)."""
        return self.links.get(name)

    def source(self, name: str) -> str | None:
        """The node of the traced model (``joint.model``) that forward node ``name`` came
        from; for a forward input, the parameter, buffer or ``input_<i>`` it takes."""
        node = _find(self.forward, name)
        if node is not None and node.op == "placeholder":
            index = self.forward.graph.find_nodes(op="placeholder").index(node)
            return self.primal_names[index]
        sources = node.meta.get("from_node") if node is not None else None
        return sources[-1].name if sources else None

    # -- drawing and running: the record and render layers do these ---------------------
    def to_dot(self, selected: str | None = None, side: str = "backward", **options: Any) -> Any:
        """Forward and backward side by side as a ``graphviz.Digraph``. ``selected`` (a
        node of ``side``) is highlighted with the nodes linked to it on the other side;
        other options as for :func:`fxviz.to_dot`."""
        return provider("joint.to_dot")(self, None, selected, side, **options)

    def run(self, *inputs: Any, backward: Any = True) -> Any:
        """Run the forward graph, then the backward graph on its saved tensors (a
        ``JointRun``). ``backward`` is as for :func:`fxviz.record`: ``True`` (gradient of
        the outputs' sum), a loss function ``outputs -> scalar``, or the output gradients
        themselves. The model's buffers are not updated (the updates are in ``mutations``).
        """
        return provider("joint.run")(self, *inputs, backward=backward)

    def backward_inputs(self, *inputs: Any, backward: Any = True) -> list[Any]:
        """The backward graph's inputs for a real run: saved tensors, then tangents."""
        return provider("joint.backward_inputs")(self, *inputs, backward=backward)

    def record(
        self, *inputs: Any, backward: Any = True, keep: Any = "all", stats: bool = True
    ) -> Any:
        """Record the forward graph, then the backward graph on the real saved tensors
        (a ``JointRecording``); the same as ``fxviz.record(joint, *inputs)``."""
        return provider("joint.record")(self, *inputs, backward=backward, keep=keep, stats=stats)

    def debugger(self, *inputs: Any, backward: Any = True, **options: Any) -> Any:
        """A :class:`fxviz.Debugger` over the backward graph, fed real saved tensors (the
        same as ``fxviz.Debugger(joint, *inputs)``): breakpoints, NaN breaks,
        post-mortem and time travel work as on any graph."""
        return provider("joint.debugger")(self, *inputs, backward=backward, **options)

    def tangents_for(self, forward_outputs: list[Any], backward: Any) -> list[torch.Tensor]:
        """The gradients that the backward graph starts from, given all that the forward
        graph returned (outputs that view another output count towards its gradient)."""
        return provider("joint.tangents")(self, forward_outputs, backward)

    def bind(self, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The positional inputs for a call written as ``model(*inputs, **kwargs)``
        (keyword inputs bound by the traced model's input names)."""
        from fxviz._capture._bind import bind_inputs

        return bind_inputs(self.model, inputs, kwargs) if kwargs else tuple(inputs)

    def primals(self, *inputs: Any) -> list[Any]:
        """The forward graph's inputs: the model's current parameters and buffers, then ``inputs``."""
        state: dict[str, torch.Tensor] = dict(self.model.named_parameters(remove_duplicate=False))
        state.update(self.model.named_buffers(remove_duplicate=False))
        names = self.primal_names[: self._n_state]
        flat = tree_leaves(list(inputs))
        expected = len(self.primal_names) - self._n_state
        if len(flat) != expected:
            raise InputError(
                f"this joint graph takes {expected} input tensor(s) but {len(flat)} were given"
            )
        return [state[n] for n in names] + flat

    def _split(self, fw_out: list[Any]) -> tuple[list[Any], list[Any], dict[str, torch.Tensor]]:
        saved, mutations = [], {}
        for (kind, index), value in zip(self._fw_outputs, fw_out, strict=True):
            if kind.startswith("SavedForBackwards"):
                saved.append(value)
            elif kind == "InputMutationAOTOutput":
                mutations[self.primal_names[index]] = value  # type: ignore[index]
        return [fw_out[p] for p in self._output_at], saved, mutations

    def _grads(
        self, bw_out: Any, through_views: dict[str, torch.Tensor] | None = None
    ) -> dict[str, torch.Tensor | None]:
        """Each primal's gradient: the backward graph's, plus what reaches it through
        outputs that view it (``through_views``; AOTAutograd's runtime makes those views
        outside the graphs, so their gradient flows to the primal as in eager)."""
        grads = {name: g for name, g in zip(self.grad_of, bw_out, strict=True) if name is not None}
        for name, g in (through_views or {}).items():
            grads[name] = g if grads.get(name) is None else grads[name] + g
        return grads

    def __repr__(self) -> str:
        fw, bw = len(self.forward.graph.nodes), len(self.backward.graph.nodes)
        return (
            f"<fxviz.JointGraph: forward {fw} nodes, backward {bw} nodes, "
            f"{len(self.saved)} saved tensors>"
        )


def trace_joint(obj: Any, model: torch.fx.GraphModule, *example_inputs: Any) -> JointGraph:
    """AOTAutograd's forward and backward graphs of ``model`` (``obj`` traced) on
    ``example_inputs``."""
    model = _graphs_only(obj, model)
    state: dict[str, torch.Tensor] = dict(model.named_parameters(remove_duplicate=False))
    state.update(model.named_buffers(remove_duplicate=False))
    names = list(state)
    flat_inputs = tree_leaves(list(example_inputs))

    def run_model(*flat: Any) -> Any:
        with reparametrize(model, dict(zip(names, flat[: len(names)], strict=True))):
            return ProvenanceInterpreter(model).run(*flat[len(names) :])

    try:
        with _buffers_restored(model):
            forward, backward, sample = aot_graphs(
                run_model, [*state.values(), *flat_inputs], len(names)
            )
    except Exception as e:
        raise TraceError(
            f"AOTAutograd could not capture {type(obj).__name__}: {e}\nWhat to do: record "
            "the gradients of one run instead: fxviz.record(model, *args, backward=loss_fn)"
        ) from e
    if forward is None or backward is None:
        raise TraceError(
            "method='joint' found nothing to differentiate: no output depends on a parameter "
            "or an input with requires_grad=True"
        )
    primal_names = names + [f"input_{i}" for i in range(len(flat_inputs))]
    return JointGraph(model, forward, backward, primal_names, len(names), tree_structure(sample))


def _graphs_only(obj: Any, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A one-run capture (Dynamo, real) whose only Python is its return, or an exported
    graph that builds an object pytree cannot hold, as a graph that returns the tensors
    the model's output is built from (a Hugging Face model's output object and cache are
    Python, which AOTAutograd cannot trace); a capture with Python between its graphs is
    refused."""
    segments = [n for n in model.graph.nodes if "fxviz_break" in n.meta]
    if not segments:  # an exported graph may build an output object pytree cannot hold
        segments = [n for n in model.graph.nodes if isinstance(n.target, RebuiltOutput)]
        if not segments:
            return model
    elif len(segments) > 1 or segments[0].name != "python_return":
        raise TraceError(
            f"method='joint' needs one graph of {type(obj).__name__}: its capture "
            f"({getattr(model, 'method', 'one run')}) has {len(segments) - 1} Python "
            "segment(s) between graphs (graph breaks), which AOTAutograd cannot "
            "differentiate. Record the gradients of one run instead: "
            "fxviz.record(model, *args, backward=loss_fn)"
        )
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in model.graph.nodes:
        if node.op == "output":
            break
        if node is not segments[0]:
            env[node] = graph.node_copy(node, lambda n: env[n])
    returned = [a for a in tree_leaves(segments[0].args) if isinstance(a, torch.fx.Node)]
    graph.output(tuple(env[a] for a in returned if a.op != "placeholder"))
    return torch.fx.GraphModule(model, graph, class_name=type(model).__name__)


@contextlib.contextmanager
def _buffers_restored(model: torch.nn.Module) -> Iterator[None]:
    """Capturing runs the model once: put back what it changed (BatchNorm statistics)."""
    before = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(before[name])


def _find(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node | None:
    return next((n for n in gm.graph.nodes if n.name == name), None)


def _backward_links(
    forward: torch.fx.GraphModule, backward: torch.fx.GraphModule
) -> dict[str, str]:
    """Backward node -> the forward node it differentiates: same ``seq_nr`` (the autograd
    node's sequence number), the one in the same module first; a saved tensor -> the
    forward node that produced it."""
    by_seq: dict[int, list[torch.fx.Node]] = {}
    fw_names = set()
    for node in forward.graph.nodes:
        fw_names.add(node.name)
        if node.op == "call_function" and "seq_nr" in node.meta:
            by_seq.setdefault(node.meta["seq_nr"], []).append(node)
    links = {}
    for node in backward.graph.nodes:
        if node.op == "placeholder":
            if node.name in fw_names:
                links[node.name] = node.name
            continue
        if node.meta.get("partitioner_tag") != "is_backward" or "seq_nr" not in node.meta:
            continue
        candidates = by_seq.get(node.meta["seq_nr"], [])
        stack = node.meta.get("fwd_nn_module_stack")
        same_module = [c for c in candidates if c.meta.get("nn_module_stack") == stack]
        best = (same_module or candidates)[:1]
        if best:
            links[node.name] = best[0].name
    return links
