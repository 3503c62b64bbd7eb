"""What watching a training run costs: fxviz.watch per step, and replaying a step.

Interleaved (A B, A B, ...; then A C D, A C D, ...), on two training workloads (AdamW, train mode, one
thread by default), it times one training step (forward, cross-entropy or MSE loss,
backward, optimizer step) as:

    plain step                   train_step(batch)
    watched step                 fxviz.watch(train_step, model, opt)(batch): the per-step
                                 check (one fused norm over the gradients and the loss, one
                                 host read), nothing copied on a good step
    detect_anomaly               train_step(batch) under torch.autograd.detect_anomaly()
    replay                       incident.replay(): the same step again from its saved state,
                                 every node recorded forward and backward (gradients hooked),
                                 with the optimizer's update per parameter

for a GPT-style decoder (4 layers, width 128, 64 tokens, batch 8) and a residual MLP (20
blocks, width 256, batch 256). Each variant trains its own copy of the model. The incident
replayed is made by a step whose loss is multiplied by NaN (the step is otherwise the
same). It prints medians of wall and CPU time (this process's), ratios, and the targets
(watched <= 1.03x plain, replay <= 3x), held on the CPU time: on a shared machine other
work stretches the wall clock of whichever variant it lands on.

Run from the repository root:

    .venv/bin/python benchmarks/training.py [--repeats N] [--model gpt|mlp|all] [--threads N]
        [--quick]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import fxviz

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import add_threads_option, repeats_of, set_threads, target, time_interleaved

TARGETS = (("watched step", "plain step", 1.03), ("replay", "plain step", 3.0))


def workload(name: str, quick: bool) -> tuple[nn.Module, Callable[[nn.Module], object], object]:
    """A model in train mode, a loss function of (model, batch) and a batch."""
    if name == "gpt":
        vocab, d, heads, layers, seq, batch = (
            (100, 32, 2, 2, 16, 2) if quick else (1000, 128, 4, 4, 64, 8)
        )
        model = models.GPT(vocab, d, heads, layers, seq).train()
        idx = torch.randint(0, vocab, (batch, seq))
        targets = torch.randint(0, vocab, (batch, seq))

        def loss(m: nn.Module, b: object) -> torch.Tensor:
            x, y = b  # type: ignore[misc]
            return nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten())

        return model, loss, (idx, targets)  # type: ignore[return-value]
    width, blocks, batch = (32, 4, 8) if quick else (256, 20, 256)
    model = models.MLP(width, blocks).train()
    x, y = torch.randn(batch, width), torch.randn(batch, width)

    def mse(m: nn.Module, b: object) -> torch.Tensor:
        x, y = b  # type: ignore[misc]
        return ((m(x) - y) ** 2).mean()

    return model, mse, (x, y)  # type: ignore[return-value]


def make_step(model: nn.Module, loss_fn: Callable[..., torch.Tensor]) -> Callable[..., object]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step(batch: object, poison: bool = False) -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn(model, batch)
        if poison:
            loss = loss * float("nan")
        loss.backward()
        opt.step()
        return loss.detach()

    train_step.opt = opt  # type: ignore[attr-defined]
    return train_step


def variants(name: str, quick: bool) -> dict[str, Callable[[], object]]:
    base, loss_fn, batch = workload(name, quick)
    plain_model, watched_model, anomaly_model, replay_model = (
        copy.deepcopy(base) for _ in range(4)
    )
    plain = make_step(plain_model, loss_fn)
    watched = make_step(watched_model, loss_fn)
    step = fxviz.watch(watched, watched_model, watched.opt)  # type: ignore[attr-defined]
    anomaly = make_step(anomaly_model, loss_fn)
    poisoned = make_step(replay_model, loss_fn)
    seen: list[object] = []
    poisoned_watch = fxviz.watch(
        poisoned,
        replay_model,
        poisoned.opt,  # type: ignore[attr-defined]
        on_nonfinite=seen.append,
    )
    poisoned_watch(batch, poison=True)
    incident = seen[0]

    def with_anomaly() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Anomaly Detection has been enabled", each time
            with torch.autograd.detect_anomaly(check_nan=True):
                return anomaly(batch)

    return {
        "plain step": lambda: plain(batch),
        "watched step": lambda: step(batch),
        "detect_anomaly": with_anomaly,
        "replay": lambda: incident.replay(),  # type: ignore[attr-defined]
    }


def cpu_timed(
    fns: dict[str, Callable[[], object]], cpu: dict[str, list[float]]
) -> dict[str, Callable[[], object]]:
    """The same functions, each also noting the CPU time this process spent in it (a
    shared machine's other work slows the wall clock, much less this)."""

    def timed(name: str, fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            start = time.process_time()
            result = fn()
            cpu.setdefault(name, []).append(time.process_time() - start)
            return result

        return run

    return {name: timed(name, fn) for name, fn in fns.items()}


def report(title: str, times: dict[str, list[float]], cpu: dict[str, list[float]]) -> bool:
    """Print wall and CPU medians and ratios; the targets are held on the CPU time."""
    med = {v: statistics.median(ts) for v, ts in times.items()}
    cpu_med = {v: statistics.median(ts[-len(times[v]) :]) for v, ts in cpu.items()}
    base, cpu_base = med["plain step"], cpu_med["plain step"]
    print(f"\n{title}: {len(times['plain step'])} runs each (medians)")
    print(f"  {'variant':<18}{'wall ms':>9}{'x plain':>9}{'CPU ms':>9}{'x plain':>9}")
    for v, m in med.items():
        c = cpu_med[v]
        print(f"  {v:<18}{m * 1e3:>9.2f}{m / base:>9.3f}{c * 1e3:>9.2f}{c / cpu_base:>9.3f}")
    print("  targets (CPU time):")
    met = True
    for variant, baseline, limit in TARGETS:
        if variant not in cpu_med:
            continue
        ratio = cpu_med[variant] / cpu_med[baseline]
        met &= target(variant, f"<= {limit:.2f}x plain", f"{ratio:.3f}x", ratio <= limit)
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timed runs of each variant")
    parser.add_argument("--model", choices=("gpt", "mlp", "all"), default="all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny models, 3 runs each (a smoke test)"
    )
    add_threads_option(parser, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    repeats = repeats_of(args, parser)
    torch.manual_seed(0)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    titles = {"gpt": "GPT decoder training step", "mlp": "MLP training step"}
    chosen = list(titles) if args.model == "all" else [args.model]
    all_met = True
    for name in chosen:
        fns = variants(name, args.quick)
        # Two interleaved passes: the watch beside the plain step alone (the replay and
        # detect_anomaly churn memory and would land on whichever step follows them), then
        # the replay and detect_anomaly beside the plain step.
        for group, keys in (
            ("watch", ("plain step", "watched step")),
            ("replay, detect_anomaly", ("plain step", "detect_anomaly", "replay")),
        ):
            cpu: dict[str, list[float]] = {}
            chosen_fns = cpu_timed({k: fns[k] for k in keys}, cpu)
            times = time_interleaved(chosen_fns, repeats)
            all_met &= report(f"{titles[name]} ({group})", times, cpu)
    print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
