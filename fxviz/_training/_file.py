"""``incident.save(path)`` / ``fxviz.load(path)``: one safetensors file, JSON inside, no pickle.

Layout as a ``.fxrec`` (``fxviz/_saved/_save.py``): an 8-byte header length, a JSON header
whose ``__metadata__`` says ``"format": "fxviz.incident"``, ``"version": "1"`` and holds
under ``"fxviz"`` the incident (step, what, names, optimizer class) and value trees whose
leaves point into raw byte blocks: the step's parameters, buffers and optimizer state, and
each model call's inputs, RNG states and output gradients. Loading parses JSON and maps
bytes; it never runs code.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import TYPE_CHECKING, Any

import torch

from fxviz._saved._save import write_blocks
from fxviz._saved._values import Blocks, Reader, decode_value, encode_value
from fxviz._training._replay import ModelCall
from fxviz._training._state import Snapshot
from fxviz.errors import RecordingFileError

if TYPE_CHECKING:
    from fxviz._training._incident import Incident

__all__ = ["FORMAT", "incident_fields", "save_incident"]

FORMAT = "fxviz.incident"
VERSION = 1


def save_incident(incident: Incident, path: str | os.PathLike[str]) -> pathlib.Path:
    """Write ``incident`` to ``path`` (written beside it, then renamed into place)."""
    path = pathlib.Path(path)
    blocks = Blocks()
    snap = incident.snapshot
    body = {
        "step": incident.step,
        "what": incident.what,
        "names": list(incident.names),
        "loss": repr(incident.loss) if incident.loss is not None else None,
        "optimizer_class": incident.optimizer_class,
        "params": encode_value(snap.params, blocks),
        "buffers": encode_value(snap.buffers, blocks),
        "optimizer": encode_value(snap.optimizer, blocks),
        "model_calls": [
            {
                "args": encode_value(c.args, blocks),
                "kwargs": encode_value(c.kwargs, blocks),
                "rng": encode_value(c.rng, blocks),
                "output_grads": encode_value(c.output_grads, blocks),
                "path": c.path,
            }
            for c in incident.model_calls or []
        ],
    }
    metadata = {"format": FORMAT, "version": str(VERSION), "fxviz": json.dumps(body)}
    return write_blocks(path, metadata, blocks)


def incident_fields(path: pathlib.Path, handle: Any, metadata: dict[str, str]) -> dict[str, Any]:
    """The fields of the :class:`Incident` in an open incident file (``fxviz.load`` makes
    it: ``fxviz._training`` registers the reader)."""
    version = metadata.get("version", "")
    if not (version.isascii() and version.isdigit()) or int(version) > VERSION:
        raise RecordingFileError(
            f"{path} was saved in incident format {version[:20]!r}, newer than this fxviz "
            f"reads (format {VERSION}): upgrade fxviz"
        )
    try:
        body = json.loads(metadata.get("fxviz", ""))
        keys = set(handle.keys())

        def tensor(key: str) -> torch.Tensor:
            if key not in keys:
                raise RecordingFileError(f"{path} is corrupted: no block {key[:40]!r}")
            return handle.get_tensor(key)

        reader = Reader(tensor)  # one for the file: a tensor kept twice loads as one

        def value(tree: Any) -> Any:
            return decode_value(tree, reader)

        calls = [
            ModelCall(
                value(c["args"]),
                value(c["kwargs"]),
                value(c["rng"]),
                value(c["output_grads"]),
                path=str(c.get("path", "")),
            )
            for c in body["model_calls"]
        ]
        loss = body["loss"]
        return {
            "step": int(body["step"]),
            "what": str(body["what"]),
            "names": tuple(str(n) for n in body["names"]),
            "loss": float(loss) if loss is not None else None,
            "calls": [],
            "snapshot": Snapshot(
                value(body["params"]), value(body["buffers"]), value(body["optimizer"])
            ),
            "model": None,
            "optimizer": None,
            "train_step": None,
            "model_calls": calls,
            "optimizer_class": str(body["optimizer_class"]),
        }
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise RecordingFileError(f"{path} is a corrupted incident file: {e}") from None
