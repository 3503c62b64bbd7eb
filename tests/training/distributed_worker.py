"""One rank of the 2-process test (spawned; importable, so not a test module itself)."""

from __future__ import annotations

import json
import pathlib

import torch
import torch.distributed as dist

import fxviz
from tests.training.models import batches, setup


def run(rank: int, world: int, port: int, out: str) -> None:
    """Rank 1 meets a NaN at step 3, rank 0 never does: both must stop at step 3."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        model, opt, train_step, _ = setup("log", seed=rank)
        step = fxviz.watch(train_step, model, opt)
        result = {"rank": rank, "step": None}
        for b in batches(6, 3 if rank == 1 else None, seed=rank):
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            try:
                step(b)
            except fxviz.NonFiniteStep as e:
                unchanged = all(torch.equal(before[n], p) for n, p in model.named_parameters())
                inc = e.incident
                result = {
                    "rank": rank,
                    "step": inc.step,
                    "what": inc.what,
                    "names": list(inc.names),
                    "unchanged": unchanged,
                }
                break
        pathlib.Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
