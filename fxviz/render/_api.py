"""``fxviz.to_dot`` and ``fxviz.to_svg``: any graph fxviz knows, as DOT or SVG."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from typing import Any

import graphviz
import torch
import torch.fx

from fxviz._record._records import Recording
from fxviz._shapes._report import ShapeReport
from fxviz.errors import FxvizError
from fxviz.render._dot import render
from fxviz.render._fold import Params
from fxviz.render._from_fx import draw_fx
from fxviz.render._model import DrawGraph
from fxviz.render._overlays import Overlay, errors, nonfinite_values
from fxviz.render._title import model_title

__all__ = ["RenderError", "draw", "to_dot", "to_svg"]


class RenderError(FxvizError, RuntimeError):
    """A graph could not be drawn (no ``dot`` for SVG, an object fxviz cannot draw)."""


def draw(obj: Any, *, params: Params = "fold") -> DrawGraph:
    """The drawing model of anything :func:`to_dot` accepts."""
    if isinstance(obj, DrawGraph):
        return obj
    if isinstance(obj, Recording):
        return draw_fx(obj.graph_module, records=obj, params=params, name=model_title(obj))
    if isinstance(obj, ShapeReport):
        return draw_fx(
            obj.graph_module, records=obj.recording, params=params, name=model_title(obj)
        )
    if isinstance(obj, torch.export.ExportedProgram):
        return _draw_exported(obj, params)
    if isinstance(obj, torch.fx.GraphModule):
        return draw_fx(obj, params=params, name=model_title(obj))
    from fxviz.render._diff import GraphDiff

    if isinstance(obj, GraphDiff):
        return obj.merged()
    from fxviz.render import _torchscript

    if _torchscript.is_torchscript(obj):
        return _torchscript.draw_torchscript(obj)
    debugger = _debugger_recording(obj)
    if debugger is not None:
        return draw_fx(obj.graph_module, records=debugger, params=params, name=model_title(obj))
    raise RenderError(
        f"cannot draw an object of type {type(obj).__name__}: pass a GraphModule, Recording, "
        "ShapeReport, Debugger, ExportedProgram or TorchScript module/function/graph "
        "(fxviz.trace(model) turns a module into a GraphModule)"
    )


def to_dot(
    obj: Any,
    *,
    depth: int | None = None,
    expand: Iterable[str] = (),
    collapse: Iterable[str] = (),
    overlay: Overlay | Sequence[Overlay] | None = None,
    legend: bool = True,
    edge_labels: bool | None = None,
    rankdir: str = "TB",
    max_label: int = 40,
    stub_fanout: int = 6,
    params: Params = "fold",
) -> graphviz.Digraph:
    """The graph as DOT source (a ``graphviz.Digraph``; no ``dot`` binary needed).

    Args:
        obj: a ``GraphModule``, ``Recording``, ``ShapeReport``, ``Debugger``,
            ``ExportedProgram``, or a TorchScript ``ScriptModule``/``ScriptFunction``/
            ``torch.Graph``.
        depth: collapse every module deeper than this into one box (``None``: draw all
            nodes, grouped into nested module clusters).
        expand: module paths to open although ``depth`` would collapse them.
        collapse: module paths to draw as one box whatever ``depth`` says.
        overlay: a rule or list of rules ``node -> fxviz.Style`` applied in order, after
            the defaults (errors and NaN/Inf for recordings, debugger states).
        legend: draw a legend of the node kinds.
        edge_labels: label edges with tensor shapes (default: when known and the graph has
            at most 400 nodes).
        rankdir: ``"TB"`` (top to bottom) or ``"LR"``.
        max_label: longest label line before it is cut (full text in the tooltip).
        stub_fanout: inputs with more users than this are drawn as a small copy beside
            each user (0: never).
        params: ``"fold"`` lists parameters, buffers and constants (with shapes) inside
            the nodes that use them; ``"show"`` draws each fetch as a node of its own.

    Node ids are the FX node names, so the output is stable and the browser can address
    nodes. Never display the returned Digraph directly in a notebook: that calls ``dot``.

    Example:
        >>> import torch, fxviz
        >>> dot = fxviz.to_dot(fxviz.trace(torch.nn.Sequential(torch.nn.Linear(4, 2))))
        >>> "Linear(4→2)" in dot.source
        True
    """
    overlays = [*_default_overlays(obj), *_as_list(overlay)]
    return render(
        draw(obj, params=params),
        depth=depth,
        expand=expand,
        collapse=collapse,
        overlays=overlays,
        legend=legend,
        edge_labels=edge_labels,
        rankdir=rankdir,
        max_label=max_label,
        stub_fanout=stub_fanout,
    )


def to_svg(obj: Any, **options: Any) -> str:
    """SVG text laid out by the system ``dot`` (Graphviz), when it is installed.

    Raises:
        RenderError: ``dot`` is not on PATH; the notebook widget and the HTML report lay
            graphs out in the browser and need no ``dot`` at all.
    """
    if shutil.which("dot") is None:
        raise RenderError(
            "to_svg needs the Graphviz 'dot' program, which is not installed (apt install "
            "graphviz, brew install graphviz, conda install graphviz). The notebook widget "
            "(fxviz.show) and the HTML report (fxviz.report) lay graphs out in the browser "
            "and need no 'dot' at all; fxviz.to_dot(obj).source gives the DOT text."
        )
    digraph = obj if isinstance(obj, graphviz.Digraph) else to_dot(obj, **options)
    try:
        return digraph.pipe(format="svg", encoding="utf-8")
    except graphviz.CalledProcessError as e:
        raise RenderError(f"dot could not lay out the graph: {e.stderr or e}") from e


def _default_overlays(obj: Any) -> list[Overlay]:
    from fxviz.render._diff import GraphDiff

    if isinstance(obj, GraphDiff):
        return [obj.overlay()]
    if isinstance(obj, (Recording, ShapeReport)) or _debugger_recording(obj) is not None:
        overlays: list[Overlay] = [errors, nonfinite_values]
        states = getattr(obj, "node_states", None)
        if callable(states):
            from fxviz.render._overlays import debugger_state

            overlays.insert(0, debugger_state(states()))
        return overlays
    return []


def _as_list(overlay: Overlay | Sequence[Overlay] | None) -> list[Overlay]:
    if overlay is None:
        return []
    if callable(overlay):
        return [overlay]
    return list(overlay)


def _debugger_recording(obj: Any) -> Recording | None:
    from fxviz._record import Debugger

    return obj.recording if isinstance(obj, Debugger) else None


def _draw_exported(program: torch.export.ExportedProgram, params: Params) -> DrawGraph:
    """The lifted graph, with parameters, buffers and constants told apart from user inputs."""
    signature = program.graph_signature
    kinds: dict[str, str] = {}
    for name in signature.inputs_to_parameters:
        kinds[name] = "parameter"
    for name in signature.inputs_to_buffers:
        kinds[name] = "buffer"
    for name in getattr(signature, "inputs_to_lifted_tensor_constants", {}):
        kinds[name] = "constant"
    targets = {
        **signature.inputs_to_parameters,
        **signature.inputs_to_buffers,
        **getattr(signature, "inputs_to_lifted_tensor_constants", {}),
    }
    return draw_fx(
        program.graph_module,
        kinds=kinds,
        targets=targets,
        name=model_title(program),
        params=params,
    )
