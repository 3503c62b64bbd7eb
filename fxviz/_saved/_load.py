"""``fxviz.load``: a saved recording back, without the model, and without running anything.

The header is checked before anything else is read; safetensors then validates every
tensor's dtype, shape and byte range against the file, and maps the file into memory.
Values are read on first access (``record.value``), not on load.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import struct
from typing import Any, cast

import torch

from fxviz._record._records import NodeRecord, Recording, StoredValue
from fxviz._record._summary import TensorSummary
from fxviz._saved._graph import SavedGraph
from fxviz._saved._save import FORMAT, VERSION
from fxviz._saved._values import Reader, decode_value
from fxviz.errors import NodeError, RecordingFileError

__all__ = ["LoadedRecording", "SavedException", "load"]

_MAX_HEADER = 100_000_000  # safetensors' own limit
_DTYPES = {
    str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)
}
_VERSION = re.compile(r"[0-9]{1,9}")  # ASCII digits only: "¹".isdigit() is True
_STATS = ("min", "max", "mean", "std", "absmax")
_COUNTS = ("nan", "posinf", "neginf", "zeros")


# Other kinds of fxviz file, by their metadata "format": a higher layer registers its
# reader here (``READERS[format] = reader(path, safetensors handle, metadata)``).
READERS: dict[str, Any] = {}


def load(path: str | os.PathLike[str]) -> LoadedRecording:
    """Read a recording written by :meth:`fxviz.Recording.save`.

    Neither the model nor its code is needed, and nothing in the file is executed: it is
    JSON and raw tensor bytes. Tensor values are memory-mapped and read when first used.

    Raises:
        RecordingFileError: the file is not a saved recording, is truncated or
            corrupted, or was written by a newer fxviz.
    """
    path = pathlib.Path(path)
    _check_header(path)
    from safetensors import SafetensorError, safe_open

    try:
        handle = safe_open(str(path), framework="pt")
        metadata = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise RecordingFileError(f"{path} is corrupted: {e}") from None
    reader = READERS.get(metadata.get("format", ""))
    if reader is not None:  # another kind of fxviz file (an incident: fxviz._training)
        return reader(path, handle, metadata)
    if metadata.get("format") != FORMAT:
        raise RecordingFileError(
            f"{path} is a safetensors file but not a saved fxviz recording (no "
            f"'format': '{FORMAT}' in its metadata); load it with safetensors instead"
        )
    version = metadata.get("version", "")
    if not _VERSION.fullmatch(version) or int(version) > VERSION:
        raise RecordingFileError(
            f"{path} was saved in recording format {version[:20]!r}, newer than this fxviz "
            f"reads (format {VERSION}): upgrade fxviz (pip install -U fxviz)"
        )
    try:
        body = json.loads(metadata.get("fxviz", ""))
    except (ValueError, RecursionError):
        raise RecordingFileError(f"{path} is corrupted: its records are not valid JSON") from None
    _expect(isinstance(body, dict), "the record list")
    return LoadedRecording(path, body, _Tensors(handle, set(handle.keys())))


class _Tensors(Reader):
    """Reads tensors from the open file on demand (one reader a file: a tensor object
    saved in two records loads as one object in both)."""

    def __init__(self, handle: Any, keys: set[str]) -> None:
        super().__init__(self._block)
        self.handle, self.keys = handle, keys

    def check(self, key: str) -> None:
        if key not in self.keys:
            raise RecordingFileError(
                f"the saved recording is corrupted: its records name a tensor {key[:40]!r} "
                "that the file does not hold"
            )

    def _block(self, key: str) -> torch.Tensor:
        self.check(key)
        return self.handle.get_tensor(key)


class _LazyValue(StoredValue):
    """A kept value that is read from the file the first time it is asked for."""

    __slots__ = ("_read", "_tree")

    def __init__(self, tree: Any, read: _Tensors) -> None:
        self.kept = tree is not None
        self._tree, self._read = tree, read
        _SLOT.__set__(self, None)
        _check_keys(tree, read)

    @property
    def value(self) -> Any:
        if self._tree is not None:
            _SLOT.__set__(self, decode_value(self._tree, self._read))
            self._tree = None  # read once
        return _SLOT.__get__(self)

    @value.setter
    def value(self, value: Any) -> None:
        _SLOT.__set__(self, value)


_SLOT: Any = StoredValue.__dict__["value"]  # the base class's slot


class LoadedRecording(Recording):
    """A :class:`fxviz.Recording` read from a file by :func:`fxviz.load`.

    It works like the one that was saved (``table()``, ``first_nonfinite()``, values,
    drawing, report, compare); ``graph_module`` is a :class:`SavedGraph` standing in for
    the model, which is not needed. ``path`` is the file it came from and ``saved`` says
    by which fxviz, torch and Python, and when.
    """

    def __init__(self, path: pathlib.Path, body: dict[str, Any], tensors: _Tensors) -> None:
        raw = body.get("records")
        _expect(isinstance(raw, list), "records")
        records = [_record(r, i, tensors) for i, r in enumerate(cast(list, raw))]
        complete = body.get("complete")
        _expect(isinstance(complete, bool), "complete")
        super().__init__(
            cast(Any, SavedGraph(body.get("graph"))),
            records,
            complete=bool(complete),
            error=_run_error(body.get("error")),
        )
        self.path = path
        flops = body.get("flops", {})  # absent from files saved before it was recorded
        _expect(
            isinstance(flops, dict)
            and all(isinstance(k, str) and type(v) is int for k, v in flops.items()),
            "flops",
        )
        self._fxviz_flops = flops
        self.rank, self.world_size, self.process_groups, self.distributed_nodes = read_distributed(
            body.get("distributed")
        )
        grads = (body.get("distributed") or {}).get("grads")  # read by compare_ranks(backward=)
        self.saved_grads = (grads if isinstance(grads, dict) else {}, tensors)
        saved = body.get("saved")
        self.saved = (
            {k: v for k, v in saved.items() if isinstance(v, str)}
            if isinstance(saved, dict)
            else {}
        )

    @property
    def output(self) -> Any:
        """What the graph returned, when the run finished and it was saved."""
        last = self._records[-1] if self._records else None
        return last.value if self.complete and last is not None and last.op == "output" else None

    @output.setter
    def output(self, value: Any) -> None:  # Recording.__init__ sets it; the file decides
        pass

    def __repr__(self) -> str:
        return f"<fxviz.Recording of {self.graph_module.name} (loaded from {self.path.name}): {self.summary()}>"


def read_distributed(data: Any) -> tuple[Any, Any, tuple[Any, ...], dict[str, Any]]:
    """The rank, world size, process groups and per-node layouts a file saved, or
    ``(None, None, (), {})`` for a run made outside a ``torch.distributed`` job."""
    if data is None:
        return None, None, (), {}
    _expect(isinstance(data, dict), "distributed")
    rank, world, groups, nodes = (
        data.get(k) for k in ("rank", "world_size", "process_groups", "nodes")
    )
    _expect(type(rank) is int and type(world) is int and 0 <= rank < world, "distributed.rank")
    _expect(isinstance(groups, list) and isinstance(nodes, dict), "distributed.nodes")
    return rank, world, tuple(groups), nodes


class SavedException(Exception):
    """An exception as it was saved: its type name and message (the class is not loaded)."""


_EXCEPTION_TYPES: dict[str, type[SavedException]] = {}


def _exception(data: Any, where: str) -> SavedException | None:
    if data is None:
        return None
    _expect(isinstance(data, dict), where)
    name, message = data.get("type"), data.get("message")
    _expect(isinstance(name, str) and isinstance(message, str), where)
    if not name.isidentifier():
        name = "SavedException"
    kind = _EXCEPTION_TYPES.get(name)
    if kind is None:
        kind = _EXCEPTION_TYPES[name] = type(name, (SavedException,), {"__module__": "fxviz.saved"})
    return kind(message)


def _run_error(data: Any) -> BaseException | None:
    """The error that stopped the run: a NodeError again, else a :class:`SavedException`."""
    if data is None:
        return None
    _expect(isinstance(data, dict) and isinstance(data.get("node"), str), "error")
    error = _exception(data, "error")
    if type(error).__name__ == "NodeError":
        return NodeError(str(error), node=data["node"])
    return error


def _record(data: Any, i: int, tensors: _Tensors) -> NodeRecord:
    where = f"records[{i}]"
    _expect(isinstance(data, dict), where)
    get = _Getter(data, where)
    inputs = get.strings("inputs")
    shapes = get.list("input_shapes")
    dtypes = get.list("input_dtypes")
    _expect(len(shapes) == len(inputs) == len(dtypes), f"{where}.inputs")
    return NodeRecord(
        index=get.int("index"),
        name=get.str("name"),
        op=get.str("op"),
        target=get.str("target"),
        module=get.str("module"),
        inputs=inputs,
        input_shapes=tuple(
            None if s is None else _shape(s, f"{where}.input_shapes") for s in shapes
        ),
        input_dtypes=tuple(
            None if d is None else _dtype(d, f"{where}.input_dtypes") for d in dtypes
        ),
        outputs=tuple(
            _summary(s, f"{where}.outputs[{j}]") for j, s in enumerate(get.list("outputs"))
        ),
        time_s=get.float("time_s"),
        error=_exception(data.get("error"), f"{where}.error"),
        stored=_LazyValue(data.get("value"), tensors),
        mutates=get.strings("mutates"),
        aliases=get.strings("aliases"),
        produced=get.strings("produced"),
        source=get.str("source"),
    )


def _summary(data: Any, where: str) -> TensorSummary:
    _expect(isinstance(data, dict), where)
    get = _Getter(data, where)
    stride = data.get("stride")
    _expect(
        stride is None or (isinstance(stride, list) and all(type(s) is int for s in stride)),
        f"{where}.stride",
    )
    stats = []
    for key in _STATS:
        text = data.get(key)
        _expect(text is None or isinstance(text, str), f"{where}.{key}")
        try:
            stats.append(None if text is None else float(text))
        except ValueError:
            _expect(False, f"{where}.{key}")
    counts = []
    for key in _COUNTS:
        _expect(data.get(key) is None or type(data.get(key)) is int, f"{where}.{key}")
        counts.append(data.get(key))
    requires_grad = data.get("requires_grad")
    _expect(isinstance(requires_grad, bool), f"{where}.requires_grad")
    return TensorSummary(
        get.str("path"),
        _shape(data.get("shape"), f"{where}.shape"),
        _dtype(data.get("dtype"), f"{where}.dtype"),
        get.str("device"),
        None if stride is None else tuple(stride),
        requires_grad,
        get.int("numel"),
        get.int("nbytes"),
        *stats,
        *counts,
    )


def _shape(data: Any, where: str) -> tuple[int | str, ...]:
    _expect(isinstance(data, list) and all(type(d) in (int, str) for d in data), where)
    return tuple(data)


def _dtype(name: Any, where: str) -> torch.dtype:
    _expect(isinstance(name, str), where)
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise RecordingFileError(
            f"the saved recording uses dtype {name[:40]!r} ({where}), unknown to torch "
            f"{torch.__version__}: load it with the torch that saved it"
        )
    return dtype


def _check_keys(tree: Any, tensors: _Tensors) -> None:
    """Every tensor a value names is in the file (checked on load, read later)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("t") == "tensor":
                key = item.get("key")
                _expect(isinstance(key, str), "a value's tensor key")
                tensors.check(str(key))
            stack.extend(v for v in item.get("items", ()) if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (dict, list)))


class _Getter:
    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def _get(self, key: str, ok: Any) -> Any:
        value = self.data.get(key)
        _expect(ok(value), f"{self.where}.{key}")
        return value

    def str(self, key: str) -> str:
        return self._get(key, lambda v: isinstance(v, str))

    def int(self, key: str) -> int:
        return self._get(key, lambda v: type(v) is int)

    def float(self, key: str) -> float:
        return float(self._get(key, lambda v: type(v) in (int, float)))

    def list(self, key: str) -> list[Any]:
        return self._get(key, lambda v: isinstance(v, list))

    def strings(self, key: str) -> tuple[str, ...]:
        return tuple(
            self._get(key, lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v))
        )


def _check_header(path: pathlib.Path) -> None:
    """Refuse what is plainly not a saved recording before any parser sees it."""
    if "\0" in str(path):
        raise RecordingFileError(f"invalid path {str(path)!r}: it contains a NUL character")
    try:
        info = path.stat()
        # Only a regular file: a FIFO would block the read forever, a device never ends.
        if not stat.S_ISREG(info.st_mode):
            raise RecordingFileError(
                f"{path} is not a regular file ({_kind(info.st_mode)}): give the path of a "
                "saved recording (.fxrec)"
            )
        size = info.st_size
        with open(path, "rb") as f:
            start = f.read(16)
    except FileNotFoundError:
        raise RecordingFileError(f"no such file: {path}") from None
    except (PermissionError, OSError, ValueError) as e:
        raise RecordingFileError(f"cannot read {path}: {e}") from None
    length = struct.unpack("<Q", start[:8])[0] if size >= 16 else 0
    if size < 16 or start[8:9] != b"{" or length > _MAX_HEADER:
        if start[:2] == b"PK" or start[:1] == b"\x80":
            raise RecordingFileError(
                f"{path} looks like a torch.save/pickle file, not a saved fxviz recording. "
                "fxviz never unpickles (that can run arbitrary code); save with rec.save(path)"
            )
        raise RecordingFileError(
            f"{path} is not a saved fxviz recording (a .fxrec file starts with a header "
            "length and a JSON header); write one with rec.save(path)"
        )
    if length > size - 8:
        raise RecordingFileError(
            f"{path} is truncated or corrupted: its header claims {length:,} bytes but the "
            f"file holds {size:,}"
        )


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def _expect(ok: bool, where: str) -> None:
    if not ok:
        raise RecordingFileError(
            f"the saved recording is corrupted: {where} is missing or malformed "
            "(was the file edited or cut short?)"
        )
