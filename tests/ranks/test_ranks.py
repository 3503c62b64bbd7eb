"""compare_ranks on real process groups: gloo jobs of 2 and 4 ranks on this machine.

Each job is started once a module (forked from this process, which has torch imported
already: no second import per rank) and runs every scenario of ``rank_job.py``; the tests
then read the files and facts it left.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

import fxviz
from fxviz._ranks import RankComparison

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job(out: pathlib.Path, job: str, world: int) -> dict[int, dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    try:
        import rank_job
    finally:
        sys.path.remove(str(HERE))
    init = f"tcp://127.0.0.1:{_free_port()}"
    mp.start_processes(
        rank_job.forked, args=(out, job, world, init), nprocs=world, start_method="fork"
    )
    facts = {r: json.loads((out / f"facts-{job}-{r}.json").read_text()) for r in range(world)}
    for rank, seen in facts.items():
        errors = {k: v for k, v in seen.items() if k.startswith("error:")}
        assert not errors, f"rank {rank}: {errors}"
    return facts


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict[int, Any]]:
    out = tmp_path_factory.mktemp("two")
    return out, _job(out, "two", 2)


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict[int, Any]]:
    out = tmp_path_factory.mktemp("four")
    return out, _job(out, "four", 4)


def _files(out: pathlib.Path, name: str, world: int = 2) -> list[pathlib.Path]:
    return [out / f"{name}-{r}.fxrec" for r in range(world)]


def test_a_recording_knows_its_rank_live_and_saved(two: Any) -> None:
    out, facts = two
    for rank in (0, 1):
        assert facts[rank]["rank"] == rank
        assert facts[rank]["world_size"] == 2
        assert facts[rank]["groups"] == [{"name": "0", "ranks": [0, 1], "backend": "gloo"}]
        assert f"rank {rank} of 2" in "".join(facts[rank]["title"])
        loaded = fxviz.load(out / f"same-{rank}.fxrec")  # "{rank}" in the path was filled
        assert (loaded.rank, loaded.world_size) == (rank, 2)
        assert loaded.process_groups[0]["ranks"] == [0, 1]
    plain = fxviz.record(torch.nn.ReLU(), torch.ones(2))  # no process group here
    assert (plain.rank, plain.world_size, plain.process_groups) == (None, None, ())


def test_replicas_agree_bitwise_and_a_nudged_weight_is_named(two: Any) -> None:
    out, _ = two
    same = fxviz.compare_ranks(_files(out, "same"))
    assert same.first_divergence is None
    assert same.ranks == [0, 1]
    assert same.table().loc["_2", 1] == 0.0
    nudged = fxviz.compare_ranks(str(out / "nudged-*.fxrec"))  # a pattern, or a list
    first = nudged.first_divergence
    assert first is not None
    assert (first.rank, first.node, first.kind) == (1, "_2", "value")
    assert 60 < first.metrics.sqnr_db < 120  # far above compare's 30 dB floor
    assert fxviz.compare(*map(fxviz.load, _files(out, "nudged"))).first_divergence is None
    table = nudged.table("diverged")
    assert not table.loc["_0", 1]
    assert table.loc["_2", 1]
    assert "rank 1 parts first at '_2'" in nudged.summary()


def test_four_ranks_name_the_odd_one_out(four: Any) -> None:
    out, facts = four
    assert [facts[r]["rank"] for r in range(4)] == [0, 1, 2, 3]
    result = fxviz.compare_ranks(_files(out, "nudged", 4))
    assert result.first_divergence is not None
    assert (result.first_divergence.rank, result.first_divergence.ranks) == (2, (2,))
    assert list(result.table().columns) == [0, 1, 2, 3]
    assert fxviz.compare_ranks(_files(out, "same", 4)).first_divergence is None


def test_ddp_step_replicas_and_their_gradients(two: Any) -> None:
    out, _ = two
    healthy = _files(out, "ddp")
    assert fxviz.compare_ranks(healthy).first_divergence is None
    grads = fxviz.compare_ranks(healthy, backward=True)
    assert grads.first_divergence is None
    assert "0.weight" in grads.nodes
    bad = _files(out, "ddpbad")  # the comm hook corrupted rank 1's averaged gradients
    values = fxviz.compare_ranks(bad)
    assert (values.first_divergence.rank, values.first_divergence.node) == (1, "_0")
    backward = fxviz.compare_ranks(bad, backward=True).first_divergence
    assert backward is not None
    assert backward.rank == 1
    assert backward.kind == "grad"


def test_tensor_parallel_mlp_compares_with_its_single_process_reference(two: Any) -> None:
    out, _ = two
    reference = out / "tp-ref.fxrec"
    shard = fxviz.compare(fxviz.load(reference), fxviz.load(out / "tp-1.fxrec"))
    assert shard.first_divergence.reason == "shape 8×32 vs 8×16"  # plain compare cannot
    for name in ("tp", "tpd"):  # local outputs (shapes infer the shards), DTensor outputs
        result = fxviz.compare_ranks(_files(out, name), reference=reference)
        assert result.first_divergence is None, result.summary()
        sqnr = result.table("sqnr_db")
        assert (sqnr.loc[["_0", "_1", "_2", "output"]] > 100).all().all()
    layout = fxviz.load(out / "tpd-1.fxrec").distributed_nodes["_0"]["layout"]
    assert layout["placements"] == ["Shard(dim=1)"]
    assert layout["shape"] == [8, 32]
    assert layout["local_shape"] == [8, 16]
    assert layout["mesh"] == [0, 1]
    assert layout["stats_of"] == "local shard"
    shard = fxviz.load(out / "tpd-1.fxrec")["_0"].value  # the saved value: rank 1's shard
    assert layout["stats"]["max"] == pytest.approx(float(shard.max()))
    assert fxviz.load(out / "tpd-1.fxrec").distributed_nodes["_2"]["layout"]["stats_of"] == "global"
    bad = fxviz.compare_ranks(_files(out, "tpbad"), reference=reference)
    assert (bad.first_divergence.rank, bad.first_divergence.node) == (1, "_0")
    assert not bad["_0", 0].diverged  # rank 0's shard still matches its slice


def test_dtensor_redistributions_are_collective_nodes(two: Any) -> None:
    _, facts = two
    seen = facts[1]["dynamo_tp"]  # the tensor-parallel MLP captured by Dynamo
    assert seen["collectives"] == ["outputs", "outputs_1"]  # one graph: its own names
    reduce = seen["nodes"]["outputs_1"]["collective"]  # RowwiseParallel's all-reduce
    assert reduce == {
        "collective": "redistribute",
        "namespace": "DTensor",
        "from": ["Partial(sum)"],
        "to": ["Replicate()"],
        "ranks": [0, 1],
    }
    partial = seen["nodes"]["linear_1"]["layout"]
    assert partial["placements"] == ["Partial(sum)"]
    assert partial["stats_of"] == "local shard"


def test_tensor_parallel_transformer_block(two: Any) -> None:
    out, _ = two
    result = fxviz.compare_ranks(_files(out, "block"), reference=out / "block-ref.fxrec")
    assert result.first_divergence is None, result.summary()
    sqnr = result.table("sqnr_db")
    assert sqnr.loc["scaled_dot_product_attention"].min() > 100  # each rank's heads
    assert sqnr.loc["output"].min() > 100


def test_collectives_are_nodes_with_group_ranks_and_reduce_op(two: Any) -> None:
    out, facts = two
    assert facts[0]["collective"]["name"] == "all_reduce"
    assert facts[0]["collective"]["time_s"] > 0
    assert facts[0]["collective_dot"] is True
    assert facts[0]["output"] == [[7.0] * 3] * 2  # (1 + 2) * 2 + 1: the sum over ranks
    loaded = fxviz.load(out / "coll-1.fxrec")
    info = loaded.distributed_nodes["all_reduce"]["collective"]
    assert info == {
        "collective": "all_reduce",
        "namespace": "_c10d_functional",
        "reduce_op": "sum",
        "group": "0",
        "ranks": [0, 1],
    }
    assert 'class="fx-node kind-collective"' in fxviz.to_dot(loaded).source
    result = fxviz.compare_ranks(_files(out, "coll"))  # each rank's input differs...
    assert result.first_divergence.node == "x"
    assert not result["add", 1].diverged  # ...and the all-reduce makes them agree


def test_debugger_steps_in_every_rank(two: Any) -> None:
    _, facts = two
    assert [facts[r]["debugger"] for r in (0, 1)] == [
        {"rank": 0, "complete": True},
        {"rank": 1, "complete": True},
    ]


def test_fsdp2_fully_shard(two: Any) -> None:
    out, facts = two
    if not facts[0]["fsdp"].startswith("recorded"):
        pytest.xfail(f"FSDP2 on CPU/gloo could not be recorded: {facts[0]['fsdp'][:200]}")
    result = fxviz.compare_ranks(_files(out, "fsdp"))
    assert result.first_divergence is None
    assert result["linear_1", 1].reason == "bitwise equal"  # gathered weights, same math


def test_drawing_report_and_cli(two: Any, tmp_path: pathlib.Path) -> None:
    out, _ = two
    result = fxviz.compare_ranks(_files(out, "nudged"))
    dot = fxviz.to_dot(result).source
    assert "ranks-first" in dot
    assert "rank 1 parts here" in dot
    assert "r1 =" in dot
    page = tmp_path / "ranks.html"
    fxviz.report(result, page)
    assert "Where the ranks part" in page.read_text()
    from fxviz.cli import main

    files = [str(p) for p in _files(out, "nudged")]
    assert main(["compare-ranks", *files, "-o", str(tmp_path / "a.html")]) == 1
    same = [str(p) for p in _files(out, "same")]
    assert main(["compare-ranks", *same, "-o", str(tmp_path / "b.html")]) == 0
    ref = str(out / "tp-ref.fxrec")
    tp = [str(p) for p in _files(out, "tpbad")]
    assert main(["compare-ranks", *tp, "--reference", ref, "-o", str(tmp_path / "c.html")]) == 1
    assert "rank 1 parts first at '_0'" in (tmp_path / "c.html").read_text()


@pytest.mark.slow
def test_the_example_runs_as_a_torch_distributed_run_job(tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    example = ROOT / "docs" / "ranks_example.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", str(example), str(tmp_path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rank 1 of 2:" in done.stdout
    assert "rank 1 parts first at '_2'" in done.stdout  # the nudged replica
    assert "the ranks agree everywhere" in done.stdout  # tensor parallel vs the reference
    for page in ("replicas.html", "tensor-parallel.html"):
        assert "Where the ranks part" in (tmp_path / page).read_text()
    cli = [sys.executable, "-m", "fxviz", "compare-ranks", *map(str, _files(tmp_path, "replica"))]
    done = subprocess.run([*cli, "-o", str(tmp_path / "p.html")], env=env, capture_output=True)
    assert done.returncode == 1, done.stderr[-2000:]  # the ranks part: exit code 1


def test_bad_input_says_what_to_do(tmp_path: pathlib.Path) -> None:
    rec = fxviz.record(torch.nn.ReLU(), torch.ones(2))
    with pytest.raises(fxviz.InputError, match="no file matches"):
        fxviz.compare_ranks(str(tmp_path / "run-*.fxrec"))
    with pytest.raises(fxviz.InputError, match="at least two ranks"):
        fxviz.compare_ranks([rec])
    twin = fxviz.record(torch.nn.ReLU(), torch.ones(2))
    twin.rank = rec.rank = 0
    with pytest.raises(fxviz.InputError, match="two recordings of rank 0"):
        fxviz.compare_ranks([rec, twin])
    with pytest.raises(fxviz.InputError, match=r"recordings or \.fxrec paths"):
        fxviz.compare_ranks([rec, 3])
    rec.rank = None
    with pytest.raises(fxviz.InputError, match="unknown metric"):
        fxviz.compare_ranks([rec, twin], metric="close")
    twin.rank = 1
    result = fxviz.compare_ranks([rec, twin])
    assert isinstance(result, RankComparison)
    assert result.first_divergence is None
    with pytest.raises(fxviz.InputError, match="unknown table value"):
        result.table("snr")
    with pytest.raises(fxviz.InputError, match="no gradients"):
        fxviz.compare_ranks([rec, twin], backward=True)


def test_values_not_kept_are_said_not_missing() -> None:
    model, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    a, b = fxviz.record(model, x, keep="stats"), fxviz.record(model, x, keep="stats")
    a.rank, b.rank = 0, 1
    result = fxviz.compare_ranks([a, b])
    assert result.first_divergence is None
    assert result["linear", 1].reason == "value not kept"


def test_layouts_slice_the_reference_as_dtensor_does() -> None:
    from fxviz._ranks._layout import expected_shard, infer_layout

    ref = torch.arange(10.0).reshape(2, 5)
    assert infer_layout((2, 5), {0: (2, 3), 1: (2, 2)}) == {
        "placements": ["Shard(dim=1)"],
        "mesh": [0, 1],
        "inferred": True,
    }
    assert infer_layout((2, 5), {0: (2, 5), 1: (2, 5)})["placements"] == ["Replicate()"]
    assert infer_layout((2, 5), {0: (1, 3), 1: (1, 2)}) is None  # two dimensions differ
    mesh_2x2 = {"placements": ["Shard(dim=0)", "Shard(dim=1)"], "mesh": [[0, 1], [2, 3]]}
    assert expected_shard(ref, mesh_2x2, 3).tolist() == [[8.0, 9.0]]  # row 1, columns 3:5
    assert expected_shard(ref, {"placements": ["Partial(sum)"], "mesh": [0, 1]}, 1) == "partial"
    assert expected_shard(ref, {"placements": ["Replicate()"], "mesh": [0, 1]}, 7) is None
