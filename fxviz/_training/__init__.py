"""Training runs: ``fxviz.watch`` stops a run at its first NaN/Inf, and replays that step."""

from fxviz._saved import load
from fxviz._saved._load import READERS
from fxviz._training._file import FORMAT, incident_fields
from fxviz._training._incident import Call, Incident
from fxviz._training._watch import Watch, watch
from fxviz.errors import NonFiniteStep

READERS[FORMAT] = lambda *file: Incident(**incident_fields(*file))  # fxviz.load reads .fxinc too

__all__ = ["Call", "Incident", "NonFiniteStep", "Watch", "load", "watch"]
