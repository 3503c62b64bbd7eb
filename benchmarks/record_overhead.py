"""How much slower fxviz runs a graph than torch.fx does.

On the same inputs, interleaved (A B C ... A B C ...) so that a noisy, shared machine slows
every variant alike, it times:

    gm(x)                        the GraphModule's own forward
    Interpreter                  torch.fx.Interpreter(gm).run(x)
    Interpreter, env kept        the same with garbage_collect_values=False (every value kept,
                                 as fxviz.record keeps them)
    record, stats off            fxviz.record(gm, x, stats=False)
    record                       fxviz.record(gm, x) (statistics taken when first read)
    record, stats read           the same, then every record's statistics read (what the
                                 lazy statistics cost once someone looks at all of them)
    record + table()             fxviz.record(gm, x).table(): what the notebook shows (every
                                 statistic and the FLOPs column, counted from the shapes)
    record, interpreted          fxviz.record(gm, x, interpreter=torch.fx.Interpreter):
                                 the recording interpreter instead of generated code
    record, keep="stats"         fxviz.record(gm, x, keep="stats") (statistics, no values)
    Debugger, stats off          fxviz.Debugger(gm, x, stats=False).step(len(gm.graph.nodes))
    Debugger to the end          fxviz.Debugger(gm, x).step(len(gm.graph.nodes))

for a 12-layer GPT-style decoder and a 200-block MLP (symbolic_trace), and for a Hugging
Face GPT-2 (2 layers, width 64, random weights) captured by ``torch.export``, there timed
against its own forward (``gm = ep.module()``; ``model(x)``: the eager HF model), without
the Debugger rows. Models run as users run them (eval mode, default grad mode), at one
thread unless ``--threads`` says otherwise. Then ``fxviz.debug(gpt, x)`` (the 12-layer GPT)
is timed from the call to the widget object returned: in this process after a warm-up, and
as the first call of fresh processes, with and without ``torch._dynamo`` imported before
(a shape pass imports it, once a process). It prints medians, ratios and the targets.

Run from the repository root:

    .venv/bin/python benchmarks/record_overhead.py [--repeats N] [--model gpt|mlp|gpt2|all]
        [--threads N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.fx

import fxviz
from fxviz._capture import tensors_in

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import add_threads_option, repeats_of, set_threads, target, time_interleaved

# Targets: (variant, baseline, largest ratio), per workload; stepping: extra µs a node.
RATIO_TARGETS = {
    "fx": (
        ("record", "Interpreter", 1.0),
        ("record, stats off", "Interpreter", 0.95),
        ('record, keep="stats"', "Interpreter", 1.6),
        ("record + table()", "Interpreter", 1.25),
        ("record, stats read", "Interpreter", 1.15),
    ),
    "export": (("record", "gm(x)", 1.5),),
}
STEP_TARGET_US = 50.0
DEBUG_TARGET_S = 1.0  # fxviz.debug(gpt, x) to its widget, held on the fresh process with dynamo
TARGET_WIDTHS = (21, 22)


def variants(
    gm: torch.fx.GraphModule, x: torch.Tensor, debugger: bool = True
) -> dict[str, Callable[[], object]]:
    """What is timed, by name; each call runs the whole graph once."""
    n_nodes = len(gm.graph.nodes)

    def step_to_the_end(stats: bool) -> Callable[[], object]:
        def run() -> object:
            dbg = fxviz.Debugger(gm, x, stats=stats)
            dbg.step(n_nodes)
            assert dbg.done
            return dbg

        return run

    timed: dict[str, Callable[[], object]] = {
        "gm(x)": lambda: gm(x),
        "Interpreter": lambda: torch.fx.Interpreter(gm).run(x),
        "Interpreter, env kept": lambda: kept_env(gm).run(x),
        "record, stats off": lambda: fxviz.record(gm, x, stats=False),
        "record": lambda: fxviz.record(gm, x),
        "record, stats read": lambda: read_statistics(fxviz.record(gm, x)),
        "record + table()": lambda: fxviz.record(gm, x).table(),
        "record, interpreted": lambda: fxviz.record(gm, x, interpreter=torch.fx.Interpreter),
        'record, keep="stats"': lambda: fxviz.record(gm, x, keep="stats"),
    }
    if debugger:
        timed["Debugger, stats off"] = step_to_the_end(stats=False)
        timed["Debugger to the end"] = step_to_the_end(stats=True)
    return timed


def read_statistics(rec: fxviz.Recording) -> fxviz.Recording:
    """Read every record's output statistics (each is measured on this first read)."""
    for r in rec.values():
        _ = r.outputs
    return rec


def kept_env(gm: torch.fx.GraphModule) -> torch.fx.Interpreter:
    """An Interpreter that keeps every value in ``env``, as fxviz.record keeps them."""
    return torch.fx.Interpreter(gm, garbage_collect_values=False)


def check_output(gm: torch.fx.GraphModule, x: torch.Tensor) -> None:
    """Fail loudly unless fxviz.record reproduces gm(x) exactly."""
    recorded, expected = tensors_in(fxviz.record(gm, x).output), tensors_in(gm(x))
    if len(recorded) != len(expected) or not all(
        torch.equal(a, b) for a, b in zip(recorded, expected, strict=True)
    ):
        raise SystemExit("fxviz.record(gm, x).output differs from gm(x)")


def exported_gpt2(quick: bool) -> tuple[torch.nn.Module, torch.fx.GraphModule, torch.Tensor]:
    """The HF GPT-2, its ``torch.export`` capture as fxviz records it, and token ids."""
    model, ids = models.hf_gpt2(quick=quick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' and export's notices
        program = torch.export.export(model, (ids,))
    return model, fxviz.trace(program), ids


def report(title: str, gm: torch.fx.GraphModule, times: dict[str, list[float]], kind: str) -> bool:
    """Print the table and the targets; return whether every target is met."""
    n_nodes = len(gm.graph.nodes)
    med = {v: statistics.median(ts) for v, ts in times.items()}
    interp, plain = med["Interpreter"], med["gm(x)"]
    print(f"\n{title}: {n_nodes} nodes, {len(times['gm(x)'])} runs each (medians)")
    print(f"  {'variant':<23}{'median ms':>10}{'min ms':>9}{'x Interp':>10}{'x gm(x)':>9}")
    for v, m in med.items():
        low = min(times[v])
        print(f"  {v:<23}{m * 1e3:>10.2f}{low * 1e3:>9.2f}{m / interp:>10.2f}{m / plain:>9.2f}")
    print("  targets:")
    met = True
    for variant, baseline, limit in RATIO_TARGETS[kind]:
        ratio = med[variant] / med[baseline]
        label = f"<= {limit:.2f}x {baseline.split()[0]}"
        met &= target(variant, label, f"{ratio:.2f}x", ratio <= limit, widths=TARGET_WIDTHS)
    if "Debugger, stats off" in med:  # stepping is held to its own cost
        step_us = (med["Debugger, stats off"] - interp) / n_nodes * 1e6
        own_us = (med["Debugger to the end"] - med["record"]) / n_nodes * 1e6
        limit_us = f"<= {STEP_TARGET_US:.0f} µs/node"
        met &= target(
            "stepping", limit_us, f"{step_us:.1f} µs", step_us <= STEP_TARGET_US,
            widths=TARGET_WIDTHS,
        )  # fmt: skip
        print(f"    (stepping with stats over record with stats: {own_us:.1f} µs a node)")
    return met


# -- fxviz.debug: from the call to the widget ------------------------------------------------
def debug_child(quick: bool, dynamo_first: bool) -> None:
    """In a fresh process: the first ``fxviz.debug(gpt, x)``, printed as JSON."""
    model, x = models.gpt(quick=quick)
    import_s = 0.0
    if dynamo_first:
        start = time.perf_counter()
        import torch._dynamo  # noqa: F401 (what torch.export or torch.compile imports)

        import_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    fxviz.debug(model, x)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"first_s": wall, "cpu_s": cpu, "import_s": import_s}))


def debug_widget(quick: bool, repeats: int, threads: int) -> bool:
    """Time ``fxviz.debug`` on the GPT warm here, then as the first call of fresh processes
    (skipped with ``quick``); print the figures and the target."""
    model, x = models.gpt(quick=quick)
    times = time_interleaved({"debug": lambda: fxviz.debug(model, x)}, repeats)["debug"]
    warm = statistics.median(times)
    nodes = len(fxviz.trace(model).graph.nodes)
    print(f"\nfxviz.debug(gpt, x), {nodes} nodes, from the call to the widget (medians)")
    print(f"  {f'in this process, warm ({len(times)} runs)':<48}{warm:>7.3f} s")
    if quick:
        return target(
            "debug widget (warm)", f"<= {DEBUG_TARGET_S:.1f} s", f"{warm:.3f} s",
            warm <= DEBUG_TARGET_S, widths=TARGET_WIDTHS,
        )  # fmt: skip
    fresh: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(min(repeats, 3)):  # a process each: a few seconds of imports every time
        for dynamo_first in (False, True):
            cmd = [sys.executable, __file__, "--debug-child", f"--threads={threads}"]
            cmd += ["--dynamo-first"] if dynamo_first else []
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"fxviz.debug in a fresh process failed:\n{done.stderr}")
            fresh[dynamo_first].append(json.loads(done.stdout.splitlines()[-1]))
    cold, first = (statistics.median(r["first_s"] for r in fresh[d]) for d in (False, True))
    cold_cpu, first_cpu = (statistics.median(r["cpu_s"] for r in fresh[d]) for d in (False, True))
    imported = statistics.median(r["import_s"] for r in fresh[True])
    n = len(fresh[False])
    print(
        f"  {f'first call of a fresh process ({n} processes)':<48}{cold:>7.3f} s  (CPU {cold_cpu:.3f} s)"
    )
    print(
        f"  {'first call, torch._dynamo imported before':<48}{first:>7.3f} s  (CPU {first_cpu:.3f} s)"
    )
    print(f"  {'(import torch._dynamo alone, in those processes)':<48}{imported:>7.3f} s")
    print("  targets (the first call with torch._dynamo imported: its import is torch's own,")
    print("  once a process, paid by any fake or meta shape pass and by torch.export/compile):")
    return target(
        "debug widget", f"<= {DEBUG_TARGET_S:.1f} s", f"{first:.3f} s", first <= DEBUG_TARGET_S,
        widths=TARGET_WIDTHS,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs of each variant")
    parser.add_argument("--model", choices=("gpt", "mlp", "gpt2", "all"), default="all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny models, 3 runs each (a smoke test)"
    )
    add_threads_option(parser, default=1)
    parser.add_argument("--debug-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dynamo-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    if args.debug_child:
        debug_child(args.quick, args.dynamo_first)
        return 0
    repeats = repeats_of(args, parser)

    torch.manual_seed(0)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, grad mode {torch.is_grad_enabled()}, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    builders = {"gpt": ("GPT decoder", models.gpt), "mlp": ("MLP", models.mlp)}
    chosen = [k for k in builders if args.model in (k, "all")]
    all_met = True
    for key in chosen:
        title, build = builders[key]
        model, x = build(quick=args.quick)
        gm = torch.fx.symbolic_trace(model)
        check_output(gm, x)
        times = time_interleaved(variants(gm, x), repeats)
        all_met &= report(f"{title}, input {tuple(x.shape)}", gm, times, "fx")
    if args.model in ("gpt2", "all"):
        try:
            model, gm, ids = exported_gpt2(args.quick)
        except ImportError:
            print("\ntransformers is not installed: skipped the Hugging Face GPT-2")
        else:
            check_output(gm, ids)
            timed = {"model(x)": lambda: model(ids), **variants(gm, ids, debugger=False)}
            times = time_interleaved(timed, repeats)
            title = f"HF GPT-2 (torch.export, 2 layers, width 64), input {tuple(ids.shape)}"
            all_met &= report(title, gm, times, "export")
    if args.model in ("gpt", "all"):
        all_met &= debug_widget(args.quick, min(repeats, 7), args.threads)
    print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
