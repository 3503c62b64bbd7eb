"""``fxviz compare-ranks run-*.fxrec -o page.html``: a job's ranks from the shell."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from fxviz.errors import FxvizError

__all__ = ["run_compare_ranks"]


def run_compare_ranks(
    paths: Sequence[str],
    output: str,
    *,
    write: Callable[..., Any],
    reference: str | None = None,
    backward: bool = False,
    metric: str | None = None,
    sqnr_db: float = 60.0,
) -> int:
    """Load one saved recording a rank, compare them, print the verdict and write the
    page with ``write(result, output, title=...)`` (``fxviz.report``, handed in by the
    CLI: the report sits above this layer).

    Exit code 0 when the ranks agree, 1 when they part, 2 when a file cannot be read.
    """
    from fxviz._ranks._compare_ranks import compare_ranks

    try:
        result = compare_ranks(
            list(paths), reference=reference, backward=backward, metric=metric, sqnr_db=sqnr_db
        )
    except FxvizError as e:
        print(f"fxviz: error: {e}", file=sys.stderr)
        return 2
    write(result, output, title=f"fxviz compare-ranks ({len(result.ranks)} ranks)")
    print(result.summary())
    print(f"wrote {output}: open it in any browser (it works offline)")
    return 1 if result.first_divergence is not None else 0
