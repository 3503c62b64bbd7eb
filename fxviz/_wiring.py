"""The top layer wires what lower layers call by name (:mod:`fxviz._providers`).

The facade calls :func:`wire` on ``import fxviz``; each implementation is imported only
when first called, so ``import fxviz`` stays light.
"""

from __future__ import annotations

from typing import Any

from fxviz._providers import provide

__all__ = ["wire"]


def _recording_flops(recording: Any) -> dict[str, int]:
    from fxviz._shapes._flops import recording_flops

    return recording_flops(recording)


def _save(recording: Any, path: Any, **options: Any) -> Any:
    from fxviz._saved import save

    return save(recording, path, **options)


def _report(obj: Any, path: Any = None, **options: Any) -> Any:
    from fxviz._report import report

    return report(obj, path, **options)


def _joint_to_dot(joint: Any, recording: Any, selected: Any, side: str, **options: Any) -> Any:
    from fxviz.render._joint_draw import joint_dot

    return joint_dot(joint, recording, selected, side, **options)


def _joint_run(joint: Any, *inputs: Any, **options: Any) -> Any:
    from fxviz._record._joint import run_joint

    return run_joint(joint, *inputs, **options)


def _joint_backward_inputs(joint: Any, *inputs: Any, **options: Any) -> Any:
    from fxviz._record._joint import joint_backward_inputs

    return joint_backward_inputs(joint, *inputs, **options)


def _joint_record(joint: Any, *inputs: Any, **options: Any) -> Any:
    from fxviz._record import record

    return record(joint, *inputs, **options)


def _joint_debugger(joint: Any, *inputs: Any, **options: Any) -> Any:
    from fxviz._record import Debugger

    return Debugger(joint, *inputs, **options)


def _joint_tangents(joint: Any, outputs: Any, backward: Any) -> Any:
    from fxviz._record._joint import tangents_for

    return tangents_for(joint, outputs, backward)


def wire() -> None:
    """Register every late-bound implementation (idempotent)."""
    provide("recording.flops", _recording_flops)
    provide("recording.save", _save)
    provide("report", _report)
    provide("joint.to_dot", _joint_to_dot)
    provide("joint.run", _joint_run)
    provide("joint.backward_inputs", _joint_backward_inputs)
    provide("joint.record", _joint_record)
    provide("joint.debugger", _joint_debugger)
    provide("joint.tangents", _joint_tangents)
