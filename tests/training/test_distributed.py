"""Under torch.distributed every rank watches; the first rank to fail stops them all."""

from __future__ import annotations

import json
import socket

import pytest
import torch.multiprocessing as mp

from tests.training import distributed_worker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a fresh interpreter (two): imports torch
def test_two_gloo_ranks_stop_at_the_same_step(tmp_path):
    mp.spawn(distributed_worker.run, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["step"] for r in ranks] == [3, 3]
    assert (ranks[1]["what"], ranks[1]["names"][0]) == ("loss", "loss")  # it went bad
    assert (ranks[0]["what"], ranks[0]["names"]) == ("rank", ["rank 1"])  # it was told
    assert all(r["unchanged"] for r in ranks)  # neither applied that step's update
