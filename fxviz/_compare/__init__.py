"""Comparing two runs node by node: ``fxviz.compare``, ``compare_dtype``, ``compare_pass``."""

from fxviz._compare._comparison import METRICS, Comparison, NodeComparison, compare
from fxviz._compare._metrics import Metrics, measure
from fxviz._compare._shortcuts import compare_dtype, compare_pass
from fxviz._compare._view import ComparisonSource
from fxviz.render._source import register

register(Comparison)(ComparisonSource)  # what fxviz.to_dot, show and report make of one

__all__ = [
    "METRICS",
    "Comparison",
    "Metrics",
    "NodeComparison",
    "compare",
    "compare_dtype",
    "compare_pass",
    "measure",
]
