"""One rank of the test jobs (run by ``python -m torch.distributed.run``): records real
distributed runs and saves one file a rank, plus what each rank saw, for the tests.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/ranks/rank_job.py OUT two

(the tests fork the ranks from their own process instead: ``forked``)
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """A small pre-norm transformer block (attention + MLP), heads as ``-1`` so a
    tensor-parallel copy runs its own share of the heads."""

    def __init__(self, d: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.hd = d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        y = self.ln1(x)
        q = self.q(y).view(b, t, -1, self.hd).transpose(1, 2)
        k = self.k(y).view(b, t, -1, self.hd).transpose(1, 2)
        v = self.v(y).view(b, t, -1, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))


def replicas(out: pathlib.Path, rank: int, facts: dict[str, Any]) -> None:
    """Data-parallel replicas: identical, then with rank ``world - 2``'s weight nudged."""
    import fxviz

    model, x = mlp(), torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    rec = fxviz.record(model, x)
    facts["rank"], facts["world_size"] = rec.rank, rec.world_size
    facts["groups"] = list(rec.process_groups)
    facts["title"] = fxviz.to_dot(rec).source.split("\n", 3)[:3]
    rec.save(out / "same-{rank}.fxrec")
    if rank == dist.get_world_size() - 2:
        with torch.no_grad():
            model[2].weight[0, 0] += 1e-4  # SQNR about 68 dB: "same" by compare's default
    fxviz.record(model, x).save(out / "nudged-{rank}.fxrec")


def ddp_step(out: pathlib.Path, rank: int, facts: dict[str, Any]) -> None:
    """A DDP training step (each rank its own batch), with a comm hook that corrupts the
    averaged gradients on rank 1 in the second run; then every rank records the same
    batch with gradients."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    import fxviz

    def bad_hook(state, bucket):  # type: ignore[no-untyped-def]
        # (no annotations: DDP checks that `bucket` is annotated dist.GradBucket or not at all)
        buffer = bucket.buffer().div_(dist.get_world_size())
        future = dist.all_reduce(buffer, async_op=True).get_future()

        def then(f):  # type: ignore[no-untyped-def]
            reduced = f.value()[0]
            return reduced.add_(1e-3) if rank == 1 else reduced

        return future.then(then)

    for name, hook in (("ddp", None), ("ddpbad", bad_hook)):
        ddp = DDP(mlp())
        if hook is not None:
            ddp.register_comm_hook(None, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        batch = torch.randn(8, 16, generator=torch.Generator().manual_seed(10 + rank))
        ddp(batch).square().mean().backward()
        opt.step()
        probe = torch.randn(4, 16, generator=torch.Generator().manual_seed(2))
        fxviz.record(ddp.module, probe, backward=True).save(out / f"{name}-{{rank}}.fxrec")


def tensor_parallel(out: pathlib.Path, rank: int, facts: dict[str, Any]) -> None:
    """An MLP and a transformer block with parallelize_module, and their references."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    import fxviz
    from fxviz._record._rank import distributed_nodes
    from fxviz.render import draw

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    if rank == 0:
        fxviz.record(mlp(), x).save(out / "tp-ref.fxrec")
    plans = {
        "tp": {"0": ColwiseParallel(), "2": RowwiseParallel()},
        "tpd": {
            "0": ColwiseParallel(use_local_output=False),
            "2": RowwiseParallel(use_local_output=False),
        },
    }
    for name, plan in plans.items():
        rec = fxviz.record(parallelize_module(mlp(), mesh, plan), x)
        rec.save(out / f"{name}-{{rank}}.fxrec")
    tp = parallelize_module(mlp(), mesh, plans["tp"])
    rec = fxviz.record(fxviz.trace(tp, x, method="dynamo"), x)  # DTensor's own steps as nodes
    facts["dynamo_tp"] = {
        "nodes": distributed_nodes(rec),
        "collectives": sorted(n.name for n in draw(rec).nodes if n.kind == "collective"),
    }
    if rank == 1:
        with torch.no_grad():
            tp[0].weight.to_local()[3, 5] += 0.5  # one rank's shard of the first weight
    fxviz.record(tp, x).save(out / "tpbad-{rank}.fxrec")

    torch.manual_seed(4)
    block = Block()
    xb = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(5))
    if rank == 0:
        fxviz.record(block, xb).save(out / "block-ref.fxrec")
    block_plan = {n: ColwiseParallel() for n in ("q", "k", "v", "up")}
    block_plan |= {"o": RowwiseParallel(), "down": RowwiseParallel()}
    parallelize_module(block, mesh, block_plan)
    fxviz.record(block, xb).save(out / "block-{rank}.fxrec")


def collectives(out: pathlib.Path, rank: int, facts: dict[str, Any]) -> None:
    """A functional collective in a captured graph, and the Debugger in every rank."""
    import torch.distributed._functional_collectives as funcol

    import fxviz

    def f(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

    x = torch.full((2, 3), float(rank + 1))
    rec = fxviz.record(f, x)
    coll = next(r for r in rec.values() if "all_reduce" in r.target)
    facts["collective"] = {"name": coll.name, "time_s": coll.time_s, "target": coll.target}
    facts["collective_dot"] = "kind-collective" in fxviz.to_dot(rec).source
    facts["output"] = rec["output"].value.tolist()
    rec.save(out / "coll-{rank}.fxrec")

    dbg = fxviz.Debugger(fxviz.trace(f, x), x)
    dbg.step()
    dbg.continue_()
    facts["debugger"] = {"rank": dbg.recording.rank, "complete": dbg.recording.complete}


def fsdp(out: pathlib.Path, rank: int, facts: dict[str, Any]) -> None:
    """FSDP2 on CPU and gloo. With the default ``reshard_after_forward=True`` the
    parameters' storage is freed after the forward, so a replay of the captured run
    cannot read them; kept unsharded (and gathered by one warm-up forward), the model
    records through one real run's trace (FSDP's hooks fail symbolic_trace and export,
    and Dynamo captures no graph of them)."""
    try:
        from torch.distributed.fsdp import fully_shard

        import fxviz

        model = mlp()
        for layer in (model[0], model[2], model):
            fully_shard(layer, reshard_after_forward=False)
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(6))
        model(x)
        rec = fxviz.record(fxviz.trace(model, x, method="real"), x)
        rec.save(out / "fsdp-{rank}.fxrec")
        facts["fsdp"] = f"recorded with {rec.method}: {rec.summary()}"
    except Exception as e:  # torch's CPU/gloo support for FSDP2 varies between releases
        facts["fsdp"] = f"failed: {type(e).__name__}: {str(e)[:300]}"


JOBS = {
    "two": (replicas, ddp_step, tensor_parallel, collectives, fsdp),
    "four": (replicas,),
}


def run(
    out: pathlib.Path,
    job: str,
    rank: int | None = None,
    world: int | None = None,
    init_method: str | None = None,
) -> None:
    """Run ``job`` in this rank (a torch.distributed.run worker when ``rank`` is None)."""
    if rank is None:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    rank = dist.get_rank()
    facts: dict[str, Any] = {}
    for part in JOBS[job]:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            part(out, rank, facts)
        except Exception:
            facts[f"error:{part.__name__}"] = traceback.format_exc()
        facts[f"seconds:{part.__name__}"] = (time.perf_counter() - start, time.process_time() - cpu)
        dist.barrier()
    (out / f"facts-{job}-{rank}.json").write_text(json.dumps(facts, default=str))
    dist.destroy_process_group()


def forked(rank: int, out: pathlib.Path, job: str, world: int, init_method: str) -> None:
    """Entry point of ``torch.multiprocessing.start_processes`` (fork: torch is imported)."""
    torch.set_num_threads(1)
    run(out, job, rank, world, init_method)


if __name__ == "__main__":
    run(pathlib.Path(sys.argv[1]), sys.argv[2])
