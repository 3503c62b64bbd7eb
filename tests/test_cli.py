"""The fxviz command line, called as users call it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fxviz.cli import main


def test_demo_prints_the_recorded_table_and_next_steps(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
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
