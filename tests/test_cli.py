"""The fxviz command line, called as users call it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fxviz.cli import main


def test_demo_prints_the_recorded_table_and_writes_a_report(capsys, tmp_path):
    page = tmp_path / "demo.html"
    assert main(["demo", "-o", str(page)]) == 0
    out = capsys.readouterr().out
    assert f"report:    {page}" in out
    assert page.read_text().startswith("<!doctype html>")
    for name in ("x", "linear1", "clamp", "linear2", "output"):
        assert f"\n{name} " in out
    assert "(64, 100)" in out
    assert "stopped at 'linear2' (breakpoint)" in out
    assert "Next:" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_console_script_runs():
    done = subprocess.run(
        [sys.executable, "-m", "fxviz.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "visual debugger" in done.stdout


def test_shapes_prints_the_two_layer_net_table(capsys):
    assert main(["shapes", "fxviz.examples:TwoLayerNet", "--input", "randn(64,1000)"]) == 0
    out = capsys.readouterr().out
    assert "linear1  call_module" in out
    assert "64×100" in out
    assert "peak live" in out


@pytest.mark.parametrize("mode", ["fake", "meta"])
def test_shapes_modes_and_formats(capsys, mode):
    args = ["shapes", "fxviz.examples:TwoLayerNet", "-i", "randn(2,1000)", "--mode", mode]
    assert main([*args, "--format", "csv"]) == 0
    assert "linear2,call_module,linear2,linear2,2×10,float32" in capsys.readouterr().out
    assert main([*args, "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| name")
    assert main([*args, "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!doctype html>")
    assert "fxviz shapes fxviz.examples:TwoLayerNet" in page


def test_shapes_from_a_file_with_a_factory(tmp_path, capsys):
    model_file = tmp_path / "my_model.py"
    model_file.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 3))\n"
    )
    target = f"{model_file}:build"
    assert main(["shapes", target, "-i", "randint(0,100,(2,5))", "--mode", "fake"]) == 0
    assert "2×5×3" in capsys.readouterr().out


def test_shapes_errors_are_one_clear_line_with_exit_codes(capsys):
    assert main(["shapes", "fxviz.examples:TwoLayerNet", "-i", "randn(2,999)"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fxviz: error: node 'linear1' (call_module linear1")
    assert "x: float32[2, 999]" in err
    assert main(["shapes", "fxviz.examples:TwoLayerNet", "-i", "__import__('os')"]) == 2
    assert "unknown function '__import__'" in capsys.readouterr().err
    assert main(["shapes", "fxviz.examples:Missing", "-i", "randn(2)"]) == 2
    assert "has no attribute 'Missing'" in capsys.readouterr().err
    assert main(["shapes", "no/such/file.py:Model", "-i", "randn(2)"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["shapes", "fxviz.examples:TwoLayerNet", "-i", "randn(2,1000)", "--device", "cuda"])
    assert info.value.code == 2


def test_report_writes_a_replay_and_keeps_partial_runs(tmp_path, capsys):
    page = tmp_path / "run.html"
    args = ["report", "fxviz.examples:TwoLayerNet", "-i", "randn(4,1000)", "-o", str(page)]
    assert main(args) == 0
    assert "open it in any browser" in capsys.readouterr().out
    text = page.read_text()
    assert '"replay":{"order":' in text
    assert "fxviz report fxviz.examples:TwoLayerNet" in text
    failed = tmp_path / "failed.html"
    args = ["report", "fxviz.examples:TwoLayerNet", "-i", "randn(4,999)", "-o", str(failed)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "everything recorded before the failure" in err
    assert "failed at linear1" in failed.read_text()
    meta = tmp_path / "meta.html"
    args = [
        "report",
        "fxviz.examples:TwoLayerNet",
        "-i",
        "randn(4,1000)",
        "--mode",
        "meta",
        "-o",
        str(meta),
    ]
    assert main(args) == 0
    assert '"replay":{' not in meta.read_text()  # shapes only: no run to replay
