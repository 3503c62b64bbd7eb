"""Comparing two runs node by node: ``fxviz.compare``, ``compare_dtype``, ``compare_pass``."""

from fxviz._compare._comparison import METRICS, Comparison, NodeComparison, compare
from fxviz._compare._metrics import Metrics, measure
from fxviz._compare._shortcuts import compare_dtype, compare_pass

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
