"""A node's kept value as a small JSON tree whose leaves name tensors in the file.

A tensor becomes a view (dtype, shape, stride, offset) of a block ``{"t": "tensor",
"key": "s3", ...}``, one block a storage; tuples, lists and dicts keep their
structure; numbers, strings, booleans and ``None`` are stored as they are; anything
else (a ``GraphModule``, a custom object) only as its type name, never pickled.

    >>> import torch
    >>> blocks = Blocks()
    >>> tree = encode_value((torch.ones(2), 3, None), blocks)
    >>> tree["items"][0]
    {'t': 'tensor', 'key': 's0', 'dtype': 'float32', 'shape': [2], 'stride': [1], 'offset': 0}
    >>> decode_value(tree, blocks.blocks.__getitem__)
    (tensor([1., 1.]), 3, None)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

from fxviz._record._rank import local_tensor
from fxviz.errors import RecordingFileError

__all__ = ["STORABLE_DTYPES", "Blocks", "decode_value", "encode_value", "storable"]


def _storable_dtypes() -> frozenset[torch.dtype]:
    """Every dtype whose tensors are plain bytes that fxviz can write and view again
    (complex, float8, bits and unsigned types included; quantized ones need their scale
    and zero point, so they are not)."""
    found = set()
    for dtype in vars(torch).values():
        if not isinstance(dtype, torch.dtype) or str(dtype).startswith("torch.q"):
            continue
        try:
            with warnings.catch_warnings():  # complex32: "experimental"
                warnings.simplefilter("ignore")
                torch.empty(2, dtype=dtype).view(torch.uint8).view(dtype)
        except (RuntimeError, TypeError):
            continue  # sub-byte shells (uint1...int7) have no tensors of their own
        found.add(dtype)
    return frozenset(found)


STORABLE_DTYPES = _storable_dtypes()

_MAX_DEPTH = 32


def storable(t: torch.Tensor) -> bool:
    """Whether ``t``'s values can go into the file (a plain dense tensor of a known dtype)."""
    return (
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout == torch.strided
        and not t.is_meta
        and t.dtype in STORABLE_DTYPES
    )


class Blocks:
    """The distinct memory blocks (storages) behind the tensors to save, each saved once:
    views share their base's block, as ``torch.save`` shares storages."""

    def __init__(self) -> None:
        self.blocks: dict[str, torch.Tensor] = {}  # key -> uint8 tensor over a whole storage
        self._keys: dict[tuple[Any, ...], str] = {}

    def add(self, t: torch.Tensor) -> dict[str, Any]:
        storage = t.untyped_storage()
        ident = (t.device, storage.data_ptr(), storage.nbytes())
        key = self._keys.get(ident)
        if key is None:
            key = self._keys[ident] = f"s{len(self.blocks)}"
            self.blocks[key] = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
        return {
            "t": "tensor",
            "key": key,
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "offset": t.storage_offset(),
        }


def encode_value(value: Any, tensors: Blocks, depth: int = 0) -> dict[str, Any]:
    """The JSON tree of ``value``; its tensors' storages are added to ``tensors``."""
    if isinstance(value, torch.Tensor):
        if not storable(value):
            local = local_tensor(value)  # a DTensor's shard (its layout is saved apart)
            if local is not None and storable(local):
                return tensors.add(local.detach())
            return {"t": "other", "type": f"{type(value).__name__} ({value.dtype}, {value.layout})"}
        return tensors.add(value.detach())
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value} if abs(value) < 2**63 else {"t": "other", "type": "int"}
    if isinstance(value, float):
        return {"t": "float", "v": repr(value)}  # repr keeps nan/inf, which JSON cannot
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, torch.Size):
        return {"t": "size", "items": [int(d) for d in value]}
    if isinstance(value, torch.dtype):
        return {"t": "dtype", "v": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"t": "device", "v": str(value)}
    if depth < _MAX_DEPTH and isinstance(value, (tuple, list)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {"t": kind, "items": [encode_value(v, tensors, depth + 1) for v in value]}
    if depth < _MAX_DEPTH and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {
            "t": "dict",
            "items": [[k, encode_value(v, tensors, depth + 1)] for k, v in value.items()],
        }
    return {"t": "other", "type": type(value).__name__}


def decode_value(tree: Any, tensor: Callable[[str], torch.Tensor], depth: int = 0) -> Any:
    """The value a tree describes; ``tensor(key)`` reads one tensor from the file."""
    if not isinstance(tree, dict) or not isinstance(tree.get("t"), str) or depth > _MAX_DEPTH:
        raise RecordingFileError(f"malformed value in the saved recording: {str(tree)[:80]!r}")
    kind = tree["t"]
    if kind == "tensor":
        return _view(tree, tensor(_field(tree, "key", str)))
    if kind == "none":
        return None
    if kind in ("bool", "int", "str"):
        return _field(tree, "v", {"bool": bool, "int": int, "str": str}[kind])
    if kind == "float":
        text = _field(tree, "v", str)
        try:
            return float(text)
        except ValueError:
            raise RecordingFileError(
                f"malformed float {text[:40]!r} in the saved recording"
            ) from None
    if kind in ("tuple", "list"):
        items = [decode_value(v, tensor, depth + 1) for v in _field(tree, "items", list)]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        out = {}
        for item in _field(tree, "items", list):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise RecordingFileError("malformed dict entry in the saved recording")
            out[item[0]] = decode_value(item[1], tensor, depth + 1)
        return out
    if kind == "size":
        dims = _field(tree, "items", list)
        if not all(type(d) is int and d >= 0 for d in dims):
            raise RecordingFileError("malformed torch.Size in the saved recording")
        return torch.Size(dims)
    if kind == "dtype":
        dtype = getattr(torch, _field(tree, "v", str), None)
        if not isinstance(dtype, torch.dtype):
            raise RecordingFileError("unknown dtype in the saved recording")
        return dtype
    if kind == "device":
        try:
            return torch.device(_field(tree, "v", str))
        except RuntimeError:
            raise RecordingFileError("malformed device in the saved recording") from None
    if kind == "other":
        return NotSaved(_field(tree, "type", str))
    raise RecordingFileError(f"unknown value kind {kind[:40]!r} in the saved recording")


_MAX_NUMEL = 2**34
# A view may repeat its block's bytes (an expanded tensor: stride 0); reading it back
# for a report or a comparison makes it dense, so what that takes is bounded too.
_MAX_DENSE_BYTES = 2**30
_DTYPE_NAMES = {str(d).removeprefix("torch."): d for d in STORABLE_DTYPES}


def _view(tree: dict[str, Any], block: torch.Tensor) -> torch.Tensor:
    """The tensor a leaf describes, over the bytes of its block, bounds checked."""
    dtype = _DTYPE_NAMES.get(_field(tree, "dtype", str))
    shape, stride = _field(tree, "shape", list), _field(tree, "stride", list)
    offset = _field(tree, "offset", int)
    ints = [*shape, *stride, offset]
    if (
        dtype is None
        or len(shape) != len(stride)
        or not all(type(i) is int and i >= 0 for i in ints)
    ):
        raise RecordingFileError(
            f"malformed tensor description in the saved recording: {str(tree)[:120]}"
        )
    numel = math.prod(shape)
    if numel > _MAX_NUMEL:
        raise RecordingFileError(
            f"the saved recording declares a tensor of {numel:,} elements: refused"
        )
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    size = dtype.itemsize
    last = offset + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))
    if (
        block.dtype != torch.uint8
        or block.dim() != 1
        or (last + 1) * size > block.numel()
        or block.numel() % size
    ):
        raise RecordingFileError(
            f"the saved recording is corrupted: a tensor of shape {shape} reaches past the "
            f"{block.numel():,} bytes of its block {tree.get('key')!r}"
        )
    dense = numel * size
    if dense > max(block.numel(), _MAX_DENSE_BYTES):
        raise RecordingFileError(
            f"the saved recording declares a tensor of shape {shape} (stride {stride}) over "
            f"{block.numel():,} bytes: reading it would take {dense:,} bytes, more than "
            f"fxviz reads back from a file ({_MAX_DENSE_BYTES:,}): refused"
        )
    typed = block.view(dtype)
    return typed.as_strided(shape, stride, typed.storage_offset() + offset)


class NotSaved:
    """Stands for a value that could not be stored (only its type is known)."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<not saved: {self.type_name}>"


def _field(tree: dict[str, Any], key: str, kind: type) -> Any:
    value = tree.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordingFileError(
            f"malformed value in the saved recording: {key!r} should be {kind.__name__}"
        )
    return value
