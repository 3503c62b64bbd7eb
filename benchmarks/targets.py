"""Every figure of the performance issue (#25) side by side, measured in one run.

Ratios are medians of interleaved runs (A B C ... A B C ...) in this one process, at one
thread, so that a machine shared with other work slows every variant alike; the load
average is printed with them. ``--clock cpu`` (the default) times this process's CPU time,
which other processes on a busy machine barely move (at one thread it is the wall time of
a quiet machine); ``--clock wall`` times wall time. It measures:

    GPT decoder and deep MLP (symbolic_trace), against torch.fx.Interpreter:
        record, record stats off, keep="stats", record + table(), record + every statistic
        read, and stepping (Debugger, stats off: µs a node over the Interpreter)
    Hugging Face / diffusers zoo models (tests/conformance/zoo.py), the second
        fxviz.record(model, **inputs) (capture re-used) against model(**inputs)
    the first fxviz.record(model, **inputs) of a 4-layer GPT-2 (small config), in a fresh
        process; then of a second GPT-2 of the same class there (auto remembers the method)

The widget's figures (first paint, expanding a module, slowest main-thread step) come from
``benchmarks/widget.py`` (a real JupyterLab), which ``make bench`` runs before this.

Run from the repository root:

    .venv/bin/python benchmarks/targets.py [--repeats N] [--models a,b,...|none] [--quick]

``--device cuda`` measures the GPT decoder, the deep MLP and the zoo on a GPU (wall time,
each call waited for with ``torch.cuda.synchronize()``); the first record stays on the CPU.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
import torch.fx  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from _harness import add_threads_option, set_threads, time_interleaved  # noqa: E402

import fxviz  # noqa: E402

ZOO = "zoo"  # every third-party model of the conformance matrix (tests/conformance/zoo.py)
FX_TARGETS = (  # (figure, variant, largest ratio to the Interpreter)
    ("record (default)", "record", 1.0),
    ('record, keep="stats"', 'record, keep="stats"', 1.6),
    ("record + table()", "record + table()", 1.25),
    ("record + every statistic", "record, stats read", 1.15),
)
STEP_US = 50.0
HF_MEDIAN, HF_WORST, FIRST_S = 1.3, 2.0, 1.0
ROWS: list[tuple[str, str, str, bool | None]] = []


def row(figure: str, limit: str, measured: str, ok: bool | None) -> None:
    ROWS.append((figure, limit, measured, ok))


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = CLOCKS["cpu"]
DEVICE = torch.device("cpu")


def on_device(value: Any) -> Any:
    """``value`` (a module, or tensors in containers) on :data:`DEVICE`."""
    if isinstance(value, torch.nn.Module):
        return value.to(DEVICE)
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(DEVICE), value)


def synced(fns: dict[str, Callable[[], object]]) -> dict[str, Callable[[], object]]:
    """Each function, waiting for the device's queue to empty before it returns (on the
    CPU: as it is)."""
    if DEVICE.type != "cuda":
        return fns

    def wait(fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            result = fn()
            torch.cuda.synchronize()
            return result

        return run

    return {name: wait(fn) for name, fn in fns.items()}


def fx_figures(repeats: int, quick: bool) -> None:
    import models
    from record_overhead import variants

    for title, build in (("GPT decoder", models.gpt), ("deep MLP", models.mlp)):
        model, x = build(quick=quick)
        model, x = on_device(model), on_device(x)
        gm = torch.fx.symbolic_trace(model)
        timed = variants(gm, x)
        del timed["Debugger to the end"], timed["record, interpreted"]
        for name in ("record", "record, stats off", "record + table()", "record, stats read"):
            timed[name] = _quiet(timed[name])
        times = time_interleaved(synced(timed), repeats, clock=CLOCK)
        med = {k: statistics.median(v) for k, v in times.items()}
        interp = med["Interpreter"]
        for figure, variant, limit in FX_TARGETS:
            ratio = med[variant] / interp
            row(f"{title}: {figure}", f"<= {limit:.2f}x Interp", f"{ratio:.2f}x", ratio <= limit)
        ratio = med["record, stats off"] / interp
        row(f"{title}: record, stats off", "(no target)", f"{ratio:.2f}x", None)
        step = (med["Debugger, stats off"] - interp) / len(gm.graph.nodes) * 1e6
        row(f"{title}: stepping", f"<= {STEP_US:.0f} µs/node", f"{step:.1f} µs", step <= STEP_US)


def _quiet(fn):
    """The variant without a progress bar (tqdm's output is not what is timed)."""

    def run() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()

    return run


def hf_figures(names: list[str], repeats: int) -> None:
    from tests.conformance.zoo import build

    ratios = []
    for name in names:
        try:
            model, args, kwargs = build(name)
            model, args, kwargs = on_device(model), on_device(args), on_device(kwargs)
        except ImportError as missing:
            row(f"{name}: record (2nd) / forward", "", f"skipped ({missing.name})", None)
            continue
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = functools.partial(fxviz.record, model, *args, progress=False, **kwargs)
            times = time_interleaved(
                synced({"forward": functools.partial(model, *args, **kwargs), "record": record}),
                repeats,
                clock=CLOCK,
            )
            recording = record()
        ratio = statistics.median(times["record"]) / statistics.median(times["forward"])
        ratios.append(ratio)
        forward_ms = statistics.median(times["forward"]) * 1e3
        # what a node costs over the forward: on these small configs a fixed cost a node
        # (and the capture check a record), not the arithmetic, sets the ratio
        extra_us = (statistics.median(times["record"]) - statistics.median(times["forward"])) * 1e6
        per_node = f"{len(recording)} nodes, +{extra_us / len(recording):.1f} µs/node"
        row(f"  {name} ({recording.method}, forward {forward_ms:.1f} ms, {per_node})", "",
            f"{ratio:.2f}x", None)  # fmt: skip
    if ratios:
        median, worst = statistics.median(ratios), max(ratios)
        n = len(ratios)
        row(f"zoo record (2nd) / forward, median of {n}", f"<= {HF_MEDIAN}x", f"{median:.2f}x",
            median <= HF_MEDIAN)  # fmt: skip
        row(f"zoo record (2nd) / forward, worst of {n}", f"<= {HF_WORST}x", f"{worst:.2f}x",
            worst <= HF_WORST)  # fmt: skip


def first_record_child() -> None:
    """In a fresh process: the first record of a 4-layer GPT-2, then of a second one."""
    import transformers as tf

    torch.manual_seed(0)
    config = tf.GPT2Config(
        vocab_size=1000, n_layer=4, n_embd=64, n_head=2, n_positions=64, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    ids = torch.randint(0, 1000, (1, 16))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in ("first_s", "second_model_s"):
            model = tf.GPT2LMHeadModel(config).eval()
            start, cpu = time.perf_counter(), time.process_time()
            rec = fxviz.record(model, **inputs, progress=False)
            found[key] = time.perf_counter() - start
            found[f"{key[:-2]}_cpu_s"] = time.process_time() - cpu
        found["method"] = rec.method
    print(json.dumps(found))


def first_record_figures(threads: int) -> None:
    cmd = [sys.executable, __file__, "--first-child", f"--threads={threads}"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        row("first record of a 4-layer GPT-2", f"<= {FIRST_S:.1f} s", "failed", False)
        print(done.stderr[-2000:], file=sys.stderr)
        return
    found = json.loads(done.stdout.splitlines()[-1])
    first, again = found["first_s"], found["second_model_s"]
    row(f"first record of a 4-layer GPT-2 ({found['method']})", f"<= {FIRST_S:.1f} s",
        f"{first:.2f} s", first <= FIRST_S)  # fmt: skip
    row("  its CPU time (what a busy machine moves least)", "(no target)",
        f"{found['first_cpu_s']:.2f} s", None)  # fmt: skip
    row("  the same, a second GPT-2 in that process", "(no target)", f"{again:.2f} s", None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--models",
        default=ZOO,
        help="zoo models, comma-separated (default zoo: every Hugging Face / diffusers model "
        "of the conformance matrix; none: no zoo figures)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny models, 3 runs, llama only")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="what is timed")
    parser.add_argument(
        "--device", default="cpu", help="where the models run (cuda: wall time, synchronized)"
    )
    add_threads_option(parser, default=1)
    parser.add_argument("--first-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    global CLOCK, DEVICE
    DEVICE = torch.device(args.device)
    args.clock = "wall" if DEVICE.type != "cpu" else args.clock
    CLOCK = CLOCKS[args.clock]
    if args.first_child:
        first_record_child()
        return 0
    repeats = 3 if args.quick else args.repeats
    start_load = os.getloadavg()[0]
    fx_figures(repeats, args.quick)
    zoo = [] if args.models in ("", "none") else args.models.split(",")
    if zoo == [ZOO]:
        from tests.conformance.zoo import THIRD_PARTY

        zoo = THIRD_PARTY
    hf_figures(["llama"] if args.quick else zoo, repeats)
    if args.quick:  # a fresh process compiling GPT-2: most of a smoke run's time
        row("first record of a 4-layer GPT-2", f"<= {FIRST_S:.1f} s", "skipped (--quick)", None)
    else:
        first_record_figures(args.threads)
    print(
        f"\nfxviz {fxviz.__version__}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"thread(s), {repeats} interleaved runs each (medians, {args.clock} time; the first "
        f"record: wall time); load average "
        f"{start_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs"
        f"; models on {DEVICE}"
        + (f" ({torch.cuda.get_device_name(DEVICE)})" if DEVICE.type == "cuda" else "")
    )
    width = max(len(r[0]) for r in ROWS) + 2
    print(f"{'figure':<{width}}{'targets':<20}{'measured':>10}")
    for figure, limit, measured, ok in ROWS:
        verdict = "" if ok is None else ("  met" if ok else "  NOT MET")
        print(f"{figure:<{width}}{limit:<20}{measured:>10}{verdict}")
    print("widget figures: see benchmarks/widget.py above (a real JupyterLab)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
