"""The one threshold vocabulary of ``diff``, ``compare`` and ``fxviz compare``: a criterion."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fxviz._compare._metrics import Metrics
from fxviz.errors import InputError

__all__ = ["DEFAULT_SQNR_DB", "METRICS", "Criterion"]

METRICS = ("sqnr", "allclose", "cosine")
DEFAULT_SQNR_DB = 30.0


@dataclasses.dataclass(frozen=True)
class Criterion:
    """When a measured pair diverges: ``metric`` and its threshold, validated once.

    ``"sqnr"``: SQNR below ``sqnr_db`` (30 dB is about 3% relative L2 error);
    ``"cosine"``: cosine similarity below ``min_cosine``; ``"allclose"``: outside
    ``rtol``/``atol`` as ``torch.allclose``. Thresholds must be finite and non-negative
    (``min_cosine`` within [-1, 1]): a NaN floor would make every comparison pass.

    Examples:
        >>> Criterion("sqnr", sqnr_db=20).describe()
        'SQNR < 20 dB'
        >>> Criterion("allclose", atol=-1)
        Traceback (most recent call last):
        ...
        fxviz.errors.InputError: atol must be a finite number >= 0, not -1
    """

    metric: str = "sqnr"
    sqnr_db: float = DEFAULT_SQNR_DB
    min_cosine: float = 0.999
    rtol: float = 1e-5
    atol: float = 1e-6

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InputError(f"unknown metric {self.metric!r}: use one of {', '.join(METRICS)}")
        for name in ("sqnr_db", "rtol", "atol"):
            _check(name, getattr(self, name), low=0.0)
        _check("min_cosine", self.min_cosine, low=-1.0, high=1.0)

    @property
    def threshold(self) -> float | None:
        """The floor of the chosen metric (``None`` for ``allclose``)."""
        return {"sqnr": self.sqnr_db, "cosine": self.min_cosine}.get(self.metric)

    def describe(self) -> str:
        """The rule in words: ``SQNR < 30 dB``, ``cosine < 0.999``, ``not allclose(...)``."""
        if self.metric == "sqnr":
            return f"SQNR < {self.sqnr_db:g} dB"
        if self.metric == "cosine":
            return f"cosine < {self.min_cosine:g}"
        return f"not allclose(rtol={self.rtol:g}, atol={self.atol:g})"

    def verdict(self, m: Metrics) -> tuple[bool, str]:
        """Whether ``m`` fails the rule, and the number that says so."""
        sqnr = (
            f"SQNR {m.sqnr_db:.1f} dB"
            if math.isfinite(m.sqnr_db)
            else ("equal" if m.sqnr_db > 0 else "SQNR -inf dB")
        )
        if m.one_sided:
            return True, f"{m.one_sided} NaN/Inf on one side only; {sqnr}"
        if self.metric == "sqnr":
            return m.sqnr_db < self.sqnr_db, sqnr
        if self.metric == "cosine":
            return m.cosine < self.min_cosine, f"cosine {m.cosine:.6f}"
        return not m.allclose, f"max abs error {m.max_abs_error:.3g}, max rel {m.max_rel_error:.3g}"


def _check(name: str, value: Any, *, low: float, high: float = math.inf) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low <= value <= high:
        bound = f">= {low:g}" if high == math.inf else f"within [{low:g}, {high:g}]"
        raise InputError(f"{name} must be a finite number {bound}, not {value!r}")
