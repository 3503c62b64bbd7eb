"""``fxviz demo``: record the built-in example and print what fxviz saw."""

from __future__ import annotations

import pathlib

import pandas as pd
import torch

import fxviz
from fxviz.examples import TwoLayerNet, two_layer_net_inputs

__all__ = ["demo_table", "run_demo"]

_COLUMNS = ["op", "target", "module", "shape", "dtype", "min", "max", "mean", "std", "zeros"]


def demo_table(recording: fxviz.Recording) -> pd.DataFrame:
    """The columns of ``recording.table()`` that read well in a terminal."""
    table = recording.table()[_COLUMNS].copy()
    table["time_us"] = (recording.table()["time_s"] * 1e6).round(1)
    return table


def run_demo(output: str = "fxviz-demo.html") -> int:
    """Trace, record and step the TwoLayerNet; print the table, write a replay report."""
    torch.manual_seed(0)
    model = TwoLayerNet()
    x = two_layer_net_inputs()
    recording = fxviz.record(model, x)
    assert torch.equal(recording.output, model(x))
    with pd.option_context("display.width", 140, "display.max_columns", 20, "display.precision", 4):
        print("fxviz demo: TwoLayerNet (the torch.fx ShapeProp example), input", list(x.shape))
        print()
        print(demo_table(recording).to_string())
    print()
    print("recording:", recording.summary())
    dbg = fxviz.Debugger(model, x)
    dbg.break_at("linear2")
    dbg.continue_()
    print("debugger: ", dbg.status)
    fxviz.report(recording, output, title="fxviz demo: TwoLayerNet")
    path = pathlib.Path(output).resolve()
    print(f"report:    {path} (open it in any browser; it works offline: step through the run)")
    print()
    print("Next:")
    print("  - in Python:  rec = fxviz.record(model, x); rec.table(); fxviz.Debugger(model, x)")
    print(
        "  - shapes:     fxviz shapes fxviz.examples:TwoLayerNet --input 'randn(64,1000)' --mode fake"
    )
    print("  - notebook:   fxviz.debug(model, x) in JupyterLab (.venv/bin/jupyter lab notebooks/)")
    print("  - README.md:  the API in ten lines")
    return 0
