"""The facade: one table of public names, every one documented, and one way to do each
thing (old spellings kept working with an FxvizDeprecationWarning)."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest
import torch

import fxviz
import fxviz.errors
from fxviz import overlays
from fxviz._deprecated import DEPRECATED

ROOT = Path(__file__).resolve().parents[2]
FACADE = ROOT / "fxviz" / "__init__.py"


def _type_checking_imports() -> dict[str, str]:
    """``{name: module}`` imported under ``if TYPE_CHECKING:`` in the facade."""
    tree = ast.parse(FACADE.read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    names: dict[str, str] = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom), ast.dump(statement)
        for alias in statement.names:
            module = f"{statement.module}.{alias.name}" if alias.name == "overlays" else None
            names[alias.asname or alias.name] = module or str(statement.module)
    return names


def test_all_the_lazy_table_and_the_type_checking_imports_agree():
    lazy = dict(fxviz._LAZY)
    assert _type_checking_imports() == {**lazy, "overlays": "fxviz.overlays"}
    assert fxviz.__all__ == sorted(fxviz.__all__)
    assert len(set(fxviz.__all__)) == len(fxviz.__all__)
    assert set(fxviz.__all__) == {*lazy, *fxviz._SUBMODULES, "__version__"}
    assert not set(DEPRECATED) & set(fxviz.__all__)
    assert set(fxviz.errors.__all__) - set(fxviz.__all__) == {
        "first_line",
        "node_error_type",
        "warn_deprecated",
    }


def test_every_public_name_loads_from_its_module_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in fxviz.__all__:
            value = getattr(fxviz, name)
            module = fxviz._LAZY.get(name)
            if module is not None:
                assert value is getattr(__import__(module, fromlist=[name]), name)
    assert set(fxviz.__all__) <= set(dir(fxviz))


def _documented() -> set[str]:
    """Public names the API reference renders: ``::: fxviz.X`` entries, and the members
    of the modules it renders whole (``fxviz.errors``, ``fxviz.overlays``)."""
    entries = set()
    for page in (ROOT / "docs").rglob("*.md"):
        entries |= set(re.findall(r"^::: fxviz\.(\S+)$", page.read_text(), flags=re.M))
    names = {e for e in entries if "." not in e}
    if "errors" in names:
        names |= set(fxviz.errors.__all__)
    return names


def test_every_public_name_is_in_the_api_reference():
    missing = set(fxviz.__all__) - _documented() - {"__version__"}
    assert not missing, f"add `::: fxviz.NAME` to a page under docs/api/ for {sorted(missing)}"
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        assert f"api/{page.name}" in nav


def test_the_api_reference_shows_no_deprecated_or_unknown_name():
    for name in _documented() & set(DEPRECATED):
        pytest.fail(f"docs/ still show fxviz.{name}, a deprecated name")
    for name in _documented() - set(fxviz.errors.__all__):
        assert name in fxviz.__all__ or hasattr(fxviz, name), name


def _nan_recording() -> fxviz.Recording:
    return fxviz.record(lambda x: torch.log(x) * 2, torch.tensor([1.0, -1.0]))


def _nan_grad_recording() -> fxviz.Recording:
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    return fxviz.record(lambda x: x.sqrt().sum(), x, backward=True)  # sqrt'(0) = inf


def test_nonfinite_has_one_name_per_meaning():
    rec = _nan_recording()
    assert fxviz.has_nonfinite(rec["log"]) is True  # the predicate
    assert fxviz.has_nonfinite(rec["x"]) is False
    assert rec["log"].nonfinite_count == rec["log"].outputs[0].nonfinite_count == 1  # counts
    assert rec.first_nonfinite().name == "log"  # the first one in a run
    assert "⚠ NaN 1" in fxviz.to_dot(rec, overlay=overlays.highlight_nonfinite()).source
    grads = _nan_grad_recording()
    assert grads.first_nonfinite(grad=True) is not None
    dot = fxviz.to_dot(grads, overlay=overlays.highlight_nonfinite_grads()).source
    assert "∇ ⚠ +Inf 1" in dot
    dbg = fxviz.Debugger(lambda x: torch.log(x) * 2, torch.tensor([1.0, -1.0]))
    dbg.break_when(fxviz.has_nonfinite)
    assert dbg.continue_().name == "log"
    assert dbg.stop_reason == "has_nonfinite"


def _drawn(rec: fxviz.Recording, name: str) -> fxviz.render.DrawNode:
    return next(n for n in fxviz.render.draw(rec).nodes if n.name == name)


def test_every_built_in_overlay_is_made_by_calling_it():
    rec = fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3), backward=True)
    report = fxviz.shapes(torch.nn.Linear(3, 2), torch.ones(1, 3))
    dbg = fxviz.Debugger(torch.nn.Linear(3, 2), torch.ones(1, 3))
    dbg.continue_()
    made = {
        "bytes_heat": overlays.bytes_heat(rec),
        "debugger_state": overlays.debugger_state(dbg.node_states()),
        "flops_heat": overlays.flops_heat(report),
        "grad_norm_heat": overlays.grad_norm_heat(rec),
        "grad_ratio": overlays.grad_ratio(vanishing=1e-3, exploding=1e3),
        "highlight_errors": overlays.highlight_errors(),
        "highlight_nonfinite": overlays.highlight_nonfinite(),
        "highlight_nonfinite_grads": overlays.highlight_nonfinite_grads(),
        "time_heat": overlays.time_heat(rec),
    }
    assert set(made) == set(overlays.__all__) - {"Style", "Overlay", "STATE_STYLES"}
    node = _drawn(rec, "linear")
    for name, overlay in made.items():
        style = overlay(node)
        assert style is None or isinstance(style, overlays.Style), name
        assert overlay.__name__ == name
    assert made["grad_norm_heat"](node).tooltip == "gradient norm: 1.414"
    assert "heat-flops-9" in made["flops_heat"](_drawn(rec, "linear")).classes
    # what a heat overlay reads: a recording, a shape report, a debugger or the records
    for source in (rec, report, dbg, rec.values()):
        assert overlays.bytes_heat(source)(node).tooltip == "output bytes: 8"


def test_an_overlay_maker_passed_without_calling_it_says_how():
    rec = _nan_recording()
    with pytest.warns(
        fxviz.FxvizDeprecationWarning, match=r"highlight_nonfinite\(\) \(call it\)"
    ) as caught:
        source = fxviz.to_dot(rec, overlay=overlays.highlight_nonfinite).source
    assert "⚠ NaN 1" in source
    assert {w.filename for w in caught} == {__file__}  # the user's line, not fxviz's
    with pytest.raises(fxviz.InputError, match=r"pass overlay=time_heat\(rec\)"):
        overlays.time_heat(_drawn(rec, "log"))


OLD_NAMES = sorted(DEPRECATED)


@pytest.mark.parametrize("name", OLD_NAMES)
def test_each_old_facade_name_warns_and_names_its_successor(name):
    new = DEPRECATED[name][0]
    with pytest.warns(
        fxviz.FxvizDeprecationWarning, match=re.escape(f"use {new} instead")
    ) as caught:
        value = getattr(fxviz, name)
    assert value is not None
    assert [w.filename for w in caught] == [__file__]  # points at the caller's line


def test_old_names_still_work():
    rec, grads = _nan_recording(), _nan_grad_recording()
    with pytest.warns(fxviz.FxvizDeprecationWarning):
        assert fxviz.nonfinite(rec["log"]) is True
    with pytest.warns(fxviz.FxvizDeprecationWarning):
        assert fxviz.Style is overlays.Style
    with pytest.warns(fxviz.FxvizDeprecationWarning):
        assert "heat-time-" in fxviz.to_dot(rec, overlay=fxviz.time_heat(rec.values())).source
    with pytest.warns(fxviz.FxvizDeprecationWarning):
        assert "∇ ⚠ +Inf 1" in fxviz.to_dot(grads, overlay=fxviz.nonfinite_grads).source
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="fxviz.render.nonfinite_grads"):
        assert "∇ ⚠ +Inf 1" in fxviz.to_dot(grads, overlay=fxviz.render.nonfinite_grads).source
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="fxviz.render.grad_ratio"):
        assert fxviz.render.grad_ratio is overlays.grad_ratio
    gm = fxviz.trace(lambda x: x + 1, torch.ones(2))
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="RecordingMixin"):
        interp = fxviz.RecordingInterpreter(gm, garbage_collect_values=False)
    interp.run(torch.ones(2))
    assert interp.recording["add"].outputs[0].max == 2.0
    with pytest.warns(fxviz.FxvizDeprecationWarning, match="interpreter=cls"):
        cls = fxviz.recording_class(torch.fx.Interpreter)
    assert issubclass(cls, fxviz.RecordingMixin)


class _Double(torch.fx.Interpreter):
    def call_function(self, target, args, kwargs):
        return super().call_function(target, args, kwargs) * 2


def test_one_way_to_record_your_interpreter_and_one_to_compose_it():
    gm = fxviz.trace(lambda x: x + 1, torch.ones(2))
    used = fxviz.record(gm, torch.ones(2), interpreter=_Double)

    class RecordingDouble(fxviz.RecordingMixin, _Double):
        pass

    interp = RecordingDouble(gm)
    out = interp.run(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 4.0))
    assert torch.equal(used.output, out)
    assert used["add"].outputs[0].max == interp.recording["add"].outputs[0].max == 4.0


def test_save_is_beside_load(tmp_path):
    rec = _nan_recording()
    path = fxviz.save(rec, tmp_path / "run.fxrec")
    loaded = fxviz.load(path)
    assert list(loaded) == list(rec)
    assert loaded["log"].nonfinite_count == 1
    torch.testing.assert_close(loaded["mul"].value, rec["mul"].value, equal_nan=True)
    assert fxviz.load(rec.save(tmp_path / "again.fxrec"))["log"].shape == (2,)
    with pytest.raises(fxviz.InputError, match=r"not a Linear: record it first"):
        fxviz.save(torch.nn.Linear(2, 2), tmp_path / "model.fxrec")
    assert not (tmp_path / "model.fxrec").exists()


def test_gradients_iterate_in_the_order_len_counts():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    grads = fxviz.record(model, torch.ones(2, 4), backward=True).gradients
    assert grads is not None
    listed = list(grads)
    assert len(listed) == len(grads) == len(grads.order) > 0
    assert listed == grads.order
    assert [g.order for g in grads] == sorted(g.order for g in grads)
    assert grads[0] is grads.order[0]
    assert grads[-1] is grads.order[-1]
    assert list(reversed(grads)) == grads.order[::-1]
    assert grads.order[1] in grads
    assert grads.parameters["0.weight"] in grads
    assert grads.of("_1")[0] in grads
    with pytest.raises(TypeError, match=r"\.of\('_1'\)"):
        grads["_1"]  # type: ignore[call-overload]
