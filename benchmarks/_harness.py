"""What the benchmark scripts share: the interleaved timing loop, target lines, threads.

Example::

    times = time_interleaved({"a": f, "b": g}, repeats=7)   # a b a b ..., after a warm-up
    met = target("a", "<= 1.00x b", "0.93x", ok=True)        # prints one aligned line
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from collections.abc import Callable

import torch


def time_interleaved(
    fns: dict[str, Callable[[], object]],
    repeats: int,
    *,
    warm_up: bool = True,
    cap: float = math.inf,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeats`` rounds, interleaved (A B C A B C ...),
    so that a noisy, shared machine slows every variant alike; after one untimed call of
    each when ``warm_up``. A call that returns ``False`` ran past its own time limit and
    counts as ``inf``; a function that once took over ``cap`` seconds runs no more.
    ``clock``: wall time, or ``time.process_time`` (this process's CPU time: on a machine
    shared with other work, what other processes do barely moves it)."""
    if warm_up:
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if times[name] and max(times[name]) > cap:
                continue
            gc.collect()  # start each run with the same heap, outside the timing
            start = clock()
            result = fn()
            times[name].append(clock() - start if result is not False else math.inf)
            del result  # freed outside the next timing
    return times


def target(
    label: str, limit: str, measured: str, ok: bool, *, widths: tuple[int, int] = (24, 18)
) -> bool:
    """Print ``label  limit  measured ...  met`` (or ``NOT MET``) and return ``ok``."""
    label_w, limit_w = widths
    verdict = "met" if ok else "NOT MET"
    print(f"    {label:<{label_w}}{limit:<{limit_w}}measured {measured:>9}  {verdict}")
    return ok


def add_threads_option(parser: argparse.ArgumentParser, default: int) -> None:
    """``--threads N``: torch's intra-op threads (0: torch's default)."""
    parser.add_argument(
        "--threads", type=int, default=default, help=f"torch threads (0: torch's default; "
        f"default {default}); 1 gives steadier ratios on a machine shared with other work",
    )  # fmt: skip


def repeats_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Timed runs asked for: ``--repeats``, or 3 with ``--quick`` (a smoke test)."""
    repeats = 3 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    return repeats


def set_threads(n: int) -> None:
    """Apply ``--threads`` (0 leaves torch's default)."""
    if n:
        torch.set_num_threads(n)
