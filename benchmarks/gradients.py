"""What recording gradients costs: fxviz.record(..., backward=True) against the same forward
and backward pass under torch.fx.Interpreter and under torch.autograd.detect_anomaly().

On the same inputs, interleaved (A B C D E A B C D E ...) so that a noisy, shared machine
slows every variant alike, it times one forward + backward pass (the gradient of the
output's sum with respect to every parameter, by ``torch.autograd.grad``) as:

    gm(x) + grad                 the GraphModule's own forward, then autograd
    Interpreter + grad           torch.fx.Interpreter(gm).run(x), then autograd
    detect_anomaly               gm(x) + grad under torch.autograd.detect_anomaly()
    record, backward, stats off  fxviz.record(gm, x, backward=True, stats=False)
    record, backward             fxviz.record(gm, x, backward=True)
    record, backward, all read   the same, then every gradient's statistics read (a kept
                                 gradient is summarised when first read)

for the 12-layer GPT-style decoder and the 200-block MLP of models.py, and prints medians,
ratios and the targets they are held to. It first checks that the recorded gradients equal
torch.autograd.grad's exactly.

Run from the repository root:

    .venv/bin/python benchmarks/gradients.py [--repeats N] [--model gpt|mlp|all] [--quick]
        [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.fx

import fxviz

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import add_threads_option, repeats_of, set_threads, target, time_interleaved

# (variant, what it is compared with, largest ratio)
TARGETS = (
    ("record, backward", "Interpreter + grad", 1.5),
    ("record, backward", "detect_anomaly", 1.0),
)


def variants(gm: torch.fx.GraphModule, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    """What is timed, by name; each call runs the forward and the backward pass once."""
    params = [p for p in gm.parameters() if p.requires_grad]

    def backward(out: torch.Tensor) -> object:
        return torch.autograd.grad(out, params, torch.ones_like(out))

    def anomaly() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it warns that it is on, every time
            with torch.autograd.detect_anomaly():
                return backward(gm(x))

    return {
        "gm(x) + grad": lambda: backward(gm(x)),
        "Interpreter + grad": lambda: backward(torch.fx.Interpreter(gm).run(x)),
        "detect_anomaly": anomaly,
        "record, backward, stats off": lambda: fxviz.record(gm, x, backward=True, stats=False),
        "record, backward": lambda: fxviz.record(gm, x, backward=True),
        "record, backward, all read": lambda: read_all(fxviz.record(gm, x, backward=True)),
    }


def read_all(rec: fxviz.Recording) -> fxviz.Recording:
    """Every gradient's statistics, which a recording takes when they are first read."""
    for g in rec.gradients.order:
        _ = g.summary
    return rec


def check_gradients(gm: torch.fx.GraphModule, x: torch.Tensor) -> None:
    """Fail loudly unless the recorded parameter gradients equal torch.autograd.grad's."""
    named = [(n, p) for n, p in gm.named_parameters() if p.requires_grad]
    rec = fxviz.record(gm, x, backward=True)
    out = gm(x)
    expected = torch.autograd.grad(out, [p for _, p in named], torch.ones_like(out))
    for (name, _), want in zip(named, expected, strict=True):
        got = rec.gradients.parameters[name].value
        if not torch.equal(got, want):
            diff = (got - want).abs().max().item()
            raise SystemExit(f"recorded gradient of {name} differs from autograd's ({diff})")


def report(name: str, gm: torch.fx.GraphModule, times: dict[str, list[float]]) -> bool:
    """Print the table and the targets; return whether every target is met."""
    import statistics

    med = {v: statistics.median(ts) for v, ts in times.items()}
    interp = med["Interpreter + grad"]
    print(
        f"\n{name}: {len(gm.graph.nodes)} nodes, {len(times['gm(x) + grad'])} runs each (medians)"
    )
    print(f"  {'variant':<29}{'median ms':>10}{'min ms':>9}{'x Interp':>10}{'x anomaly':>10}")
    for v, m in med.items():
        low = min(times[v]) * 1e3
        ratio_anomaly = m / med["detect_anomaly"]
        print(f"  {v:<29}{m * 1e3:>10.2f}{low:>9.2f}{m / interp:>10.2f}{ratio_anomaly:>10.2f}")
    print("  targets:")
    met = True
    for variant, baseline, limit in TARGETS:
        ratio = med[variant] / med[baseline]
        label = f"<= {limit:.2f}x {baseline.split()[0]}"
        met &= target(variant, label, f"{ratio:.2f}x", ratio <= limit, widths=(29, 24))
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11, help="timed runs of each variant")
    parser.add_argument("--model", choices=("gpt", "mlp", "all"), default="all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny models, 3 runs each (a smoke test)"
    )
    add_threads_option(parser, default=0)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    repeats = repeats_of(args, parser)

    torch.manual_seed(0)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    builders = {"gpt": ("GPT decoder", models.gpt), "mlp": ("MLP", models.mlp)}
    chosen = builders if args.model == "all" else {args.model: builders[args.model]}
    all_met = True
    for title, build in chosen.values():
        model, x = build(quick=args.quick)
        gm = torch.fx.symbolic_trace(model)
        check_gradients(gm, x)
        times = time_interleaved(variants(gm, x), repeats)
        all_met &= report(f"{title}, input {tuple(x.shape)}", gm, times)
    print("\nall targets met" if all_met else "\nsome targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
