"""Saving, loading and comparing recordings of a 12-layer GPT, side by side with torch.save.

For a recording that kept every value (``keep="all"``), it times, interleaved so that a
noisy, shared machine slows both alike:

    torch.save         torch.save of the recording's tensors (a dict, one file)
    Recording.save     the whole recording: graph, records and the same tensors

then the file's size against the raw bytes of those tensors, ``fxviz.load`` (values not
touched), and ``fxviz.compare`` of two loaded recordings (fp32 against bf16, every value
read from the files and measured in float64). It prints medians, ratios and the targets.

Run from the repository root:

    .venv/bin/python benchmarks/save_compare.py [--repeats N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

import fxviz
from fxviz._record._summary import iter_tensors

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py sits next to this file
import models
from _harness import target, time_interleaved

SAVE_RATIO_TARGET = 1.2  # Recording.save / torch.save
SIZE_RATIO_TARGET = 1.05  # file bytes / raw tensor bytes
LOAD_TARGET_S = 0.2
COMPARE_TARGET_S = 1.0


def tensors_of(rec: fxviz.Recording) -> dict[str, torch.Tensor]:
    """Every kept tensor, by node and path (what a Recording.save writes as values)."""
    return {
        f"{r.name}{path}": t for r in rec.values() if r.kept for path, t in iter_tensors(r.value)
    }


def median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each function, interleaved, after a warm-up."""
    return {name: statistics.median(ts) for name, ts in time_interleaved(fns, repeats).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each variant")
    parser.add_argument("--quick", action="store_true", help="a tiny GPT, 2 runs (smoke test)")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    torch.manual_seed(0)
    print(
        f"fxviz {fxviz.__version__}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    model, ids = models.gpt(quick=args.quick)
    with torch.no_grad():
        cmp_live = fxviz.compare_dtype(model, ids, dtype=torch.bfloat16)
    rec = cmp_live.a
    tensors = tensors_of(rec)
    raw = sum(t.numel() * t.element_size() for t in tensors.values())
    storages = {
        (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in tensors.values()
    }
    distinct = sum(nbytes for _, nbytes in storages)  # views share their base's memory
    print(
        f"GPT, input {tuple(ids.shape)}: {len(rec)} nodes, {len(tensors)} kept tensors, "
        f"{raw / 2**20:.1f} MiB of values"
    )
    with tempfile.TemporaryDirectory() as folder:
        ours, theirs = Path(folder) / "run.fxrec", Path(folder) / "tensors.pt"
        saves = median_times(
            {
                "torch.save": lambda: torch.save(tensors, theirs),
                "Recording.save": lambda: rec.save(ours),
            },
            repeats,
        )
        size = ours.stat().st_size
        other = cmp_live.b.save(Path(folder) / "bf16.fxrec")
        load_s = median_times({"load": lambda: fxviz.load(ours)}, repeats)["load"]

        def compare_loaded() -> object:
            return fxviz.compare(fxviz.load(ours), fxviz.load(other))

        compare_s = median_times({"compare": compare_loaded}, repeats)["compare"]
        cmp = compare_loaded()
        assert cmp.table().equals(cmp_live.table()), "a loaded pair compares differently"
        loaded = fxviz.load(ours)
        assert all(
            torch.equal(loaded[r.name].value, r.value)
            for r in rec.values()
            if isinstance(r.value, torch.Tensor)
        )

    save_ratio = saves["Recording.save"] / saves["torch.save"]
    size_ratio = size / raw
    print(f"  {'':<22}{'median ms':>10}")
    for name, seconds in saves.items():
        print(f"  {name:<22}{seconds * 1e3:>10.1f}")
    print(f"  {'fxviz.load':<22}{load_s * 1e3:>10.1f}")
    print(f"  {'fxviz.compare (loaded)':<22}{compare_s * 1e3:>10.1f}   {cmp.summary()}")
    print(f"  file {size / 2**20:.2f} MiB, tensors {raw / 2**20:.2f} MiB ({distinct / 2**20:.2f} MiB "
          f"of distinct storages), torch.save file "
          f"{theirs_size(tensors) / 2**20:.2f} MiB")  # fmt: skip
    print("  targets:")
    met = target(
        "save vs torch.save",
        f"<= {SAVE_RATIO_TARGET:.2f}x",
        f"{save_ratio:.2f}x",
        save_ratio <= SAVE_RATIO_TARGET,
    )
    met &= target(
        "file vs tensor bytes",
        f"<= {SIZE_RATIO_TARGET:.2f}x",
        f"{size_ratio:.3f}x",
        size_ratio <= SIZE_RATIO_TARGET,
    )
    exact = size / distinct
    met &= target("file vs their memory", f"<= {SIZE_RATIO_TARGET:.2f}x", f"{exact:.3f}x", exact <= SIZE_RATIO_TARGET)  # fmt: skip
    met &= target("load", f"<= {LOAD_TARGET_S:.1f} s", f"{load_s:.3f} s", load_s <= LOAD_TARGET_S)
    met &= target("compare two loaded", f"<= {COMPARE_TARGET_S:.1f} s", f"{compare_s:.3f} s", compare_s <= COMPARE_TARGET_S)  # fmt: skip
    print("\nall targets met" if met else "\nsome targets NOT met")
    return 0


def theirs_size(tensors: dict[str, torch.Tensor]) -> int:
    """Bytes torch.save writes for ``tensors`` (views save their whole storage)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.pt"
        torch.save(tensors, path)
        return path.stat().st_size


if __name__ == "__main__":
    sys.exit(main())
