"""The fxviz command line, called as users call it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

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


def test_no_command_is_a_usage_error_naming_the_commands(capsys):
    err = _fails(capsys, [], 2)
    assert "choose a COMMAND: demo, shapes, report or compare" in err


def test_unknown_command_is_a_usage_error(capsys):
    err = _fails(capsys, ["frobnicate"], 2)
    assert "invalid choice: 'frobnicate'" in err
    assert "hint: see 'fxviz --help'" in err


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
    first, hint = err.splitlines()  # one line, then the hint; the rest with --debug
    assert "2x999" in first
    assert hint.startswith("  hint: fix the shapes or dtypes")
    assert hint.endswith("(add --debug for the node's inputs and the Python traceback)")
    assert main(["--debug", "shapes", "fxviz.examples:TwoLayerNet", "-i", "randn(2,999)"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "x: float32[2, 999]" in err
    assert main(["shapes", "fxviz.examples:TwoLayerNet", "-i", "__import__('os')"]) == 2
    assert "unknown function '__import__'" in capsys.readouterr().err
    assert main(["shapes", "fxviz.examples:Missing", "-i", "randn(2)"]) == 2
    assert "has no attribute 'Missing'" in capsys.readouterr().err
    assert main(["shapes", "no/such/file.py:Model", "-i", "randn(2)"]) == 2
    assert "no such file" in capsys.readouterr().err
    args = ["shapes", "fxviz.examples:TwoLayerNet", "-i", "randn(2,1000)", "--device", "cuda"]
    assert "--device needs --mode fake" in _fails(capsys, args, 2)


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


# --- the error contract: one "fxviz: error:" line (+ indented lines, a hint), an exit
# code, never a traceback --------------------------------------------------------------

TWO_LAYER = "fxviz.examples:TwoLayerNet"


def _fails(capsys, args, code):
    """Run the CLI in-process; it must return ``code`` and print an error, no traceback."""
    assert main(args) == code
    err = capsys.readouterr().err
    assert err.startswith("fxviz: error: "), err
    assert "Traceback" not in err
    assert all(line.startswith("  ") for line in err.splitlines()[1:]), err
    return err


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "fxviz", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("randn(2,1000,device=evil)", "unknown device 'evil'"),
        ("randn(True,1000)", "'True' is not a number"),
        ("randint(5,1,(2,3))", "low < high, not 5, 1"),
        ("randint(0.5,3,(2,3))", "whole numbers"),
        ("full((2,1000),1e400)", "1e400 is too large for a float"),
        ("randn(99999999999999999999999,1000)", "overflow int64"),
        ("randn(3037000500,3037000500)", "overflow int64"),  # each fits, the product not
        ("randn(" + "-" * 100_000 + "1,1000)", "longer than 1000 characters"),
        ("randn(" + "-" * 901 + "2,1000)", "sizes must be non-negative"),  # no RecursionError
        ("randn(1000000,1000000)", "needs 4.0 TB but this machine has"),
        ("full((2,1000),300,dtype=int8)", "cannot make the input"),
    ],
)
def test_bad_input_specs_are_one_error_line_with_exit_2(capsys, tmp_path, spec, why):
    page = tmp_path / "r.html"
    err = _fails(capsys, ["report", TWO_LAYER, "-i", spec, "-o", str(page)], 2)
    assert why in err
    assert not page.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a PyTorch build without CUDA")
def test_cuda_input_on_a_cpu_build_says_to_use_fake_mode(capsys):
    err = _fails(capsys, ["shapes", TWO_LAYER, "-i", "randn(2,1000,device=cuda)"], 2)
    assert "cannot make the input randn(2,1000,dtype=float32) on cuda" in err
    assert "--mode fake --device cuda" in err
    assert (
        main(["shapes", TWO_LAYER, "-i", "randn(2,1000)", "--mode", "fake", "--device", "cuda"])
        == 0
    )
    assert "cuda:0" in capsys.readouterr().out


def test_an_unknown_fake_device_is_a_usage_error(capsys):
    args = ["shapes", TWO_LAYER, "-i", "randn(2,1000)", "--mode", "fake", "--device", "evil"]
    assert "unknown device 'evil'" in _fails(capsys, args, 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a PyTorch build without CUDA")
def test_fake_cuda_batchnorm_in_training_mode_says_to_call_eval(capsys, tmp_path):
    model_file = tmp_path / "bn.py"
    model_file.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8))\n"
        "def build_eval():\n"
        "    return build().eval()\n"
    )
    args = ["-i", "randn(2,4)", "--mode", "fake", "--device", "cuda"]
    err = _fails(capsys, ["shapes", f"{model_file}:build", *args], 1)
    assert "model.eval()" in err
    assert "fix the shapes or dtypes" not in err  # the shapes are fine: that hint misleads
    assert main(["shapes", f"{model_file}:build_eval", *args]) == 0  # what the hint says works
    assert "2×8" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("import torch\ndef build(:\n    pass\n", "line 2: invalid syntax"),
        ("raise RuntimeError('boom at import')\n", "raised RuntimeError: boom at import"),
        ("import no_such_module_fxviz\n", "No module named 'no_such_module_fxviz'"),
        ("import sys\nsys.exit(3)\n", "raised SystemExit: 3"),
    ],
)
def test_a_target_file_that_cannot_be_imported_is_one_error_line(capsys, tmp_path, source, why):
    model_file = tmp_path / "broken.py"
    model_file.write_text(source)
    err = _fails(capsys, ["shapes", f"{model_file}:build", "-i", "randn(2)"], 2)
    assert why in err
    assert "add --debug" in err


@pytest.mark.parametrize("where", ["missing-folder/out.html", "."])
def test_output_paths_are_checked_before_any_work(capsys, tmp_path, where):
    sentinel = tmp_path / "model-was-built"
    model_file = tmp_path / "model.py"
    model_file.write_text(
        textwrap.dedent(f"""
        import pathlib, torch
        def build():
            pathlib.Path({str(sentinel)!r}).write_text("built")
            return torch.nn.Linear(2, 2)
        """)
    )
    output = str(tmp_path / where)
    err = _fails(capsys, ["report", f"{model_file}:build", "-i", "randn(2,2)", "-o", output], 2)
    assert "folder" in err
    assert "hint: see 'fxviz report --help'" in err
    assert not sentinel.exists()


def test_debug_shows_the_traceback_and_the_same_exit_code(tmp_path):
    model_file = tmp_path / "boom.py"
    model_file.write_text("raise RuntimeError('boom at import')\n")
    for args in (["--debug", "shapes"], ["shapes", "--debug"]):
        done = _cli(*args, f"{model_file}:build", "-i", "randn(2)")
        assert done.returncode == 2
        assert "Traceback (most recent call last)" in done.stderr
        assert "RuntimeError: boom at import" in done.stderr
        assert done.stderr.rstrip().splitlines()[-1].startswith("fxviz: error: importing")
    done = _cli("shapes", f"{model_file}:build", "-i", "randn(2)")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_python_dash_m_fxviz_runs_the_cli(tmp_path):
    done = _cli("shapes", TWO_LAYER, "-i", "randn(2,1000)", "--mode", "meta", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "linear2" in done.stdout
    done = _cli("shapes", TWO_LAYER, "-i", "randn(2,999)", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("fxviz: error: node 'linear1'")
    assert "Traceback" not in done.stderr


_PROBE = """
import sys
from fxviz.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("torch imported" if "torch" in sys.modules else "torch not imported", code)
"""


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["report", "--help"], 0),
        ([], 2),
        (["frobnicate"], 2),
        (["shapes"], 2),  # TARGET missing
        (["shapes", TWO_LAYER, "--mode", "warp"], 2),
        (["shapes", TWO_LAYER, "-i", "randn(2,1000)", "--device", "cuda"], 2),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", "no/such/folder/r.html"], 2),
    ],
)
def test_help_and_usage_errors_do_not_import_torch(tmp_path, args, code):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.stdout.splitlines()[-1] == f"torch not imported {code}", done.stderr
    if code == 2:
        assert done.stderr.startswith("fxviz: error: ")


# --- every option has an effect or is refused; one table, so a new option gets a row ---

_SAVED = "SAVED"  # replaced by a saved recording's path
_EXISTING = "EXISTING"  # replaced by a file that exists
_LINK = "LINK"  # replaced by a symbolic link


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["report", _SAVED, "--input", "randn(2)"], "--input does not apply to a saved recording"),
        (["report", _SAVED, "--mode", "fake"], "--mode does not apply to a saved recording"),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", ""], "is not a file name"),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", " "], "is not a file name"),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", _EXISTING], "add --force"),
        (["demo", "-o", _EXISTING], "add --force"),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", _LINK], "symbolic link"),
        (["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", _LINK, "--force"], "symbolic link"),
        (["compare", _SAVED, _SAVED, "-o", _EXISTING], "add --force"),
        (["compare", _SAVED, _SAVED, "--rtol", "1e-3"], "--rtol applies to --metric allclose"),
        (["compare", _SAVED, _SAVED, "--atol", "1"], "--atol applies to --metric allclose"),
        (
            ["compare", _SAVED, _SAVED, "--metric", "cosine", "--sqnr-db", "20"],
            "--sqnr-db applies to --metric sqnr",
        ),
        (["shapes", TWO_LAYER, "-i", "randn(2,1000)", "--device", "cuda"], "needs --mode fake"),
        (["shapes", TWO_LAYER, "-i", "randn(2,1000)", "--force"], "unrecognized arguments"),
    ],
)
def test_an_option_without_effect_is_refused_in_one_line(capsys, tmp_path, args, why):
    saved = tmp_path / "run.fxrec"
    fxviz_record_saved(saved)
    existing = tmp_path / "existing.html"
    existing.write_text("keep me")
    link = tmp_path / "link.html"
    link.symlink_to(existing)
    names = {_SAVED: str(saved), _EXISTING: str(existing), _LINK: str(link)}
    err = _fails(capsys, [names.get(a, a) for a in args], 2)
    assert why in err
    assert existing.read_text() == "keep me"
    assert link.is_symlink()


def fxviz_record_saved(path):
    import fxviz
    from fxviz.examples import TwoLayerNet

    fxviz.record(TwoLayerNet(), torch.randn(2, 1000)).save(path)


def test_force_replaces_an_existing_output(capsys, tmp_path):
    page = tmp_path / "r.html"
    page.write_text("old")
    args = ["report", TWO_LAYER, "-i", "randn(2,1000)", "-o", str(page), "--force"]
    assert main(args) == 0
    assert page.read_text().startswith("<!doctype html>")
    saved = tmp_path / "run.fxrec"
    fxviz_record_saved(saved)
    assert main(["report", str(saved), "-o", str(page), "--force"]) == 0


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path):
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'fxviz', 'shapes', sys.argv[1], '-i',"
        " 'randn(2,1000)', '--mode', 'meta', '--format', 'csv'], stdout=subprocess.PIPE,"
        " stderr=subprocess.PIPE)\n"
        "p.stdout.close()\n"  # the reader is gone before the table is printed
        "err = p.stderr.read().decode()\n"
        "print(p.wait(), 'error' in err or 'Broken' in err, 'Traceback' in err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, TWO_LAYER], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "141 False False", done.stdout  # quiet (a progress bar may show)
