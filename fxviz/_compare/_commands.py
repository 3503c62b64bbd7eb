"""``fxviz compare A.fxrec B.fxrec`` and ``fxviz report RUN.fxrec``: saved runs from the shell."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from fxviz.errors import FxvizError

__all__ = ["run_compare", "run_saved_report"]


def run_compare(
    a: str,
    b: str,
    output: str,
    *,
    metric: str,
    sqnr_db: float,
    rtol: float,
    atol: float,
    report: Callable[..., Any],
    min_cosine: float = 0.999,
) -> int:
    """Load two saved recordings, compare them, print the verdict and write a report
    (with ``report``: ``fxviz.report``, passed by the CLI, a higher layer).

    Exit code 0 when the runs agree, 1 when they diverge, 2 when a file cannot be read or
    a threshold is invalid (checked before any file is read), 3 when nothing diverges but
    some pairs present in both runs could not be measured (the summary says which).
    """
    from fxviz._compare import compare
    from fxviz._compare._thresholds import Criterion
    from fxviz._saved import load

    options = {"metric": metric, "sqnr_db": sqnr_db, "min_cosine": min_cosine}
    options |= {"rtol": rtol, "atol": atol}
    try:
        Criterion(**options)
        cmp = compare(load(a), load(b), **options)
    except FxvizError as e:
        return _fail(e)
    report(cmp, output, title=f"fxviz compare {a} {b}")
    print(cmp.summary())
    print(f"wrote {output}: open it in any browser (it works offline)")
    if cmp.first_divergence is not None:
        return 1
    return 3 if cmp.unmeasured else 0


def run_saved_report(path: str, output: str, *, report: Callable[..., Any]) -> int:
    """Write the replay report of a saved recording (no model needed) with ``report``."""
    from fxviz._saved import load

    try:
        recording = load(path)
    except FxvizError as e:
        return _fail(e)
    report(recording, output, title=f"fxviz report {path}")
    print(f"wrote {output}: open it in any browser (it works offline)")
    return 0


def _fail(error: BaseException) -> int:
    print(f"fxviz: error: {error}", file=sys.stderr)
    return 2
