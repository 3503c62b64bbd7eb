"""RankView: a rank comparison in the notebook, with a rank selector over its graph."""

from __future__ import annotations

from typing import Any

import ipywidgets

from fxviz._ranks import RankComparison
from fxviz.widgets._graph_view import GraphView

__all__ = ["RankView"]


class RankView(ipywidgets.VBox):
    """A dropdown of ranks above a :class:`GraphView`: "every rank" shows the comparison
    (each node badged with each rank's distance from rank 0 or the reference); a rank
    shows that rank's own recording.

    Examples:
        >>> import torch, fxviz
        >>> model, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
        >>> a, b = fxviz.record(model, x), fxviz.record(model, x)
        >>> a.rank, b.rank = 0, 1
        >>> view = RankView(fxviz.compare_ranks([a, b]))
        >>> [label for label, _ in view.selector.options]
        ['every rank', 'rank 0', 'rank 1']
        >>> view.selector.value = 1
        >>> view.view.dot == fxviz.GraphView(b).dot
        True
    """

    def __init__(self, result: RankComparison, **kwargs: Any) -> None:
        if not isinstance(result, RankComparison):
            raise TypeError(f"RankView shows fxviz.compare_ranks(...) results, not {result!r}")
        self.result = result
        options = [("every rank", -1), *((f"rank {r}", r) for r in result.ranks)]
        self.selector = ipywidgets.Dropdown(options=options, value=-1, description="show")
        self.view = GraphView(result)
        self.selector.observe(self._select, names="value")
        super().__init__([self.selector, self.view], **kwargs)

    def _select(self, change: dict[str, Any]) -> None:
        rank = change["new"]
        shown = self.result if rank == -1 else self.result.recordings[rank]
        self.view = GraphView(shown)
        self.children = (self.selector, self.view)

    def __repr__(self) -> str:
        return f"<fxviz RankView: {self.result.summary()}>"
