"""The whole many-process flow in one script (see docs/ranks.md): every rank records, saves
one file, and rank 0 finds where the ranks part.

    python -m torch.distributed.run --standalone --nproc-per-node 2 docs/ranks_example.py OUT

Rank 1 nudges one weight of its replica by 1e-4 (what a missed broadcast or a
nondeterministic kernel does); a tensor-parallel copy of the model is checked against the
single-process model. Rank 0 prints the verdicts and writes two offline HTML pages.
"""

from __future__ import annotations

import pathlib
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import fxviz


def model() -> nn.Module:
    torch.manual_seed(0)  # every rank builds the same replica
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))


def main(out: pathlib.Path) -> None:
    dist.init_process_group("gloo")  # "nccl" on GPUs: the rest is the same
    rank = dist.get_rank()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))

    # 1. Replicas: every rank records the same batch; "{rank}" makes one file a rank.
    replica = model()
    if rank == 1:
        with torch.no_grad():
            replica[2].weight[0, 0] += 1e-4
    rec = fxviz.record(replica, x)
    print(f"rank {rec.rank} of {rec.world_size}: {rec.summary()}")
    rec.save(out / "replica-{rank}.fxrec")

    # 2. Tensor parallel: each rank holds half of each weight; rank 0 also records the
    # single-process model, the reference the shards are checked against.
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    tp = parallelize_module(model(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fxviz.record(tp, x).save(out / "tp-{rank}.fxrec")
    if rank == 0:
        fxviz.record(model(), x).save(out / "reference.fxrec")

    dist.barrier()  # every file is written
    if rank == 0:
        world = range(dist.get_world_size())
        replicas = fxviz.compare_ranks([out / f"replica-{r}.fxrec" for r in world])
        print(replicas.summary())
        print(replicas.table())
        fxviz.report(replicas, out / "replicas.html")
        tp_check = fxviz.compare_ranks(
            [out / f"tp-{r}.fxrec" for r in world], reference=out / "reference.fxrec"
        )
        print(tp_check.summary())
        print(tp_check.table("sqnr_db"))
        fxviz.report(tp_check, out / "tensor-parallel.html")
    dist.destroy_process_group()


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "fxviz-ranks")
    target.mkdir(parents=True, exist_ok=True)
    main(target)
