"""How much slower fxviz runs a graph than torch.fx does.

On the same inputs, interleaved (A B C D E A B C D E ...) so that a noisy, shared
machine slows every variant alike, it times:

    gm(x)                        the GraphModule's own forward
    Interpreter                  torch.fx.Interpreter(gm).run(x)
    record, stats off            fxviz.record(gm, x, stats=False)
    record                       fxviz.record(gm, x)
    Debugger, stats off          fxviz.Debugger(gm, x, stats=False).step(len(gm.graph.nodes))
    Debugger to the end          fxviz.Debugger(gm, x).step(len(gm.graph.nodes))

for a 12-layer GPT-style decoder and a 200-block MLP, as users run them (eval mode,
default grad mode), and prints medians, ratios and the targets they are held to.

Run from the repository root:

    .venv/bin/python benchmarks/record_overhead.py [--repeats N] [--model gpt|mlp|all] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.fx

import fxviz

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models

# Targets: (variant, largest ratio to the Interpreter); stepping: extra microseconds a node.
RATIO_TARGETS = (("record, stats off", 1.15), ("record", 2.0))
STEP_TARGET_US = 50.0


def variants(gm: torch.fx.GraphModule, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    """What is timed, by name; each call runs the whole graph once."""
    n_nodes = len(gm.graph.nodes)

    def debugger(stats: bool) -> Callable[[], object]:
        def step_to_the_end() -> object:
            dbg = fxviz.Debugger(gm, x, stats=stats)
            dbg.step(n_nodes)
            assert dbg.done
            return dbg

        return step_to_the_end

    return {
        "gm(x)": lambda: gm(x),
        "Interpreter": lambda: torch.fx.Interpreter(gm).run(x),
        "record, stats off": lambda: fxviz.record(gm, x, stats=False),
        "record": lambda: fxviz.record(gm, x),
        "Debugger, stats off": debugger(stats=False),
        "Debugger to the end": debugger(stats=True),
    }


def time_interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeats`` rounds, interleaved, after a warm-up."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()  # start each run with the same heap, outside the timing
            start = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - start)
            del result
    return times


def check_output(gm: torch.fx.GraphModule, x: torch.Tensor) -> None:
    """Fail loudly unless fxviz.record reproduces gm(x) exactly."""
    recorded, expected = fxviz.record(gm, x).output, gm(x)
    if not torch.equal(recorded, expected):
        diff = (recorded - expected).abs().max().item()
        raise SystemExit(f"fxviz.record(gm, x).output differs from gm(x) (max |diff| {diff})")


def report(name: str, gm: torch.fx.GraphModule, times: dict[str, list[float]]) -> bool:
    """Print the table and the targets; return whether every target is met."""
    n_nodes = len(gm.graph.nodes)
    med = {v: statistics.median(ts) for v, ts in times.items()}
    interp, plain = med["Interpreter"], med["gm(x)"]
    print(f"\n{name}: {n_nodes} nodes, {len(times['gm(x)'])} runs each (medians)")
    print(f"  {'variant':<21}{'median ms':>10}{'min ms':>9}{'x Interp':>10}{'x gm(x)':>9}")
    for v, m in med.items():
        low = min(times[v])
        print(f"  {v:<21}{m * 1e3:>10.2f}{low * 1e3:>9.2f}{m / interp:>10.2f}{m / plain:>9.2f}")
    # Stepping is held to its own cost: statistics are held to the "record" target.
    step_us = (med["Debugger, stats off"] - interp) / n_nodes * 1e6
    own_us = (med["Debugger to the end"] - med["record"]) / n_nodes * 1e6
    print(f"  stepping (Debugger, stats off) over Interpreter: {step_us:.1f} µs a node")
    print(f"  stepping with stats over record with stats:      {own_us:.1f} µs a node")

    print("  targets:")
    met = True
    for variant, limit in RATIO_TARGETS:
        ratio = med[variant] / interp
        met &= _target(variant, f"<= {limit:.2f}x Interp", f"{ratio:.2f}x", ratio <= limit)
    limit_us = f"<= {STEP_TARGET_US:.0f} µs/node"
    met &= _target("stepping", limit_us, f"{step_us:.1f} µs", step_us <= STEP_TARGET_US)
    return met


def _target(label: str, target: str, measured: str, ok: bool) -> bool:
    print(f"    {label:<19}{target:<17} measured {measured:>8}  {'met' if ok else 'NOT MET'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs of each variant")
    parser.add_argument("--model", choices=("gpt", "mlp", "all"), default="all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny models, 3 runs each (a smoke test)"
    )
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")

    torch.manual_seed(0)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, grad mode {torch.is_grad_enabled()}"
    )
    builders = {"gpt": ("GPT decoder", models.gpt), "mlp": ("MLP", models.mlp)}
    chosen = builders if args.model == "all" else {args.model: builders[args.model]}
    all_met = True
    for title, build in chosen.values():
        model, x = build(quick=args.quick)
        gm = torch.fx.symbolic_trace(model)
        check_output(gm, x)
        times = time_interleaved(variants(gm, x), repeats)
        all_met &= report(f"{title}, input {tuple(x.shape)}", gm, times)
    print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
