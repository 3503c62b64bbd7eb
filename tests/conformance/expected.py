"""What each cell of the conformance matrix is expected to do: pass, refuse with one
documented message, or fail for a known bug another branch fixes (``KNOWN``: one table,
flipped by the lead after merging)."""

from __future__ import annotations

import re
from typing import Any

from fxviz.errors import FxvizError
from tests.conformance.zoo import THIRD_PARTY

QUICK_MODELS = ("value_if", "llama", "vit")

# (verb, kind) -> the one message a refusal must carry (a regular expression).
REFUSALS: dict[tuple[str, str], str] = {}

# (model or "*", kind or "*", verb or "*") -> why it fails today and which branch fixes it.
KNOWN: dict[tuple[str, str, str], str] = {}

# Cells that are not cells: the verb does not take what that kind gives.
NOT_APPLICABLE: dict[tuple[str, str], str] = {}


def _lookup(table: dict[tuple[str, str, str], str], name: str, kind: str, verb: str) -> str | None:
    for key in (
        (name, kind, verb),
        (name, kind, "*"),
        (name, "*", verb),
        ("*", kind, verb),
        ("*", "*", verb),
    ):
        if key in table:
            return table[key]
    return None


def expectation(name: str, kind: str, verb: str) -> tuple[str, str]:
    """``("pass" | "refused" | "xfail" | "n/a", message or reason)``."""
    if (verb, kind) in NOT_APPLICABLE:
        return "n/a", NOT_APPLICABLE[(verb, kind)]
    known = _lookup(KNOWN, name, kind, verb)
    if known is not None:
        return "xfail", known
    refusal = _lookup(REFUSALS_BY_MODEL, name, kind, verb) or REFUSALS.get((verb, kind))
    if refusal is not None:
        return "refused", refusal
    return "pass", ""


REFUSALS_BY_MODEL: dict[tuple[str, str, str], str] = {}


def outcome(name: str, kind: str, verb: str, error: BaseException | None) -> tuple[str, str]:
    """The verdict of a cell that ran and raised ``error`` (or not)."""
    want, text = expectation(name, kind, verb)
    detail = "" if error is None else f"{type(error).__name__}: {str(error)[:300]}"
    if want == "n/a":
        return "n/a", text
    if want == "refused":
        if isinstance(error, FxvizError) and re.search(text, str(error)):
            return "refused", detail
        return "fail", f"expected the refusal /{text}/, got {detail or 'no error'}"
    if want == "xfail":
        return (
            ("xfail", text) if error is not None else ("fail", f"passes now: flip KNOWN ({text})")
        )
    return ("pass", "") if error is None else ("fail", detail)


def third_party(name: str) -> bool:
    return name in THIRD_PARTY


__all__ = ["KNOWN", "NOT_APPLICABLE", "QUICK_MODELS", "REFUSALS", "expectation", "outcome"]
_ = Any
