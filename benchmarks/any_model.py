"""What recording a model one graph cannot hold costs: capture + record, against forward.

For each case (the models of tests/test_any_model.py: a data-dependent ``if``, a
detection loop, a ``torch.jit.fork``, tiny Hugging Face GPT-2/BERT/T5/Llama with their
default configs and keyword inputs) it prints the method ``auto`` chose, whether
``rec.output`` equals the eager output exactly, and medians of:

    forward      model(*args, **kwargs)
    capture      fxviz.trace(model, *args, **kwargs)   (Dynamo compiles: one-off)
    record       fxviz.record(capture, *args, **kwargs) (the capture run node by node)

with the ratios capture ÷ forward and record ÷ forward. No time is held to a target:
the capture cost is Dynamo's compile, paid once a model.

Run from the repository root:

    .venv/bin/python benchmarks/any_model.py [--repeats N] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, model: Any, args: tuple, kwargs: dict, repeats: int) -> str:
    """One row: the method auto chose, exactness, and the medians."""
    import torch

    import fxviz
    from fxviz._capture import tensors_in

    with torch.no_grad():
        want = model(*args, **kwargs)
        forward = median_seconds(lambda: model(*args, **kwargs), max(repeats, 5))
        made: dict[str, Any] = {}
        captured = median_seconds(
            lambda: made.update(gm=fxviz.trace(model, *args, **kwargs)), repeats
        )
        gm = made["gm"]
        recorded = median_seconds(
            lambda: made.update(rec=fxviz.record(gm, *args, **kwargs)), repeats
        )
    output = made["rec"].output
    got, expected = tensors_in(output), tensors_in(want)
    exact = type(output) is type(want) and all(
        torch.equal(a, b) for a, b in zip(got, expected, strict=True)
    )
    return (
        f"{name:28} {gm.meta.get('fxviz_method', '?'):8} {'yes' if exact else 'NO':6} "
        f"{forward * 1e3:8.2f}ms {captured:8.2f}s {recorded * 1e3:7.1f}ms "
        f"{captured / forward:11.0f}x {recorded / forward:10.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="three small cases, one repeat")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from tests.any_model.models import Detector, Forked, ValueIf, hugging_face

    def cases() -> Any:
        torch.manual_seed(0)
        yield "value if", ValueIf(), (torch.randn(2, 4),), {}
        torch.manual_seed(2)  # five boxes pass the score
        yield "detector (5 boxes)", Detector(), (torch.randn(6, 8),), {}
        yield "fork + script", Forked(), (torch.randn(2, 4),), {}
        if options.quick:
            return
        for kind in ("gpt2", "bert", "t5", "llama"):
            model, kwargs = hugging_face(kind)
            extra = ", cache" if kind != "bert" else ""
            yield f"HF {kind} (kwargs{extra})", model, (), kwargs

    repeats = 1 if options.quick else options.repeats
    header = f"{'case':28} {'method':8} {'exact':6} {'forward':>10} {'capture':>9} "
    header += f"{'record':>9} {'capture/fwd':>12} {'record/fwd':>11}"
    print(header)
    for name, model, args, kwargs in cases():
        print(measure(name, model, args, kwargs, repeats))
    print("targets: none (capture is a one-off compile; record/fwd is the stepping cost)")


if __name__ == "__main__":
    main()
