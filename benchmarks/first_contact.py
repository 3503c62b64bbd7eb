"""A person's first contact, in fresh processes: CPU time of the first ``fxviz.record`` of a
4-layer GPT-2 and of the first ``fxviz.debug`` of a 2-layer Qwen3 (the kernel's share).

Each figure needs a process of its own (captures are kept per model and ``auto`` remembers
the method per class). The process's CPU time is what a busy, shared machine moves least;
torch runs at one thread, so on a quiet machine it is the wall time too (printed beside).
The Qwen3 is opened the way ``benchmarks/widget.py`` opens it: after one small debugger
(so the widget's modules are imported), up to its mime bundle (what the front end gets);
``again`` is a second call on the same model and inputs (the capture re-used). Each call
starts after a ``gc.collect()`` (as benchmarks/_harness.py's loop), so a full collection
left over by earlier work is not charged to it. The browser's share of the widget's first
paint is in ``benchmarks/widget.py --debug-only``.

``--against DIR`` times another checkout too (e.g. a worktree of main), each run in its own
process, interleaved (this, other, this, other ...).

Run from the repository root:

    .venv/bin/python benchmarks/first_contact.py [--repeats N] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"gpt2": 1.0, "qwen3": 1.5}  # s; Qwen3's is the whole first paint (kernel + browser)

CHILD = """
import gc, json, sys, time, warnings
import torch
torch.set_num_threads(1)
import fxviz
import transformers as tf

warnings.simplefilter("ignore")
torch.manual_seed(0)
out = {}
if WHICH == "gpt2":  # as benchmarks/targets.py's first_record_child
    config = tf.GPT2Config(vocab_size=1000, n_layer=4, n_embd=64, n_head=2, n_positions=64,
                           bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 1000, (1, 16))
    model = tf.GPT2LMHeadModel(config).eval()
    run = lambda: fxviz.record(model, input_ids=ids, attention_mask=torch.ones_like(ids),
                               progress=False)
else:  # as benchmarks/widget.py's QWEN3 and QWEN3_DEBUG
    from torch import nn
    config = tf.Qwen3Config(vocab_size=96, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=64, pad_token_id=0, bos_token_id=0,
                            eos_token_id=0)
    model = tf.Qwen3ForCausalLM(config).eval()
    ids = torch.randint(1, 96, (1, 6))
    small = nn.Sequential(nn.Linear(1000, 100), nn.ReLU(), nn.Linear(100, 10))
    fxviz.debug(small, torch.randn(64, 1000))._repr_mimebundle_()
    run = lambda: fxviz.debug(model, input_ids=ids,
                              attention_mask=torch.ones_like(ids))._repr_mimebundle_()
for key in ("first", "again"):
    gc.collect()  # each call starts with the same heap: no collection left over from before
    c, t = time.process_time(), time.perf_counter()
    run()
    out[key + "_cpu"], out[key + "_wall"] = time.process_time() - c, time.perf_counter() - t
print("RESULT " + json.dumps(out))
"""


def run_child(tree: Path, which: str) -> dict[str, float]:
    """One fresh process importing fxviz from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    code = CHILD.replace("WHICH", repr(which))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="processes per checkout and model")
    parser.add_argument("--against", type=Path, help="another checkout, timed interleaved")
    args = parser.parse_args(argv)
    trees = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    start_load = os.getloadavg()[0]
    for r in range(args.repeats):
        for which in TARGETS:
            for name, tree in trees.items():
                rows.setdefault((which, name), []).append(run_child(tree, which))
        print(f"  round {r + 1} done (load {os.getloadavg()[0]:.2f})", flush=True)
    print(
        f"\n  {'model':<7}{'checkout':<10}{'runs':>5}{'first cpu':>11}{'wall':>7}{'again cpu':>11}"
    )
    for (which, name), runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"  {which:<7}{name:<10}{len(runs):>5}{med['first_cpu']:>10.2f}s"
              f"{med['first_wall']:>6.2f}s{med['again_cpu']:>10.2f}s")  # fmt: skip
    print("  targets (this checkout, first call, CPU):")
    for which, limit in TARGETS.items():
        value = statistics.median(r["first_cpu"] for r in rows[which, "this"])
        part = " (kernel's share only)" if which == "qwen3" else ""
        verdict = "met" if value <= limit else "NOT MET"
        print(f"    {which} <= {limit:.1f} s{part}  measured {value:.2f} s  {verdict}")
    print(f"  load average {start_load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
