"""Saved recordings: ``Recording.save(path)`` and ``fxviz.load(path)`` (see ``_save``)."""

from fxviz._saved._graph import SavedGraph, SavedNode
from fxviz._saved._load import LoadedRecording, SavedException, load
from fxviz._saved._save import FORMAT, SUFFIX, VERSION, save

__all__ = [
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "LoadedRecording",
    "SavedException",
    "SavedGraph",
    "SavedNode",
    "load",
    "save",
]
