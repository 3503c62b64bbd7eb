"""Positional constructors of frozen dataclasses make the very objects the classes make."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import torch

import fxviz
from fxviz._record._frozen import positional_constructor
from fxviz._record._records import NodeRecord, new_node_record
from fxviz._record._summary import TensorSummary


def test_records_and_summaries_read_from_a_recording_are_their_classes_own():
    rec = fxviz.record(
        torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()), torch.ones(2, 3)
    )
    for r in rec.values():
        fields = [getattr(r, f.name) for f in dataclasses.fields(NodeRecord)]
        assert type(r) is NodeRecord
        assert NodeRecord(*fields) == r
        for s in r.outputs:
            values = [getattr(s, f.name) for f in dataclasses.fields(TensorSummary)]
            assert type(s) is TensorSummary
            assert TensorSummary(*values) == s
            assert hash(s) == hash(TensorSummary(*values))
            assert pickle.loads(pickle.dumps(s)) == s
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.name = "other"  # type: ignore[misc]


def test_every_field_is_required_and_only_slotted_classes_are_taken():
    with pytest.raises(TypeError):
        new_node_record(0, "x")

    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: int

    with pytest.raises(TypeError, match="not a slotted dataclass"):
        positional_constructor(Plain)
