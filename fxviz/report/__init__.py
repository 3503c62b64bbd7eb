"""Self-contained HTML reports of graphs and recorded runs."""

from fxviz.report._html import report

__all__ = ["report"]
