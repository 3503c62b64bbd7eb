"""The repository's package.json must not turn every .js file below it into an ES module:
JupyterLab started from the repo runs CommonJS tools from an in-repo .venv (yarn.js of
jupyter_builder), which then failed with "Dynamic require of 'util' is not supported"."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_a_commonjs_script_inside_the_repository_runs_under_node():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".node-probe-") as folder:
        probe = Path(folder) / "lib" / "probe.js"  # as .venv/lib/.../yarn.js would be
        probe.parent.mkdir()
        probe.write_text("const util = require('util');\nconsole.log(typeof util.format);\n")
        done = subprocess.run(
            ["node", str(probe)], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "function"


def test_the_build_config_stays_in_mjs_files():
    package = json.loads((ROOT / "package.json").read_text())
    assert "type" not in package
    assert package["scripts"]["build"] == "node js/build.mjs"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_js_unit_tests_pass_under_node():
    package = json.loads((ROOT / "package.json").read_text())
    assert package["scripts"]["test"] == "node --test js/test/"
    done = subprocess.run(
        ["node", "--test", "js/test/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout
    assert "# pass 0" not in done.stdout  # the tests were found and ran
