"""Input specs: parsed safely, made real, fake or meta."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz._shapes import parse_spec


@pytest.mark.parametrize(
    ("text", "shape", "dtype"),
    [
        ("randn(50,1000)", (50, 1000), torch.float32),
        ("randint(0,50257,(2,128))", (2, 128), torch.int64),
        ("randint(10, (3,))", (3,), torch.int64),
        ("zeros(1,3,224,224,dtype=float16)", (1, 3, 224, 224), torch.float16),
        ("ones((4, 8), dtype=torch.bfloat16)", (4, 8), torch.bfloat16),
        ("full((2,2), 0.5)", (2, 2), torch.float32),
        ("rand(size=(3,))", (3,), torch.float32),
    ],
)
def test_parsed_specs_make_the_tensor_they_say(text, shape, dtype):
    spec = parse_spec(text)
    tensor = spec.materialize()
    assert tuple(tensor.shape) == shape
    assert tensor.dtype == dtype
    assert parse_spec(str(spec)) == spec  # str() round-trips


def test_randint_and_full_values():
    ids = parse_spec("randint(5,7,(1000,))").materialize()
    assert int(ids.min()) >= 5
    assert int(ids.max()) <= 6
    assert torch.equal(parse_spec("full((2,),3)").materialize(), torch.full((2,), 3.0))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("__import__('os').system('true')", "must be a call such as"),
        ("eval('1')", "unknown function 'eval'"),
        ("randn(n)", "'n' is not a number"),
        ("randn(2,dtype=floaty)", "unknown dtype 'floaty'"),
        ("randn(2,requires_grad=True)", "unknown keyword 'requires_grad'"),
        ("randn(-1)", "non-negative"),
        ("randn(2", "not a call"),
        ("randn(True,4)", "'True' is not a number"),
        ("randint(5,1,(2,3))", "low < high"),
        ("full((2,),1e400)", "too large for a float"),
        ("randn(2**70)", "is not a number"),
        ("randn(9223372036854775808)", "overflow int64"),
        ("randn(2,device=evil)", "unknown device 'evil'"),
    ],
)
def test_bad_specs_are_refused_with_examples(text, why):
    with pytest.raises(fxviz.SpecError, match="Examples: randn") as info:
        parse_spec(text)
    assert why in str(info.value)
    assert isinstance(info.value, ValueError)


def test_spec_function():
    assert fxviz.spec(2, 3).shape == (2, 3)
    assert fxviz.spec((2, 3), dtype=torch.long).dtype == torch.int64
    assert fxviz.spec(2, 3, dtype=torch.long).materialize().dtype == torch.int64
    assert fxviz.spec(4).materialize("meta").is_meta
    with pytest.raises(fxviz.SpecError, match="non-negative ints"):
        fxviz.spec(2.5)
    with pytest.raises(fxviz.SpecError, match="dtype="):
        fxviz.spec(2, dtype="float")


def test_spec_function_refuses_what_torch_cannot_hold():
    with pytest.raises(fxviz.SpecError, match="overflow int64"):
        fxviz.spec(2**40, 2**40)
    with pytest.raises(fxviz.SpecError, match="unknown device 'evil'"):
        fxviz.spec(2, device="evil")


def test_infinite_and_nan_fills_are_written_by_name():
    spec = parse_spec("full((2,),-inf)")
    assert torch.equal(spec.materialize(), torch.full((2,), float("-inf")))
    assert parse_spec(str(spec)) == spec
    assert parse_spec("full((1,),nan)").materialize().isnan().all()
