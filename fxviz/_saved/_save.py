"""``Recording.save``: one ``.fxrec`` file holding a run, readable without the model.

The file is a valid `safetensors <https://huggingface.co/docs/safetensors>`_ file:

* 8 bytes: the header length ``N`` (little-endian unsigned 64-bit);
* ``N`` bytes: a JSON header. Its ``__metadata__`` says ``"format": "fxviz.recording"``,
  ``"version": "1"``, and holds under ``"fxviz"`` (as a JSON string) the graph (nodes,
  ops, targets, module paths, edges, source lines, alignment keys), every record
  (shapes, dtypes, statistics, timings, errors, aliasing and in-place writes) and each
  node's value as a tree whose leaves are tensors: a dtype, shape, stride and offset into
  a block, and the tensor object's number in the file (one object kept at two places
  loads as one object; older files without numbers load each leaf apart); every other header entry is one block (``U8``, its byte range): the memory
  of one storage, saved once however many views of it were kept (as ``torch.save``);
* the blocks' raw bytes, back to back, each padded to 8 bytes.

No pickle anywhere: loading parses JSON and maps bytes, it never runs code.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import struct
from typing import Any

import torch

from fxviz._record._rank import distributed_nodes
from fxviz._record._records import NodeRecord, Recording
from fxviz._saved._graph import SavedGraph, drawing_to_json
from fxviz._saved._values import Blocks, encode_value
from fxviz._shapes._flops import recording_flops
from fxviz._version import __version__
from fxviz.errors import InputError, RecordingFileError
from fxviz.render._api import draw

__all__ = ["FORMAT", "SUFFIX", "VERSION", "save", "write_blocks"]

FORMAT = "fxviz.recording"
VERSION = 1
SUFFIX = ".fxrec"


def save(
    recording: Recording, path: str | os.PathLike[str], *, values: bool = True
) -> pathlib.Path:
    """Write ``recording`` to ``path`` (one file); returns the path.

    ``values=False`` keeps only the records (shapes, statistics, timings...), not the
    tensors. In a ``torch.distributed`` job the file also holds the rank, world size,
    process groups, DTensor layouts (values: the local shard) and collectives, and
    ``{rank}`` in ``path`` becomes the rank (``"run-{rank}.fxrec"``: one file a rank). The file is written next to ``path`` first and renamed into place, so a
    crash never leaves half a file under the name.

    Example:
        >>> import torch, fxviz, tempfile, pathlib
        >>> rec = fxviz.record(torch.nn.Linear(3, 2), torch.ones(1, 3))
        >>> path = fxviz.save(rec, pathlib.Path(tempfile.mkdtemp()) / "run.fxrec")
        >>> fxviz.load(path)["linear"].shape
        (1, 2)
    """
    if not isinstance(recording, Recording):
        raise InputError(
            f"fxviz.save writes a Recording, not a {type(recording).__name__}: record it first "
            "(rec = fxviz.record(model, *inputs); a Debugger's is dbg.recording)"
        )
    path = _rank_path(recording, path)
    if "\0" in str(path):
        raise RecordingFileError(f"invalid path {str(path)!r}: it contains a NUL character")
    blocks = Blocks()
    records = [_record_json(r, blocks if values else None) for r in recording.values()]
    last = records[-1] if records else None
    if values and recording.complete and last is not None and last["op"] == "output":
        # what the model returned, as the recording gives it (an exported graph's output
        # node holds the flat tensors; rec.output their structure: a tensor, a ModelOutput)
        last["value"] = encode_value(recording.output, blocks)
    body = {
        "model": _model_name(recording),
        "complete": recording.complete,
        "error": _run_error(recording),
        "saved": {
            "fxviz": _fxviz_version(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        },
        "graph": drawing_to_json(draw(recording), recording),
        "records": records,
        "flops": _flops(recording),
    }
    if recording.rank is not None:  # made in a torch.distributed job
        body["distributed"] = {
            "rank": recording.rank,
            "world_size": recording.world_size,
            "process_groups": list(recording.process_groups),
            "nodes": distributed_nodes(recording),
            "grads": _grad_trees(recording, blocks) if values else {},
        }
    metadata = {"format": FORMAT, "version": str(VERSION), "fxviz": json.dumps(body)}
    return write_blocks(path, metadata, blocks)


def write_blocks(path: pathlib.Path, metadata: dict[str, str], blocks: Blocks) -> pathlib.Path:
    """Write one safetensors file: ``metadata`` (strings) and ``blocks``' storages as
    8-byte-aligned uint8 tensors, through a ``.partial`` file replaced at the end (a
    reader never sees half a file). Shared by recordings and training incidents."""
    header: dict[str, Any] = {"__metadata__": metadata}
    ready = []
    offset = 0
    for key, block in blocks.blocks.items():
        if block.device.type != "cpu":
            block = block.cpu()
        size = block.numel() + (-block.numel() % 8)  # blocks stay 8-byte aligned
        header[key] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
        ready.append(block)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # tensors start 8-byte aligned
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            for block in ready:
                f.write(memoryview(block.numpy()))
                f.write(b"\0" * (-block.numel() % 8))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _rank_path(recording: Recording, path: str | os.PathLike[str]) -> pathlib.Path:
    """``run-{rank}.fxrec`` -> ``run-1.fxrec`` (``{rank}`` and ``{world_size}``): one
    file a rank from the same line of code in every rank."""
    text = os.fspath(path)
    if "{rank}" in text or "{world_size}" in text:
        rank, world = recording.rank, recording.world_size
        text = text.replace("{rank}", str(0 if rank is None else rank))
        text = text.replace("{world_size}", str(1 if world is None else world))
    return pathlib.Path(text)


def _grad_trees(recording: Recording, blocks: Blocks) -> dict[str, Any]:
    """The kept gradients (of node outputs and parameters), for ``compare_ranks(backward=)``."""
    grads = recording.gradients
    if grads is None:
        return {}
    nodes = {
        n: encode_value(r.grad_value, blocks)
        for n, r in recording.items()
        if r.grad_value is not None
    }
    params = {n: encode_value(g.value, blocks) for n, g in grads.parameters.items() if g.kept}
    return {"nodes": nodes, "parameters": params}


def _flops(recording: Recording) -> dict[str, int]:
    """Each node's FLOPs (a loaded recording has no graph to count them on)."""
    return {name: int(count) for name, count in recording_flops(recording).items()}


def _record_json(record: NodeRecord, tensors: Blocks | None) -> dict[str, Any]:
    data = record.to_dict()
    for summary in data["outputs"]:  # statistics as Python floats, NaN/Inf kept as text
        for key in ("min", "max", "mean", "std", "absmax"):
            value = getattr(_summary(record, summary["path"]), key)
            summary[key] = None if value is None else repr(float(value))
    data["value"] = (
        encode_value(record.value, tensors) if tensors is not None and record.kept else None
    )
    return data


def _summary(record: NodeRecord, path: str) -> Any:
    return next(s for s in record.outputs if s.path == path)


def _run_error(recording: Recording) -> dict[str, str] | None:
    error = recording.error
    if error is None:
        return None
    failed = next((r.name for r in recording.values() if r.error is not None), "")
    return {
        "type": type(error).__name__,
        "message": str(error),
        "node": str(getattr(error, "node", failed)),
    }


def _model_name(recording: Recording) -> str:
    gm = recording.graph_module
    return gm.name if isinstance(gm, SavedGraph) else type(gm).__name__


def _fxviz_version() -> str:
    return __version__
