"""Everything ``fxviz.trace`` returns is accepted by every verb, or refused with one line
that says what to do instead: each cell of verb x object, checked."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import fxviz

X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])

OBJECTS = (
    "symbolic",
    "export",
    "dynamo",
    "real",
    "joint",
    "exported_program",
    "recording",
    "loaded",
    "debugger",
)

# verb -> what it makes of each object: a type name (works), or a refusal (the message's
# start). Objects left out of a verb's row work and give the verb's usual type.
RECORDING_REFUSED = "a Recording is a finished run: pass rec.graph_module"
LOADED_REFUSED = "a loaded recording holds no model to run"
JOINT_REFUSED = "a JointGraph holds two graphs: pass joint.forward or joint.backward"
COMPARE_REFUSED = "compare() takes two recordings"

VERBS: dict[str, tuple[Any, str, dict[str, str]]] = {
    "record": (
        lambda o: fxviz.record(o, X),
        "Recording",
        {"joint": "JointRecording", "recording": RECORDING_REFUSED, "loaded": LOADED_REFUSED},
    ),
    "Debugger": (
        lambda o: fxviz.Debugger(o, X),
        "Debugger",
        {"recording": RECORDING_REFUSED, "loaded": LOADED_REFUSED},
    ),
    "shapes": (
        lambda o: fxviz.shapes(o, X),
        "ShapeReport",
        {"joint": "JointRecording", "recording": RECORDING_REFUSED, "loaded": LOADED_REFUSED},
    ),
    "to_dot": (lambda o: fxviz.to_dot(o), "Digraph", {}),
    "show": (lambda o: fxviz.show(o), "GraphView", {"debugger": "DebuggerApp"}),
    "debug": (
        lambda o: fxviz.debug(o, X),
        "DebuggerApp",
        {"recording": RECORDING_REFUSED, "loaded": LOADED_REFUSED},
    ),
    "report": (lambda o: fxviz.report(o), "str", {}),
    "diff": (
        lambda o: fxviz.diff(o, o),
        "GraphDiff",
        {"joint": JOINT_REFUSED, "recording": RECORDING_REFUSED, "loaded": LOADED_REFUSED},
    ),
    "compare": (
        lambda o: fxviz.compare(o, o),
        "Comparison",
        {o: COMPARE_REFUSED for o in OBJECTS if o not in ("recording", "loaded")},
    ),
}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    recording = fxviz.record(model, X)
    path = tmp_path_factory.mktemp("verbs") / "run.fxrec"
    recording.save(path)
    return {
        "symbolic": fxviz.trace(model, method="symbolic"),
        "export": fxviz.trace(model, X, method="export"),
        "dynamo": fxviz.trace(model, X, method="dynamo"),
        "real": fxviz.trace(model, X, method="real"),
        "joint": fxviz.trace(model, X, method="joint"),
        "exported_program": torch.export.export(model, (X,)),
        "recording": recording,
        "loaded": fxviz.load(path),
        "debugger": fxviz.Debugger(model, X),
    }


@pytest.mark.parametrize("name", OBJECTS)
@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_takes_every_object_or_says_what_to_do(objects, verb, name):
    call, usual, special = VERBS[verb]
    expected = special.get(name, usual)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fxviz.FxvizWarning)  # no degraded drawing either
        if expected[0].isupper() or expected == "str":
            result = call(objects[name])
            assert type(result).__name__ == expected
            return
        with pytest.raises(fxviz.InputError) as refused:
            call(objects[name])
    message = str(refused.value)
    assert message.startswith(expected)
    assert "\n" not in message  # one line


def test_what_trace_returns_is_what_the_matrix_covers(objects):
    assert isinstance(objects["dynamo"], fxviz.Capture)
    assert isinstance(objects["real"], fxviz.Capture)
    assert isinstance(objects["joint"], fxviz.JointGraph)
    assert type(objects["loaded"]).__name__ == "LoadedRecording"


def test_a_joint_graph_records_and_steps_like_its_methods(objects):
    joint = objects["joint"]
    jrec = fxviz.record(joint, X)
    same = joint.record(X)
    assert sorted(jrec.grads) == sorted(same.grads) == ["0.bias", "0.weight"]
    for name, grad in jrec.grads.items():
        torch.testing.assert_close(grad, same.grads[name])
    dbg = fxviz.Debugger(joint, X)
    assert dbg.graph_module is joint.backward
    dbg.continue_()
    old_way = joint.debugger(X)
    old_way.continue_()
    ran = joint.run(X).grads
    for stepped in (dbg, old_way):
        grads = joint._grads(stepped.output)
        assert sorted(grads) == sorted(ran)
        for name, grad in grads.items():
            torch.testing.assert_close(grad, ran[name])


def test_shapes_of_a_joint_graph_are_those_of_a_real_run(objects):
    joint = objects["joint"]
    fake = fxviz.shapes(joint, X, mode="fake")
    real = joint.record(X)
    for side in ("forward", "backward"):
        for name, record in getattr(real, side).items():
            assert getattr(fake, side)[name].shape == record.shape, (side, name)


def test_a_debugger_given_to_a_verb_is_its_graph(objects):
    dbg = objects["debugger"]
    rec = fxviz.record(dbg, X)
    assert rec.graph_module is dbg.graph_module
    assert fxviz.shapes(dbg, X)["_0"].shape == (2, 2)
