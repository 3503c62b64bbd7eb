"""Many processes: ``fxviz.compare_ranks`` finds the first rank and node where a job's ranks part."""

from fxviz._ranks._compare_ranks import RankCell, RankComparison, RankDivergence, compare_ranks

__all__ = ["RankCell", "RankComparison", "RankDivergence", "compare_ranks"]
