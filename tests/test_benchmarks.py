"""The benchmark scripts still run (their --quick mode); figures are read by people, not here."""

from __future__ import annotations

import re
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
        "widget_kernel.py",
        "targets.py",
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


def test_make_bench_runs_every_benchmark():
    recipe = (BENCHMARKS.parent / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n")[0]
    run = set(re.findall(r"benchmarks/(\w+\.py)", recipe))
    scripts = {p.name for p in BENCHMARKS.glob("*.py")} - {"_harness.py", "models.py"}
    assert scripts - run == set()
    assert recipe.rstrip().endswith("benchmarks/targets.py")  # the side-by-side summary last
