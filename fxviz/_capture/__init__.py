"""Captures of one real run: Dynamo's graphs with their breaks, or one real trace."""

from fxviz._capture._bind import bind_inputs
from fxviz._capture._dynamo import capture_dynamo, is_user_file, traced_forward
from fxviz._capture._inputs import describe_value, flatten_inputs
from fxviz._capture._joint import JointGraph, trace_joint
from fxviz._capture._real import capture_real, tensors_in
from fxviz._capture._stitch import Capture, GraphBreak, GraphCall
from fxviz._capture._subject import refuse, register_traceable, traceable

__all__ = [
    "Capture",
    "GraphBreak",
    "GraphCall",
    "JointGraph",
    "bind_inputs",
    "capture_dynamo",
    "capture_real",
    "describe_value",
    "flatten_inputs",
    "is_user_file",
    "refuse",
    "register_traceable",
    "tensors_in",
    "trace_joint",
    "traceable",
    "traced_forward",
]
