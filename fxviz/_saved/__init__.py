"""Saved recordings: ``Recording.save(path)`` and ``fxviz.load(path)`` (see ``_save``)."""

from fxviz._capture._subject import refuse, register_traceable
from fxviz._saved._graph import SavedGraph, SavedNode
from fxviz._saved._load import LoadedRecording, SavedException, load
from fxviz._saved._save import FORMAT, SUFFIX, VERSION, save
from fxviz.render._fold import Params
from fxviz.render._model import DrawGraph
from fxviz.render._source import register
from fxviz.render._sources import RecordingSource

register_traceable(
    LoadedRecording,
    refuse(
        "a loaded recording holds no model to run: fxviz.show, report and compare take "
        "it as it is; to run the graph again, record the model"
    ),
)


@register(LoadedRecording)
class _LoadedSource(RecordingSource):
    """A loaded recording draws from its saved drawing (the model is not needed)."""

    def drawing(self, params: Params) -> DrawGraph:
        return self.obj.graph_module.draw(self.obj)


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
