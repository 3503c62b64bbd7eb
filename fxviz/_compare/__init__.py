"""Comparing two runs or two graphs: ``fxviz.compare``, ``compare_dtype``, ``compare_pass``,
``diff`` and ``shapes_diff``, views of one engine (one alignment, one set of numbers)."""

from fxviz._compare._comparison import Comparison, compare
from fxviz._compare._diff import diff, shapes_diff
from fxviz._compare._metrics import Metrics, measure
from fxviz._compare._pairs import NodeComparison
from fxviz._compare._shortcuts import compare_dtype, compare_pass
from fxviz._compare._thresholds import METRICS, Criterion
from fxviz._compare._view import ComparisonSource
from fxviz.render._source import register

register(Comparison)(ComparisonSource)  # what fxviz.to_dot, show and report make of one

__all__ = [
    "METRICS",
    "Comparison",
    "Criterion",
    "Metrics",
    "NodeComparison",
    "compare",
    "compare_dtype",
    "compare_pass",
    "diff",
    "measure",
    "shapes_diff",
]
