"""One source adapter: every drawable type is registered in one place, higher layers
register their own, unknown objects degrade with a warning, and no object carries a
private ``_fxviz_*`` hook any more. Also: the recording engine is chosen explicitly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fxviz
from fxviz.errors import DrawingWarning
from fxviz.render import Source, register, source_of
from fxviz.render._model import DrawGraph

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ("_fxviz_drawing", "_fxviz_draw_", "_fxviz_overlays", "_fxviz_inspector")
HOOKS += ("_fxviz_rows", "_fxviz_report", "_fxviz_linked")


def test_no_domain_class_carries_a_drawing_hook():
    found = [
        f"{path.relative_to(ROOT)}: {hook}"
        for path in sorted((ROOT / "fxviz").rglob("*.py"))
        for hook in HOOKS
        if re.search(rf"\b{hook}\b", path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_each_layer_registers_its_own_types():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    x = torch.ones(1, 3)
    rec = fxviz.record(model, x)
    comparison = fxviz.compare(rec, rec)
    joint = fxviz.trace(model, x, method="joint")
    kinds = {
        type(source_of(obj)).__name__
        for obj in (fxviz.trace(model), rec, fxviz.Debugger(model, x), comparison, joint)
    }
    assert kinds == {
        "GraphModuleSource",
        "RecordingSource",
        "DebuggerSource",
        "ComparisonSource",
        "JointGraphSource",
    }


class _Wrapper:
    """A user's object holding a graph: fxviz does not know it."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.graph_module = gm


def test_an_unknown_object_with_a_graph_is_drawn_through_it_with_a_warning():
    gm = fxviz.trace(torch.nn.ReLU())
    with pytest.warns(
        DrawingWarning, match="does not know how to draw a _Wrapper: drawing its graph_module"
    ):
        dot = fxviz.to_dot(_Wrapper(gm)).source
    assert "relu" in dot.lower() or "_0" in dot


def test_an_unknown_object_is_refused_saying_what_to_pass():
    with pytest.raises(
        fxviz.RenderError, match="cannot draw an object of type int: pass a GraphModule"
    ):
        fxviz.to_dot(42)


def test_a_registered_source_draws_a_new_type_and_a_failing_part_degrades():
    class Pair:
        def __init__(self, gm: torch.fx.GraphModule) -> None:
            self.gm = gm

    @register(Pair)
    class PairSource(Source):
        def drawing(self, params: str) -> DrawGraph:
            return source_of(self.obj.gm).drawing(params)

        def overlays(self) -> list:
            raise ValueError("no overlay today")

    gm = fxviz.trace(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    with pytest.warns(
        DrawingWarning, match=r"default overlays of this Pair \(ValueError: no overlay today\)"
    ):
        dot = fxviz.to_dot(Pair(gm)).source
    assert dot == fxviz.to_dot(gm).source


def test_record_takes_its_engine_as_an_argument():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    x = torch.randn(2, 3)
    compiled = fxviz.record(model, x, engine="compiled")
    interpreted = fxviz.record(model, x, engine="interpreted")
    assert [r.shape for r in compiled.values()] == [r.shape for r in interpreted.values()]
    torch.testing.assert_close(compiled.output, interpreted.output)
    with pytest.raises(fxviz.InputError, match=r"unknown engine: 'fast' \(must be one of"):
        fxviz.record(model, x, engine="fast")
    with pytest.raises(
        fxviz.InputError, match="engine='compiled' cannot run interpreter= or backward="
    ):
        fxviz.record(model, x, engine="compiled", backward=True)


def test_no_environment_variable_picks_the_engine():
    code = "import fxviz._record._engine as e; print(e.ENGINE)"
    env = {**os.environ, "FXVIZ_ENGINE": "interpreted", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "compiled"
