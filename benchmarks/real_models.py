"""Recording a Hugging Face model the second time: ``fxviz.record(model, **inputs)`` again,
which re-uses its capture (capture once), against the model's own forward.

For each zoo model it prints the medians of, interleaved (forward, record, forward, ...,
after one untimed call of each, which also makes the capture):

    forward      model(*args, **kwargs)
    record       fxviz.record(model, *args, **kwargs)  (the capture re-used, the run recorded)

and the ratio record ÷ forward. Target: at most 1.5x for a Hugging Face model (llama).

Run from the repository root:

    .venv/bin/python benchmarks/real_models.py [--repeats N] [--quick] [--models a,b]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from _harness import add_threads_option, set_threads, target, time_interleaved  # noqa: E402

import fxviz  # noqa: E402
from tests.conformance.zoo import build  # noqa: E402

TARGET_MODEL = "llama"
LIMIT = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="llama only, three repeats")
    parser.add_argument("--models", default="llama,gpt2,mistral,vit,bert,t5")
    add_threads_option(parser, default=1)
    options = parser.parse_args()
    set_threads(options.threads)
    models = [TARGET_MODEL] if options.quick else options.models.split(",")
    repeats = 3 if options.quick else options.repeats
    print(f"{'model':12} {'method':8} {'forward':>10} {'record':>10} {'record/fwd':>11}")
    print(f"targets: {TARGET_MODEL} records the second time in <= {LIMIT}x its forward")
    ok = True
    for name in models:
        model, args, kwargs = build(name)
        with torch.no_grad():
            times = time_interleaved(
                {
                    "forward": functools.partial(model, *args, **kwargs),
                    "record": functools.partial(
                        fxviz.record, model, *args, progress=False, **kwargs
                    ),
                },
                repeats,
            )
            method = fxviz.record(model, *args, progress=False, **kwargs).method
        forward, record = (statistics.median(times[k]) for k in ("forward", "record"))
        ratio = record / forward
        print(f"{name:12} {method:8} {forward * 1e3:8.2f}ms {record * 1e3:8.2f}ms {ratio:10.2f}x")
        if name == TARGET_MODEL:
            ok = target(
                f"{name} record (2nd+)", f"<= {LIMIT:.2f}x forward", f"{ratio:.2f}x", ratio <= LIMIT
            )
    return 0 if ok or options.quick else 1


if __name__ == "__main__":
    sys.exit(main())
