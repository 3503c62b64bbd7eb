"""What a tensor's statistics cost: fxviz's summary statistics (min, max, mean, std, absmax,
NaN/Inf and zero counts) in µs per tensor, by size and kind, next to the implementation they
replaced (kept below as ``old_statistics``, for comparison), in one run.

Each case cycles through a pool of distinct tensors (fresh data: a branch predictor cannot
learn the values, as it would on one tensor measured again and again), old and new
interleaved, and prints medians; the last two rows are every value the MLP and GPT
benchmark models compute. The results are first checked against float64. Then one forward
under ``record(..., keep="stats")`` with either implementation, against the Interpreter.

Run from the repository root:

    .venv/bin/python benchmarks/tensor_statistics.py [--repeats N] [--threads N] [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx

import fxviz
from fxviz._record._moments import (
    _centered_mean_std,
    _mean_std,
    _nonfinite_statistics,
    _read,
    _scaled_mean_std,
    _statistics,
    flat_dense,
)
from fxviz._record._summary import _measure

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import add_threads_option, repeats_of, set_threads, target, time_interleaved


def old_statistics(t: torch.Tensor) -> tuple[Any, ...]:
    """fxviz 0.x's statistics before chunking: four whole-tensor reductions (``aminmax``,
    ``sum``, ``vector_norm``, ``count_nonzero``) sharing the fallbacks of today's."""
    x = flat_dense(t.detach())
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    numel = x.numel()
    exact = torch.float32 if x.device.type == "mps" else torch.float64
    lo, hi = torch.aminmax(x)
    if x.is_floating_point():
        wide = x if x.element_size() >= 4 else x.to(torch.float32)
    else:
        wide = x.to(exact)
    no_zeros = x.device.type == "cpu" and (lo.item() > 0 or hi.item() < 0)
    nonzero = lo.new_tensor(numel) if no_zeros else torch.count_nonzero(x)
    mn, mx, total, norm, nonzero = _read(
        exact, lo, hi, wide.sum(), torch.linalg.vector_norm(wide), nonzero
    )
    zeros = numel - int(nonzero)
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return (*_nonfinite_statistics(wide, exact), zeros)
    mean, std = _mean_std(total, norm * norm, numel)
    absmax = max(abs(mn), abs(mx))
    if not (math.isfinite(mean) and math.isfinite(std or 0.0)):
        mean, std = _scaled_mean_std(wide, absmax, exact)
    elif std is not None and mean * mean > 1e3 * std * std:
        mean, std = _centered_mean_std(wide, mean, exact)
    return (mn, mx, mean, std, absmax, 0, 0, 0, zeros)


def _gelu(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.nn.functional.gelu(torch.randn(shape))


# (name, make one tensor); shapes are those of the MLP and GPT benchmarks' intermediates,
# then bigger ones
CASES: dict[str, Callable[[], torch.Tensor]] = {
    "(64, 256) gelu": lambda: _gelu((64, 256)),
    "(64, 256) relu": lambda: torch.randn(64, 256).relu(),
    "(64, 256) 1e20 (squares overflow)": lambda: torch.randn(64, 256) * 1e20,
    "(4, 128, 256)": lambda: torch.randn(4, 128, 256),
    "(4, 4, 128, 128) masked -inf": lambda: torch.randn(4, 4, 128, 128).masked_fill(
        torch.ones(128, 128).triu(1).bool(), -math.inf
    ),
    "(4, 4, 128, 64) transposed": lambda: torch.randn(4, 128, 4, 64).transpose(1, 2),
    "(4, 128, 1024) gelu": lambda: _gelu((4, 128, 1024)),
    "(1, 1, 128, 128) bool": lambda: torch.rand(1, 1, 128, 128) > 0.5,
    "(4, 128) int64 ids": lambda: torch.randint(0, 1000, (4, 128)),
    "(4, 128, 256) bfloat16": lambda: torch.randn(4, 128, 256).to(torch.bfloat16),
    "(1024, 1024)": lambda: torch.randn(1024, 1024),
    "(1024, 1024) relu": lambda: torch.randn(1024, 1024).relu(),
    "(1024, 1024) float16": lambda: torch.randn(1024, 1024).half(),
    "(4096, 4096)": lambda: torch.randn(4096, 4096),
    "(4096, 4096) relu": lambda: torch.randn(4096, 4096).relu(),
}
QUICK = ("(64, 256) gelu", "(64, 256) relu", "(1024, 1024) relu")


def _reference(t: torch.Tensor) -> tuple[Any, ...]:
    """The statistics in float64, by plain torch ops (slow and simple)."""
    x = t.detach().to(torch.float64).flatten()
    finite = x[torch.isfinite(x)]
    counts = (int(x.isnan().sum()), int(x.isposinf().sum()), int(x.isneginf().sum()))
    if not finite.numel():
        return (None,) * 5 + (*counts, int((x == 0).sum()))
    lo, hi = finite.min().item(), finite.max().item()
    std = finite.std().item() if finite.numel() > 1 else None
    mean = finite.mean().item()
    return (lo, hi, mean, std, max(-lo, hi), *counts, int((x == 0).sum()))


def _agree(got: tuple[Any, ...], want: tuple[Any, ...], scale: float) -> bool:
    for a, b in zip(got, want, strict=True):
        if a is None or b is None:
            if a is not b:
                return False
        elif not math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6 * scale):
            return False
    return True


def _intermediates(
    build: Callable[..., tuple[torch.nn.Module, torch.Tensor]], quick: bool
) -> list[Any]:
    """Every tensor a benchmark model's forward computes (as record sees them)."""
    model, x = build(quick=quick)
    interp = torch.fx.Interpreter(torch.fx.symbolic_trace(model), garbage_collect_values=False)
    with torch.no_grad():
        interp.run(x)
    return [v for v in interp.env.values() if isinstance(v, torch.Tensor)]


def measure(pool: list[torch.Tensor], repeats: int) -> tuple[list[float], list[float]]:
    """µs per tensor of old and new, ``repeats`` interleaved rounds over one pool."""
    for t in pool[:: max(1, len(pool) // 8)]:
        want = _reference(t)
        scale = max(abs(want[4] or 0.0), 1.0)
        if not _agree(_statistics(t), want, scale):
            raise SystemExit(f"statistics {_statistics(t)} differ from float64's {want}")
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in zip((old_statistics, _measure), times, strict=True):
            start = time.perf_counter()
            for t in pool:
                fn(t)
            out.append((time.perf_counter() - start) / len(pool) * 1e6)
    return times


def in_record(build: Callable[..., Any], quick: bool, repeats: int) -> dict[str, float]:
    """Medians (s) of one forward under torch.fx.Interpreter and under ``fxviz.record``
    without statistics and with ``keep="stats"`` (eager statistics, values dropped), the
    statistics old or new, interleaved in one run: the statistics as the recorder pays
    for them, with the caches and the allocator in the state a forward leaves them."""
    import fxviz._record._summary as summary

    model, x = build(quick=quick)
    gm = torch.fx.symbolic_trace(model)
    new_measure = summary._measure

    def old_measure(t: torch.Tensor) -> tuple[Any, ...]:
        try:
            return old_statistics(t)
        except (RuntimeError, NotImplementedError, TypeError):
            return new_measure(t)  # dtypes the reductions do not support: widened

    def recorded(measure: Callable[[torch.Tensor], tuple[Any, ...]]) -> Callable[[], object]:
        def run() -> object:
            summary._measure = measure  # the one call site of either implementation
            try:
                return fxviz.record(gm, x, keep="stats", progress=False)
            finally:
                summary._measure = new_measure

        return run

    times = time_interleaved(
        {
            "Interpreter": lambda: torch.fx.Interpreter(gm).run(x),
            "record, stats off": lambda: fxviz.record(gm, x, stats=False, progress=False),
            'record, keep="stats", old statistics': recorded(old_measure),
            'record, keep="stats", new statistics': recorded(new_measure),
        },
        repeats,
    )
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds per case")
    parser.add_argument(
        "--quick", action="store_true", help="three cases, tiny models, 3 rounds (smoke)"
    )
    add_threads_option(parser, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    torch.manual_seed(0)
    repeats = repeats_of(args, parser)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads; µs per tensor, median of {repeats} interleaved rounds"
    )
    print(f"  {'tensor':<34}{'old µs':>10}{'new µs':>10}{'new/old':>9}")
    for name, make in CASES.items():
        if args.quick and name not in QUICK:
            continue
        one = make()
        size = max(one.numel() * one.element_size(), 1)
        pool = [one] + [make() for _ in range(max(1, min(64, (8 << 20) // size)) - 1)]
        _print(name, measure(pool, repeats))
    ratios = {}
    for name, build in (("MLP", models.mlp), ("GPT", models.gpt)):
        pool = _intermediates(build, args.quick)
        ratios[name] = _print(f"{name}, all {len(pool)} intermediates", measure(pool, repeats))
    records = {}
    for name, build in (("MLP", models.mlp), ("GPT", models.gpt)):
        records[name] = med = in_record(build, args.quick, repeats)
        print(f"\n{name}, one forward: median ms (x Interpreter)")
        for variant, m in med.items():
            print(f"  {variant:<40}{m * 1e3:>9.2f}{m / med['Interpreter']:>8.2f}x")
    print("\n  targets:")
    met = True
    for name, ratio in ratios.items():
        met &= target(f"{name} intermediates", "new <= old", f"{ratio:.2f}x", ratio <= 1.0)
    for name, med in records.items():
        # what the statistics add to a forward, against the forward itself
        cost = (med['record, keep="stats", new statistics'] - med["record, stats off"]) / med[
            "Interpreter"
        ]
        met &= target(f"{name} statistics", "<= 0.50x Interp", f"{cost:.2f}x", cost <= 0.5)
    print("all targets met" if met else "some targets NOT met")
    return 0


def _print(name: str, times: tuple[list[float], list[float]]) -> float:
    old, new = (statistics.median(ts) for ts in times)
    print(f"  {name:<34}{old:>10.1f}{new:>10.1f}{new / old:>9.2f}")
    return new / old


if __name__ == "__main__":
    sys.exit(main())
