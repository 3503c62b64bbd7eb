"""How long fxviz.shapes takes, and how much memory, on models too big to run.

Each measurement runs in a fresh Python process, so that its peak RSS
(``ru_maxrss``, which includes ``import torch``) is its own; the seconds are those of the
work below, the initial imports excluded ("process s": the whole process). Repeats are
interleaved and medians printed.

Llama-7B-style decoder (6.7e9 parameters, 27 GB in fp32: built on the meta device only),
1 × 2048 token ids, timing the model build + trace + report:

    shapes meta      fxviz.trace + fxviz.shapes(gm, spec, mode="meta") + .table() + .summary()
    shapes fake      the same with mode="fake"
    ShapeProp meta   torch.fx.symbolic_trace + ShapeProp(gm).propagate(meta token ids)

held to: meta <= 3 s, fake <= 6 s, peak RSS <= 1 GiB.

12-layer GPT from models.py (real weights), timing everything after the model is built:
fxviz.shapes fake and meta (as above), ShapeProp running the graph for real, and
torchinfo.summary(model, input_data=x) when torchinfo is installed (it is not a
dependency of fxviz; the row is skipped without it).

The debugger's labels (``--part labels``): the meta pass ``fxviz.debug`` runs to label
every node before it runs (``fxviz._shapes._quick.drawn_shapes``), each call that repeats
an earlier one's op and input metadata answered from it ("memo") or every call run, on a
stack of 340 small blocks (3,062 nodes, the widget benchmark's 3k debugger) and on the
12-layer GPT; each process first labels a one-block graph (torch's first meta pass
imports torch._dynamo: 1-4 s, once), outside the timing.

Run from the repository root:

    .venv/bin/python benchmarks/shapes.py [--repeats N] [--part llama|gpt|labels|all] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
GIB = 1 << 30
# Targets for the Llama: task -> largest median seconds; the same tasks' peak RSS.
TIME_TARGETS = {"llama shapes meta": 3.0, "llama shapes fake": 6.0}
RSS_TARGET = 1 * GIB
LLAMA_TASKS = ("llama shapes meta", "llama shapes fake", "llama ShapeProp meta")
GPT_TASKS = ("gpt shapes fake", "gpt shapes meta", "gpt ShapeProp real", "gpt torchinfo")
LABEL_TASKS = ("stack labels", "stack labels memo", "gpt labels", "gpt labels memo")


# -- the child process: one measurement -------------------------------------------------
def child(task: str, quick: bool) -> dict[str, Any]:
    """Run ``task`` once, here; return its seconds, peak RSS and what it found."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    import fxviz

    sys.path.insert(0, str(HERE.parent))  # models.py sits next to this file
    import models

    model_name, what = task.split(" ", 1)
    found: dict[str, Any] = {}
    if what.startswith("labels"):
        return _labels(model_name, what == "labels memo", quick)

    def report(gm: torch.nn.Module, inp: Any, mode: str) -> None:
        rep = fxviz.shapes(gm, inp, mode=mode, progress=False)
        rep.table()
        found.update(rep.totals())

    if model_name == "gpt":
        model, x = models.gpt(quick=quick)  # built outside the timing
    start = time.perf_counter()
    if model_name == "llama":
        model, ids = models.llama(quick=quick)  # on the meta device
        spec = fxviz.spec(*ids.shape, dtype=torch.long)
        if what == "ShapeProp meta":
            gm = torch.fx.symbolic_trace(model)
            ShapeProp(gm).propagate(ids)
        else:
            gm = fxviz.trace(model)
            report(gm, spec, mode=what.removeprefix("shapes "))
        found["nodes"] = len(gm.graph.nodes)
        found["parameters"] = sum(p.numel() for p in model.parameters())
    elif what.startswith("shapes "):
        report(fxviz.trace(model), x, mode=what.removeprefix("shapes "))
    elif what == "ShapeProp real":
        gm = torch.fx.symbolic_trace(model)
        ShapeProp(gm).propagate(x)
        found["nodes"] = len(gm.graph.nodes)
    else:
        import torchinfo

        torchinfo.summary(model, input_data=x, verbose=0)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    versions = {"torch": torch.__version__, "fxviz": fxviz.__version__}
    return {"seconds": seconds, "rss": peak, **versions, **found}


def _labels(model_name: str, memo: bool, quick: bool) -> dict[str, Any]:
    """The debugger's meta pass over the stack or the GPT, warmed up on a one-block graph."""
    import models  # next to this file, on the path child() put it on
    import torch

    import fxviz
    from fxviz._capture import bind_inputs
    from fxviz._shapes._propagate import propagate

    def label(gm: Any, x: Any) -> None:
        inputs = bind_inputs(gm, (x,), {})
        options = {"progress": False, "flops": False, "suggest": False, "default_meta": False}
        propagate(gm, inputs, "meta", memo=memo, **options)

    label(fxviz.trace(models.small_blocks(1)), torch.randn(2, 4))
    if model_name == "stack":
        model, x = models.small_blocks(30 if quick else 340), torch.randn(2, 4)
    else:
        model, x = models.gpt(quick=quick)
    gm = fxviz.trace(model)
    start = time.perf_counter()
    label(gm, x)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    versions = {"torch": torch.__version__, "fxviz": fxviz.__version__}
    return {"seconds": seconds, "rss": peak, "nodes": len(gm.graph.nodes), **versions}


# -- the parent: run the children, print the tables -------------------------------------
def measure(tasks: list[str], quick: bool) -> list[dict[str, Any]]:
    """One fresh process running ``tasks`` in turn; with one task, adds the process's
    whole wall time (imports included)."""
    cmd = [sys.executable, str(HERE), "--child", ";".join(tasks)] + (["--quick"] if quick else [])
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start if len(tasks) == 1 else math.nan
    if done.returncode != 0:
        raise SystemExit(f"{tasks} failed:\n{done.stderr}")
    return [{**json.loads(line), "wall": wall} for line in done.stdout.splitlines()[-len(tasks) :]]


def run_all(tasks: list[str], repeats: int, quick: bool) -> dict[str, list[dict[str, Any]]]:
    """``repeats`` rounds of every task, interleaved, each in its own process; ``quick``:
    all in one process, once (a smoke test: the RSS figures are then shared)."""
    results: dict[str, list[dict[str, Any]]] = {t: [] for t in tasks}
    rounds = [[t] for _ in range(repeats) for t in tasks] if not quick else [tasks]
    for batch in rounds:
        for task, result in zip(batch, measure(batch, quick), strict=True):
            results[task].append(result)
    return results


def table(results: dict[str, list[dict[str, Any]]], target: Callable[[str], str]) -> None:
    print(f"  {'task':<22}{'median s':>9}{'min s':>8}{'process s':>10}{'peak RSS':>10}  target")
    for task, runs in results.items():
        med = statistics.median(r["seconds"] for r in runs)
        low = min(r["seconds"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        rss = statistics.median(r["rss"] for r in runs)
        process = "-" if math.isnan(wall) else f"{wall:.2f}"
        print(f"  {task:<22}{med:>9.2f}{low:>8.2f}{process:>10}{_mib(rss):>10}  {target(task)}")


def labels(results: dict[str, list[dict[str, Any]]], quick: str) -> None:
    """The debugger's labels, each call run against repeated calls answered (no target)."""
    nodes = {t.split()[0]: results[t][0]["nodes"] for t in LABEL_TASKS}
    print(f"\nThe debugger's labels{quick}: stack {nodes['stack']} nodes, GPT {nodes['gpt']}")
    table({t: results[t] for t in LABEL_TASKS}, lambda t: "")
    for name in ("stack", "gpt"):
        every = statistics.median(r["seconds"] for r in results[f"{name} labels"])
        memo = statistics.median(r["seconds"] for r in results[f"{name} labels memo"])
        print(f"  {name}: repeated calls answered, {every / memo:.1f}x faster ({memo:.2f} s)")


def check_targets(results: dict[str, list[dict[str, Any]]]) -> bool:
    print("  targets:")
    met = True
    for task, limit in TIME_TARGETS.items():
        med = statistics.median(r["seconds"] for r in results[task])
        met &= _target(task, f"<= {limit:.0f} s", f"{med:.2f} s", med <= limit)
    for task in TIME_TARGETS:
        rss = statistics.median(r["rss"] for r in results[task])
        label = task.replace("shapes", "RSS")
        met &= _target(label, f"<= {_mib(RSS_TARGET)}", _mib(rss), rss <= RSS_TARGET)
    return met


def _target(label: str, target: str, measured: str, ok: bool) -> bool:
    print(f"    {label:<20}{target:<14}measured {measured:>10}  {'met' if ok else 'NOT MET'}")
    return ok


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per task")
    parser.add_argument("--part", choices=("llama", "gpt", "labels", "all"), default="all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny models, 1 run each, one process (a smoke test)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: run these tasks here
    args = parser.parse_args(argv)
    if args.child:
        for task in args.child.split(";"):
            print(json.dumps(child(task, args.quick)), flush=True)
        return 0
    repeats = 1 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")

    tasks = [*LLAMA_TASKS] if args.part in ("llama", "all") else []
    if args.part in ("gpt", "all"):
        tasks += GPT_TASKS
        if importlib.util.find_spec("torchinfo") is None:
            tasks.remove("gpt torchinfo")
            print("torchinfo is not installed: skipped (pip install torchinfo to compare)")
    if args.part in ("labels", "all"):
        tasks += LABEL_TASKS
    results = run_all(tasks, repeats, args.quick)
    first = results[tasks[0]][0]
    print(f"fxviz {first['fxviz']}, torch {first['torch']}, {repeats} runs a task (medians)")
    quick = " (quick: one process for all, RSS shared)" if args.quick else ""
    all_met = True
    if args.part in ("llama", "all"):
        meta = results["llama shapes meta"][0]
        print(
            f"\nLlama-style decoder{quick}: {meta['parameters']:,} parameters, "
            f"{meta['nodes']} nodes, peak live activations {_mib(meta['peak_live_bytes'])} "
            f"at {meta['peak_node']}"
        )
        limits = {t: f"<= {s:.0f} s, RSS <= {_mib(RSS_TARGET)}" for t, s in TIME_TARGETS.items()}
        table({t: results[t] for t in LLAMA_TASKS}, lambda t: limits.get(t, "(reference)"))
        all_met &= check_targets(results)
    if args.part in ("gpt", "all"):
        nodes = results["gpt ShapeProp real"][0]["nodes"]
        print(f"\nGPT decoder{quick}: {nodes} nodes, no targets")
        table({t: results[t] for t in GPT_TASKS if t in results}, lambda t: "")
    if args.part in ("labels", "all"):
        labels(results, quick)
    if args.part in ("llama", "all"):
        print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
