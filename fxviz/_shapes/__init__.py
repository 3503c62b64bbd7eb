"""Shape propagation: per-node shapes and dtypes from real, fake or meta tensors."""

from fxviz._shapes._propagate import ShapeError, shapes
from fxviz._shapes._report import ShapeReport, format_shape
from fxviz._shapes._spec import SpecError, TensorSpec, parse_spec, spec

__all__ = [
    "ShapeError",
    "ShapeReport",
    "SpecError",
    "TensorSpec",
    "format_shape",
    "parse_spec",
    "shapes",
    "spec",
]
