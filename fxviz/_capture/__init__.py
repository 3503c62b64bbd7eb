"""Captures of one real run: Dynamo's graphs with their breaks, or one real trace."""

from fxviz._capture._dynamo import capture_dynamo, is_user_file
from fxviz._capture._inputs import bind_inputs, describe_value, flatten_inputs
from fxviz._capture._real import capture_real
from fxviz._capture._stitch import Capture, GraphBreak, GraphCall

__all__ = [
    "Capture",
    "GraphBreak",
    "GraphCall",
    "bind_inputs",
    "capture_dynamo",
    "capture_real",
    "describe_value",
    "flatten_inputs",
    "is_user_file",
]
