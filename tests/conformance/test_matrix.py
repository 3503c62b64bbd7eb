"""The conformance matrix: every public verb x every capture kind x the zoo.

Each cell passes, or is refused with its one documented message (asserted), or is a known
bug another branch fixes (strict xfail, from the one table ``expected.KNOWN``). The default
run has the fast core (a few architectures x every verb x every kind) and every
architecture x record; the rest is marked ``matrix_full`` (``pytest -m matrix_full``, or
benchmarks/conformance.py, which prints the whole matrix)."""

from __future__ import annotations

import functools
import re

import pytest

from fxviz.errors import FxvizError
from tests.conformance.cells import CHECKS, KINDS, Subject
from tests.conformance.expected import QUICK_MODELS, expectation
from tests.conformance.zoo import ZOO

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


@functools.cache
def subject(name: str, kind: str) -> Subject:
    """One model and its capture of that kind, made once a session."""
    return Subject(name, kind)


def _cells():
    for name in ZOO:
        for kind in KINDS:
            for verb in CHECKS:
                want, text = expectation(name, kind, verb)
                if want == "n/a":
                    continue
                core = name in QUICK_MODELS or (verb == "record" and kind == "dynamo")
                marks = [pytest.mark.slow] if core else [pytest.mark.matrix_full]
                if want == "xfail":
                    marks.append(pytest.mark.xfail(strict=True, reason=text))
                yield pytest.param(
                    name, kind, verb, want, text, marks=marks, id=f"{name}-{kind}-{verb}"
                )


@pytest.mark.parametrize(("name", "kind", "verb", "want", "text"), list(_cells()))
def test_cell(name, kind, verb, want, text):
    s = subject(name, kind)
    if want == "refused":
        with pytest.raises(FxvizError, match=re.compile(text)):
            CHECKS[verb](s)
        return
    CHECKS[verb](s)
