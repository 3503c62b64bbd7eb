"""Many processes: ``fxviz.compare_ranks`` finds the first rank and node where a job's ranks part."""

from fxviz._ranks._compare_ranks import RankCell, RankComparison, RankDivergence, compare_ranks
from fxviz._ranks._view import RankComparisonSource
from fxviz.render._source import register

register(RankComparison)(RankComparisonSource)  # what fxviz.to_dot, show and report make of one

__all__ = ["RankCell", "RankComparison", "RankDivergence", "compare_ranks"]
