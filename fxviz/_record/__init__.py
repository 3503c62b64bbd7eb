"""Recording: run an FX graph node by node and keep what each node produced."""

from fxviz._record._debugger import Debugger
from fxviz._record._interpreter import RecordingInterpreter, RecordingMixin, record, recording_class
from fxviz._record._joint import JointRecording, JointRun
from fxviz._record._predicates import dtype_changed, has_nonfinite
from fxviz._record._records import NodeRecord, Recording
from fxviz._record._summary import TensorSummary

__all__ = [
    "Debugger",
    "JointRecording",
    "JointRun",
    "NodeRecord",
    "Recording",
    "RecordingInterpreter",
    "RecordingMixin",
    "TensorSummary",
    "dtype_changed",
    "has_nonfinite",
    "record",
    "recording_class",
]
