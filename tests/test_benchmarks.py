"""The benchmark scripts still run (their --quick mode); figures are read by people, not here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow  # a smoke test; still part of the default run (and CI)
@pytest.mark.parametrize(
    "script",
    [
        "record_overhead.py",
        "shapes.py",
        "render.py",
        "any_model.py",
        "save_compare.py",
        "gradients.py",
        "tensor_statistics.py",
        "training.py",
        "real_models.py",
        "conformance.py",
    ],
)
def test_benchmark_quick_mode_runs(script):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "targets" in done.stdout
