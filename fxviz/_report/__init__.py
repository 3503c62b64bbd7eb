"""Self-contained HTML reports of graphs and recorded runs."""

from fxviz._report._html import report

__all__ = ["report"]
