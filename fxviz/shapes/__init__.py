"""Shape propagation: per-node shapes and dtypes from real, fake or meta tensors."""

from fxviz.shapes._propagate import ShapeError, shapes
from fxviz.shapes._report import ShapeReport, format_shape, shapes_diff
from fxviz.shapes._spec import SpecError, TensorSpec, parse_spec, spec

__all__ = [
    "ShapeError",
    "ShapeReport",
    "SpecError",
    "TensorSpec",
    "format_shape",
    "parse_spec",
    "shapes",
    "shapes_diff",
    "spec",
]
