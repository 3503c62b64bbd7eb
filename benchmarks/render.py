"""How long fxviz takes to write DOT for big graphs, and Graphviz to lay them out.

DOT generation: ``fxviz.to_dot(gm).source`` (every node, in nested module clusters) for
stacks of residual blocks (LayerNorm, Linear, GELU, Linear, add; width 16; ten blocks a
stage, stages in an ``nn.Sequential``) of about 1,000, 5,000 and 20,000 FX nodes, and with
``depth=1`` (one box a stage) and ``depth=2`` (one box a block) on the largest. Tracing is
outside the timing. Held to: 1k <= 0.2 s, 5k <= 1 s, 20k <= 4 s.

Layout: the system ``dot -Tsvg`` (each call under ``--timeout`` seconds) on the 12-layer
GPT from models.py, drawn by fxviz in full, with ``depth=1`` and with ``depth=2``, and by
torch's ``FxGraphDrawer(gm, "gpt").get_dot_graph()`` when pydot is installed (it is not a
dependency of fxviz; the row is skipped without it); and on the 5k stack in full and with
``depth=1``. No targets. Skipped when ``dot`` is not on PATH.

Repeats are interleaved and medians printed; a case whose run took over ``--cap`` seconds
(or timed out) is not run again.

Run from the repository root:

    .venv/bin/python benchmarks/render.py [--repeats N] [--cap S] [--timeout S] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.fx
from torch import nn

import fxviz

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import target, time_interleaved

# (blocks, target seconds for the full DOT): 5 nodes a block, plus the input and output.
SIZES = ((200, 0.2), (1000, 1.0), (4000, 4.0))
QUICK_SIZES = ((40, 0.2),)  # a smoke test, held to the 1k target
LAYOUT_BLOCKS = {False: 1000, True: 40}  # the stack laid out, by --quick
WIDTH, PER_STAGE = 16, 10


class Block(nn.Module):
    """``x + fc2(gelu(fc1(norm(x))))``: five FX nodes."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm, self.act = nn.LayerNorm(width), nn.GELU()
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


def stack(n_blocks: int) -> torch.fx.GraphModule:
    """``n_blocks`` blocks, ``PER_STAGE`` to a stage, traced by fxviz."""
    stages = [
        nn.Sequential(*(Block(WIDTH) for _ in range(min(PER_STAGE, n_blocks - i))))
        for i in range(0, n_blocks, PER_STAGE)
    ]
    return fxviz.trace(nn.Sequential(*stages))


def dot_source(
    gm: torch.fx.GraphModule, depth: int | None, keep: dict[str, str], label: str
) -> Callable[[], bool]:
    """``to_dot(gm, depth=depth).source``, kept under ``label`` (so as to count its bytes)."""

    def run() -> bool:
        keep[label] = fxviz.to_dot(gm, depth=depth).source
        return True

    return run


def layout(source: str, timeout: float) -> Callable[[], bool]:
    """``dot -Tsvg`` on ``source`` (SVG thrown away); False when it ran past ``timeout``."""

    def run() -> bool:
        try:
            subprocess.run(
                ["dot", "-Tsvg"],
                input=source.encode(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=timeout,
                check=True,
            )
        except subprocess.TimeoutExpired:
            return False
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"dot failed: {e.stderr.decode(errors='replace')[:500]}") from e
        return True

    return run


def table(rows: dict[str, tuple[int, int, list[float]]], head: str, target: dict[str, str]) -> None:
    """``rows``: label -> (FX nodes, DOT bytes, seconds of each run)."""
    print(
        f"  {head:<26}{'nodes':>7}{'DOT bytes':>11}{'median s':>10}{'min s':>8}{'runs':>5}  target"
    )
    for label, (nodes, size, ts) in rows.items():
        med, low = (
            f"{t:.3f}" if t < math.inf else "timeout" for t in (statistics.median(ts), min(ts))
        )
        print(
            f"  {label:<26}{nodes:>7}{size:>11,}{med:>10}{low:>8}{len(ts):>5}"
            f"  {target.get(label, '')}"
        )


def part_dot(sizes: tuple[tuple[int, float], ...], repeats: int, cap: float) -> bool:
    """Time the DOT generation; print the table and the targets; return whether all met."""
    gms = {blocks: stack(blocks) for blocks, _ in sizes}
    _ = fxviz.to_dot(stack(2)).source  # warm-up: first-use costs, outside the timing
    cases = {f"stack {len(gm.graph.nodes)} full": (gm, None) for gm in gms.values()}
    limits = {label: limit for label, (_, limit) in zip(cases, sizes, strict=True)}
    big = gms[sizes[-1][0]]
    cases |= {f"stack {len(big.graph.nodes)} depth={d}": (big, d) for d in (1, 2)}
    kept: dict[str, str] = {}
    fns = {label: dot_source(gm, d, kept, label) for label, (gm, d) in cases.items()}
    times = time_interleaved(fns, repeats, warm_up=False, cap=cap)
    rows = {
        label: (len(gm.graph.nodes), len(kept[label].encode()), times[label])
        for label, (gm, _) in cases.items()
    }
    print(f"\nDOT generation, fxviz.to_dot(gm, depth=...).source (medians of up to {repeats} runs)")
    table(rows, "graph", {label: f"<= {s:g} s" for label, s in limits.items()})
    print("  targets:")
    met = True
    for label, limit in limits.items():
        med = statistics.median(times[label])
        met &= target(label, f"<= {limit:g} s", f"{med:.3f} s", med <= limit, widths=(26, 10))
    return met


def part_layout(quick: bool, repeats: int, cap: float, timeout: float) -> None:
    """Time ``dot -Tsvg`` on the GPT and on a stack; print the table (no targets)."""
    if shutil.which("dot") is None:
        print("\nGraphviz 'dot' is not on PATH: skipped the layout timings")
        return
    model, _ = models.gpt(quick=quick)
    gpt = fxviz.trace(model)
    stk = stack(LAYOUT_BLOCKS[quick])
    n_gpt, n_stk = len(gpt.graph.nodes), len(stk.graph.nodes)
    sources: dict[str, tuple[int, str]] = {}
    for name, d in (("full", None), ("depth=1", 1), ("depth=2", 2)):
        sources[f"gpt fxviz {name}"] = n_gpt, fxviz.to_dot(gpt, depth=d).source
    if importlib.util.find_spec("pydot") is None:
        print("\npydot is not installed: skipped FxGraphDrawer (pip install pydot to compare)")
    else:
        from torch.fx.passes.graph_drawer import FxGraphDrawer

        sources["gpt FxGraphDrawer"] = n_gpt, FxGraphDrawer(gpt, "gpt").get_dot_graph().to_string()
    for name, d in (("full", None), ("depth=1", 1)):
        sources[f"stack {n_stk} fxviz {name}"] = n_stk, fxviz.to_dot(stk, depth=d).source
    fns = {label: layout(src, timeout) for label, (_, src) in sources.items()}
    times = time_interleaved(fns, repeats, warm_up=False, cap=cap)
    rows = {label: (n, len(src.encode()), times[label]) for label, (n, src) in sources.items()}
    print(
        f"\nLayout, dot -Tsvg (timeout {timeout:g} s; medians of up to {repeats} runs), no targets"
    )
    table(rows, "graph", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each case")
    parser.add_argument("--cap", type=float, default=30.0, help="no more runs after one this long")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a dot call may run")
    parser.add_argument(
        "--quick", action="store_true", help="tiny graphs, 2 runs each (a smoke test)"
    )
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")

    torch.manual_seed(0)
    print(f"fxviz {fxviz.__version__}, torch {torch.__version__}")
    all_met = part_dot(QUICK_SIZES if args.quick else SIZES, repeats, args.cap)
    part_layout(args.quick, repeats, args.cap, args.timeout)
    print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
