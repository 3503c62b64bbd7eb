"""The sources of the types below the render layer: GraphModule (and Capture),
ExportedProgram, TorchScript, Recording, ShapeReport, Debugger and GraphDiff.

Registered when ``fxviz.render`` is imported; :mod:`fxviz.render._joint_draw` registers
the joint graph's, and higher layers their own (see :mod:`fxviz.render._source`).
"""

from __future__ import annotations

import html
from typing import Any

import torch
import torch.fx

from fxviz._record import Debugger, Recording
from fxviz._shapes import ShapeReport
from fxviz.overlays import debugger_state
from fxviz.render._diff import GraphDiff
from fxviz.render._fold import Params
from fxviz.render._from_fx import draw_fx
from fxviz.render._model import DrawGraph
from fxviz.render._overlays import Overlay, default_overlays
from fxviz.render._source import Source, register
from fxviz.render._title import model_title
from fxviz.render._torchscript import draw_torchscript

__all__ = [
    "DebuggerSource",
    "ExportedSource",
    "GraphDiffSource",
    "GraphModuleSource",
    "RecordingSource",
    "ShapeReportSource",
    "TorchScriptSource",
]


@register(torch.fx.GraphModule)
class GraphModuleSource(Source):
    """A GraphModule (a :class:`fxviz.Capture` too: its frames are added by ``draw``)."""

    def drawing(self, params: Params) -> DrawGraph:
        return draw_fx(self.obj, params=params, name=model_title(self.obj))


@register(torch.export.ExportedProgram)
class ExportedSource(Source):
    """The lifted graph, with parameters, buffers and constants told apart from inputs."""

    def drawing(self, params: Params) -> DrawGraph:
        program = self.obj
        signature = program.graph_signature
        constants = getattr(signature, "inputs_to_lifted_tensor_constants", {})
        kinds: dict[str, str] = {}
        for name in signature.inputs_to_parameters:
            kinds[name] = "parameter"
        for name in signature.inputs_to_buffers:
            kinds[name] = "buffer"
        for name in constants:
            kinds[name] = "constant"
        targets = {
            **signature.inputs_to_parameters,
            **signature.inputs_to_buffers,
            **constants,
        }
        return draw_fx(
            program.graph_module,
            kinds=kinds,
            targets=targets,
            name=model_title(program),
            params=params,
        )


@register(torch.jit.ScriptModule, torch.jit.ScriptFunction, torch.Graph)
class TorchScriptSource(Source):
    """A TorchScript module, function or graph, method calls inlined."""

    def drawing(self, params: Params) -> DrawGraph:
        return draw_torchscript(self.obj)

    def graph_module(self) -> Any:
        return None


class _RunSource(Source):
    """Something that ran: errors and NaN/Inf drawn by default."""

    def overlays(self) -> list[Overlay]:
        return default_overlays()

    def drawing(self, params: Params) -> DrawGraph:
        recording = self.recording()
        return draw_fx(
            recording.graph_module, records=recording, params=params, name=model_title(self.obj)
        )


@register(Recording)
class RecordingSource(_RunSource):
    """A recorded run: replayed in a report."""

    def recording(self) -> Recording:
        return self.obj

    def replay(self) -> bool | None:
        return True


class _HoldsRunSource(_RunSource):
    """An object holding a run (``.recording``) of its ``.graph_module``."""

    def recording(self) -> Recording:
        return self.obj.recording

    def drawing(self, params: Params) -> DrawGraph:
        return draw_fx(
            self.obj.graph_module,
            records=self.obj.recording,
            params=params,
            name=model_title(self.obj),
        )


@register(ShapeReport)
class ShapeReportSource(_HoldsRunSource):
    """The shape pass's run (fake or meta tensors): shapes, no replay."""


@register(Debugger)
class DebuggerSource(_HoldsRunSource):
    """A Debugger: what it ran so far, its cursor and breakpoints drawn as states."""

    def overlays(self) -> list[Overlay]:
        return [debugger_state(self.obj.node_states()), *super().overlays()]

    def replay(self) -> bool | None:
        return self.obj.skip_fetches

    def shown(self) -> Any:
        return self.obj.recording


@register(GraphDiff)
class GraphDiffSource(Source):
    """Two graphs merged, added/removed/changed nodes shaded, and a table of changes."""

    def drawing(self, params: Params) -> DrawGraph:
        return self.obj.merged()

    def overlays(self) -> list[Overlay]:
        return [self.obj.overlay()]

    def graph_module(self) -> Any:
        return None

    def report_extra(self) -> str:
        table = self.obj.table()
        changed = table[table["status"] != "same"]
        body = changed.to_html(
            index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.3g}"
        )
        return f"<h2>What changed</h2><p>{html.escape(self.obj.summary())}</p>{body}"
