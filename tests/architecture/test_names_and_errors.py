"""Names, errors and degradation: public overlays, deprecated names that keep working,
every exception in fxviz.errors, and failures that leave the rest of a view standing."""

from __future__ import annotations

import inspect
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import fxviz
import fxviz.errors
from fxviz import overlays
from fxviz._static import widget_esm

ROOT = Path(__file__).resolve().parents[2]


def _nan_recording() -> fxviz.Recording:
    return fxviz.record(lambda x: torch.log(x) * 2, torch.tensor([1.0, -1.0]))


def test_every_exception_lives_in_errors_and_is_listed():
    defined = {
        name
        for name, obj in vars(fxviz.errors).items()
        if isinstance(obj, type) and issubclass(obj, BaseException | Warning)
    }
    assert defined <= set(fxviz.errors.__all__)
    assert {"ShapeError", "SpecError", "RenderError", "TargetError"} <= defined
    for name in defined:
        assert getattr(fxviz, name) is getattr(fxviz.errors, name)
        assert name in fxviz.__all__


def test_old_import_locations_still_give_the_same_classes():
    from fxviz._shapes import ShapeError, SpecError
    from fxviz._targets import TargetError
    from fxviz.render import RenderError

    assert ShapeError is fxviz.ShapeError
    assert SpecError is fxviz.SpecError
    assert TargetError is fxviz.errors.TargetError
    assert RenderError is fxviz.RenderError


def test_overlays_are_public_and_do_not_import_torch():
    code = "import sys, fxviz.overlays as o; o.Style(); print('torch' in sys.modules)"
    out = subprocess.run(
        [__import__("sys").executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert out.strip() == "False"
    assert fxviz.overlays is overlays


def test_deprecated_names_warn_and_still_work():
    rec = _nan_recording()
    with pytest.warns(fxviz.FxvizDeprecationWarning, match=r"overlays.highlight_nonfinite\(\)"):
        old = fxviz.nonfinite_values
    assert "⚠ NaN 1" in fxviz.to_dot(rec, overlay=old).source
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="highlight_errors"):
        assert fxviz.render.errors(_drawn(rec, "log")) is None
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="nonfinite_count"):
        assert rec["log"].nonfinite == rec["log"].nonfinite_count == 1
    report = fxviz.shapes(torch.nn.Linear(4, 2), fxviz.spec(3, 4), mode="meta")
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="totals"):
        assert report.summary()["parameters"] == report.totals()["parameters"] == 10
    assert issubclass(fxviz.FxvizDeprecationWarning, DeprecationWarning)


def _drawn(rec: fxviz.Recording, name: str) -> fxviz.render.DrawNode:
    return next(n for n in fxviz.render.draw(rec).nodes if n.name == name)


def test_summary_is_one_line_of_text_everywhere(two_layer_net, x20):
    rec = fxviz.record(two_layer_net, x20)
    texts = [
        rec.summary(),
        fxviz.shapes(two_layer_net, x20).summary(),
        fxviz.diff(fxviz.trace(two_layer_net), fxviz.trace(two_layer_net)).summary(),
    ]
    assert all(isinstance(t, str) and "\n" not in t and t for t in texts)


def test_same_defaults_and_parameter_names_across_entry_points():
    entry_points = [fxviz.record, fxviz.shapes, fxviz.Debugger, fxviz.debug]
    first = [next(iter(inspect.signature(f).parameters)) for f in entry_points]
    assert first == ["gm_or_module"] * 4
    progress = {inspect.signature(f).parameters["progress"].default for f in entry_points[:2]}
    assert progress == {None}


def test_a_failing_overlay_is_left_out_with_a_warning_not_a_blank_graph():
    rec = _nan_recording()
    calls = []

    def broken(node):
        calls.append(node.name)
        raise ValueError("my overlay has a bug")

    with pytest.warns(fxviz.FxvizWarning, match=r"overlay 'broken' failed on node 'x'.*my overlay"):
        source = fxviz.to_dot(rec, overlay=[broken, overlays.time_heat(rec.values())]).source
    assert calls == ["x"]  # left out after its first failure
    assert "⚠ NaN 1" in source
    assert "heat-time-" in source
    for name in ("x", "log", "mul", "output"):
        assert f"\t{name} [" in source


def test_an_overlay_returning_the_wrong_type_is_left_out():
    with pytest.warns(fxviz.FxvizWarning, match="returned str, not fxviz.overlays.Style"):
        source = fxviz.to_dot(_nan_recording(), overlay=lambda node: "red").source
    assert "\tlog [" in source


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the module")
def test_a_missing_bundle_shows_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr("fxviz._static.STATIC", tmp_path / "static")
    module = widget_esm()
    assert isinstance(module, str)
    (tmp_path / "missing.mjs").write_text(module)
    script = (
        "const el = { kids: [], append(x) { this.kids.push(x); } };"
        "globalThis.document = { createElement: () => ({ style: {} }) };"
        f"const m = await import({json.dumps((tmp_path / 'missing.mjs').as_uri())});"
        "m.default.render({ el }); console.log(el.kids[0].textContent);"
    )
    shown = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    ).stdout
    assert "front end is not built" in shown
    assert "npm ci && npm run build" in shown
    with pytest.raises(fxviz.FxvizError, match="npm ci && npm run build"):
        fxviz._static.static_file("report.js")


def test_the_wheel_build_requires_both_bundles():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hook = config["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    assert {"fxviz/static/widget.js", "fxviz/static/report.js"} <= set(hook["ensured-targets"])


def test_one_progress_bar_for_record_and_shapes(capsys, two_layer_net, x20):
    fxviz.record(two_layer_net, x20, progress=True)
    fxviz.shapes(two_layer_net, x20, progress=True)
    fxviz.record(two_layer_net, x20, progress=False)
    err = capsys.readouterr().err
    # advanced once a node, by the recording interpreter, to the graph's 5 nodes
    assert re.search(r"fxviz record: 100%.*5/5", err)
    assert re.search(r"fxviz shapes: 100%.*5/5", err)
    assert err.count("fxviz record:   0%") == 1  # progress=False: no bar
