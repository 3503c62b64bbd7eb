"""A node's kept value as a small JSON tree whose leaves name tensors in the file.

A tensor becomes a view (dtype, shape, stride, offset) of a block ``{"t": "tensor",
"key": "s3", ...}``, one block a storage, and carries ``"ref"``, the number of the tensor
object in the file: one object kept at two places (a model output holding a tensor twice)
loads as one object at both, while two views of one storage load as two tensors over one
block (files written before ``"ref"`` load each leaf as a tensor of its own); tuples, lists
and dicts keep their
structure; numbers, strings, booleans and ``None`` are stored as they are; anything
else (a ``GraphModule``, a custom object) only as its type name, never pickled.

    >>> import torch
    >>> blocks = Blocks()
    >>> tree = encode_value((torch.ones(2), 3, None), blocks)
    >>> tree["items"][0]
    {'t': 'tensor', 'key': 's0', 'dtype': 'float32', 'shape': [2], 'stride': [1], 'offset': 0, 'ref': 0}
    >>> decode_value(tree, blocks.blocks.__getitem__)
    (tensor([1., 1.]), 3, None)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, cast

import torch

from fxviz._record._rank import local_tensor
from fxviz._torch_compat import functorch_unwrapped
from fxviz.errors import RecordingFileError

__all__ = ["STORABLE_DTYPES", "Blocks", "Reader", "decode_value", "encode_value", "storable"]


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
    views share their base's block, as ``torch.save`` shares storages. It also numbers
    the distinct tensor objects (one file, one numbering): the same object gets the
    same leaf wherever it is kept."""

    def __init__(self) -> None:
        self.blocks: dict[str, torch.Tensor] = {}  # key -> uint8 tensor over a whole storage
        self._keys: dict[tuple[Any, ...], str] = {}
        # id(tensor) -> (the tensor, held so its id is not reused while saving; its leaf)
        self._leaves: dict[int, tuple[torch.Tensor, dict[str, Any]]] = {}
        self._refs = 0

    def leaf(self, t: torch.Tensor) -> dict[str, Any]:
        """The leaf of the tensor object ``t``: made once, then the same leaf again."""
        known = self._leaves.get(id(t))
        if known is None:
            tree = _tensor_leaf(t, self)
            if tree["t"] == "tensor":
                tree["ref"], self._refs = self._refs, self._refs + 1
            known = self._leaves[id(t)] = (t, tree)
        return known[1]

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


def _tensor_leaf(value: torch.Tensor, tensors: Blocks) -> dict[str, Any]:
    value = functorch_unwrapped(value)  # a vmap'd value: saved as what it holds
    if not storable(value):
        local = local_tensor(value)  # a DTensor's shard (its layout is saved apart)
        if local is not None and storable(local):
            return tensors.add(local.detach())
        return {"t": "other", "type": f"{type(value).__name__} ({value.dtype}, {value.layout})"}
    return tensors.add(value.detach())


def encode_value(value: Any, tensors: Blocks, depth: int = 0) -> dict[str, Any]:
    """The JSON tree of ``value``; its tensors' storages are added to ``tensors``."""
    if isinstance(value, torch.Tensor):
        return tensors.leaf(value)
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
        tree: dict[str, Any] = {
            "t": "dict",
            "items": [[k, encode_value(v, tensors, depth + 1)] for k, v in value.items()],
        }
        if type(value) is not dict:  # a library's output (a ModelOutput): typed, with fields
            tree["type"] = _qualified(type(value))
            tree["attrs"] = _attributes(value, tensors, depth)
        return tree
    if depth < _MAX_DEPTH and type(value) is dict and all(type(k) in _KEYS for k in value):
        # keyed by numbers (a Mamba cache layer's states by index): keys encoded too
        return {
            "t": "map",
            "items": [
                [encode_value(k, tensors), encode_value(v, tensors, depth + 1)]
                for k, v in value.items()
            ],
        }
    if depth < _MAX_DEPTH and _plain_object(value):  # a cache: its attributes, typed
        return {
            "t": "object",
            "type": _qualified(type(value)),
            "attrs": _attributes(value, tensors, depth),
        }
    return {"t": "other", "type": type(value).__name__}


_KEYS = (str, int, bool, float, type(None))


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _plain_object(value: Any) -> bool:
    """An instance of a Python class that keeps its state in ``__dict__`` (a Hugging Face
    ``DynamicCache`` and its layers), not a module, a class or a function."""
    import types

    return (
        isinstance(getattr(value, "__dict__", None), dict)
        and not isinstance(value, (torch.nn.Module, type, types.FunctionType, types.ModuleType))
        and not callable(value)
    )


def _attributes(value: Any, tensors: Blocks, depth: int) -> list[list[Any]]:
    """``vars(value)``, encoded (a tensor both an item and an attribute is stored once)."""
    return [
        [k, encode_value(v, tensors, depth + 1)]
        for k, v in vars(value).items()
        if isinstance(k, str)
    ]


class Reader:
    """One file's tensors as :func:`decode_value` makes them: ``block(key)`` reads a block,
    and each tensor object the file numbers (``"ref"``) is made once, so the values of
    one file (read in any order, one record at a time) hold it as one object."""

    def __init__(self, block: Callable[[str], torch.Tensor]) -> None:
        self.block = block
        self._made: dict[int, tuple[tuple[Any, ...], torch.Tensor]] = {}

    def tensor(self, tree: dict[str, Any]) -> torch.Tensor:
        """The tensor a leaf describes (the one already made, for a number seen before)."""
        ref = tree.get("ref")
        if ref is None:  # a file written before tensors were numbered
            return _view(tree, self.block(_field(tree, "key", str)))
        ref = _field(tree, "ref", int)
        described = tuple(repr(tree.get(k)) for k in _DESCRIPTION)
        known = self._made.get(ref)
        if known is None:
            known = self._made[ref] = (described, _view(tree, self.block(_field(tree, "key", str))))
        elif known[0] != described:
            raise RecordingFileError(
                f"the saved recording is corrupted: its tensor number {ref} is described "
                "two different ways"
            )
        return known[1]


_DESCRIPTION = ("key", "dtype", "shape", "stride", "offset")


def decode_value(tree: Any, tensor: Reader | Callable[[str], torch.Tensor], depth: int = 0) -> Any:
    """The value a tree describes; ``tensor`` is the file's :class:`Reader` (or a function
    reading one block by key: then one object kept twice in ``tree`` is made once, but
    not across calls)."""
    if not isinstance(tensor, Reader):
        tensor = Reader(tensor)
    if not isinstance(tree, dict) or not isinstance(tree.get("t"), str) or depth > _MAX_DEPTH:
        raise RecordingFileError(f"malformed value in the saved recording: {str(tree)[:80]!r}")
    kind = tree["t"]
    if kind == "tensor":
        return tensor.tensor(tree)
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
        out = _pairs(tree, "items", tensor, depth)
        if "type" not in tree:
            return out
        return rebuilt(_field(tree, "type", str), _pairs(tree, "attrs", tensor, depth), out)
    if kind == "map":
        out = {}
        for item in _field(tree, "items", list):
            if not (isinstance(item, list) and len(item) == 2):
                raise RecordingFileError("malformed dict entry in the saved recording")
            key = decode_value(item[0], tensor, depth + 1)
            if type(key) not in _KEYS:
                raise RecordingFileError("malformed dict key in the saved recording")
            out[key] = decode_value(item[1], tensor, depth + 1)
        return out
    if kind == "object":
        return rebuilt(_field(tree, "type", str), _pairs(tree, "attrs", tensor, depth))
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


def _pairs(tree: dict[str, Any], key: str, tensor: Reader, depth: int) -> dict:
    out = {}
    for item in _field(tree, key, list):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise RecordingFileError("malformed dict entry in the saved recording")
        out[item[0]] = decode_value(item[1], tensor, depth + 1)
    return out


def rebuilt(type_name: str, attrs: dict[str, Any], items: dict[str, Any] | None = None) -> Any:
    """An object of the saved type with the saved attributes (and items, for a mapping),
    made without running any of its code (``__new__`` and ``__dict__`` only). Only a class
    already imported here is used, never one the file asks to import; otherwise a
    :class:`SavedObject` holds the same values under the type's name."""
    import sys

    module, _, qualname = type_name.partition(":")
    cls: Any = sys.modules.get(module)
    if cls is None and "." in module and module.partition(".")[0] in sys.modules:
        cls = _submodule(module)
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    mapping = items is not None
    usable = (  # a plain class (a cache) or a dict subclass (a model output), never a module
        isinstance(cls, type)
        and not issubclass(cls, (torch.nn.Module, type, BaseException))
        and (issubclass(cls, dict) if mapping else cls.__new__ is object.__new__)
        and cls.__new__ in (object.__new__, dict.__new__)
        and "__slots__" not in vars(cls)
    )
    if not usable:
        return SavedObject(type_name, {**(items or {}), **attrs})
    cls = cast(type, cls)  # usable: a plain class
    obj = cls.__new__(cls)
    if mapping:  # the container's own __setitem__, not the class's (no code of its runs)
        import collections

        base = collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict
        for key, item in (items or {}).items():
            base.__setitem__(obj, key, item)
    obj.__dict__.update(attrs)
    return obj


def _submodule(name: str) -> Any:
    """A submodule of a package the user already imported (``transformers`` imports its
    ``modeling_outputs`` lazily): the library's own code, never a package the file names."""
    import importlib

    if not all(part.isidentifier() for part in name.split(".")):
        return None
    try:
        return importlib.import_module(name)
    except Exception:  # any failure leaves the value a SavedObject
        return None


class SavedObject:
    """A saved object whose class is not imported here: its type's name and its values."""

    def __init__(self, type_name: str, attrs: dict[str, Any]) -> None:
        self.__dict__.update(attrs)
        self.fxviz_type = type_name

    def __repr__(self) -> str:
        names = ", ".join(k for k in vars(self) if k != "fxviz_type")
        return f"<saved {self.fxviz_type}: {names}>"


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
