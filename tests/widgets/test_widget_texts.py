"""What the debugger widget says: no torch log above it, a NaN stop that names its node."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import torch

import fxviz
from fxviz.widgets._app import torch_logs_kept

MISMATCHED = """
import torch, fxviz
class Bad(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.a = torch.nn.Linear(8, 16); self.b = torch.nn.Linear(8, 4)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
app = fxviz.debug(Bad(), torch.randn(2, 8))
print("ERROR:", app.error)
app.handle({"type": "continue"})
print("STATUS:", app.status)
"""


def test_a_failing_model_prints_no_torch_log_and_says_why_shapes_are_missing():
    done = subprocess.run(
        [sys.executable, "-c", MISMATCHED], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "fake_tensor" not in done.stderr  # torch's 19-line log of the fake pass: kept
    assert "failed while attempting to run meta" not in done.stderr + done.stdout
    error = next(line for line in done.stdout.splitlines() if line.startswith("ERROR:"))
    assert "Output shapes are not shown" in error
    assert "must have same reduction dim" in error  # why, in one line
    assert "dbg." not in error  # widget terms, no Python calls
    status = next(line for line in done.stdout.splitlines() if line.startswith("STATUS:"))
    assert "stopped at 'b'" in status  # the failing node is still found by running


def test_torch_logs_are_kept_only_while_fxviz_works_and_handlers_come_back():
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    torch_logger = logging.getLogger("torch")
    before = (torch_logger.handlers[:], torch_logger.propagate, logger.handlers[:])
    with torch_logs_kept() as kept:
        logger.error("meta failed for aten.mm.default")
    assert [r.getMessage() for r in kept] == ["meta failed for aten.mm.default"]
    assert (torch_logger.handlers, torch_logger.propagate, logger.handlers) == before


def test_a_nan_stop_names_the_node_that_made_it_in_words():
    class Risky(torch.nn.Module):
        def forward(self, x):
            return torch.relu(torch.log(x - 10.0)) + 1

    app = fxviz.debug(Risky(), torch.ones(3))
    app.handle({"type": "break_nan"})
    assert app.status.endswith("breakpoints: NaN/Inf")
    app.handle({"type": "continue"})
    assert app.status.startswith("stopped after 'log' produced NaN/Inf — ")
    assert app.inspector["name"] == "log"  # the inspector agrees with the status
    assert "nonfinite" in app.node_states["log"]


def test_labels_show_the_users_names_not_torch_internals():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
    x = torch.randn(2, 16)
    source = fxviz.to_dot(fxviz.trace(model, x, method="dynamo")).source
    nodes = [line for line in source.splitlines() if " [label=<" in line]
    assert len(nodes) >= 4
    drawn = " ".join(re.sub(r'tooltip="[^"]*"', "", line) for line in nodes)  # labels only
    assert "torch._C" not in drawn
    assert "torch.nn.functional" not in drawn
    assert "Linear" in drawn
    assert "ReLU" in drawn
    assert "torch._C._nn.linear" in source  # the full target stays in the tooltip
