"""Typed usage of the public API: checked by pyright in strict mode (``make lint``) and
run by pytest (``test_usage_runs``), so it stays both well-typed and true."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fxviz
from fxviz.overlays import Style, flops_heat, grad_ratio, highlight_nonfinite


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.linear(x))


def _wide(node: fxviz.render.DrawNode) -> Style | None:
    record = node.record
    return Style(border="#c00") if record is not None and record.shape == (2, 3) else None


def test_usage_runs(tmp_path: Path) -> None:
    model, x = _Net(), torch.ones(2, 4)
    gm: torch.fx.GraphModule = fxviz.trace(model, x)
    rec: fxviz.Recording = fxviz.record(gm, x)
    node: fxviz.NodeRecord = rec["linear"]
    count: int = node.nonfinite_count
    first: fxviz.NodeRecord | None = rec.first_nonfinite()
    line: str = rec.summary()
    bad: bool = fxviz.has_nonfinite(node)
    assert count >= 0
    assert not bad
    assert first is None or first.name
    assert line

    dbg = fxviz.Debugger(gm, x)
    dbg.break_when(fxviz.has_nonfinite)
    stopped: fxviz.NodeRecord | None = dbg.continue_()
    status: str = dbg.status
    assert stopped is not None
    assert status

    report: fxviz.ShapeReport = fxviz.shapes(model, fxviz.spec(2, 4), mode="meta")
    totals: dict[str, object] = report.totals()
    assert report.summary()
    assert totals["nodes"]
    assert totals["flops"]
    heat = flops_heat(report)
    assert "FLOPs" in fxviz.to_dot(report, overlay=heat, params="show").source

    stepper = fxviz.Debugger(gm, x, skip_fetches=False)
    fetch: bool = stepper.is_fetch("x")
    assert not fetch

    dot: str = fxviz.to_dot(rec, depth=1, overlay=[_wide, highlight_nonfinite()]).source
    diff: fxviz.GraphDiff = fxviz.diff(gm, fxviz.trace(model, x))
    page: str | None = fxviz.report(rec)
    assert dot.startswith("digraph")
    assert diff.summary()
    assert page

    path: Path = fxviz.save(rec, tmp_path / "run.fxrec")
    loaded: fxviz.Recording = fxviz.load(path)
    assert loaded["linear"].shape == (2, 3)

    graded = fxviz.record(model, x, backward=lambda out: out.nan_to_num().sum())
    assert graded.gradients is not None
    names: list[str] = [g.name for g in graded.gradients]
    assert len(names) == len(graded.gradients)
    ratio = grad_ratio(vanishing=1e-6)
    assert fxviz.to_dot(graded, overlay=ratio).source

    with pytest.raises(fxviz.NodeError) as failure:
        fxviz.record(gm, torch.ones(2, 5))
    partial: fxviz.Recording | None = failure.value.recording
    assert failure.value.node == "linear"
    assert partial is not None
