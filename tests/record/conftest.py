"""Every recording test runs on both engines of ``fxviz.record`` (see ``recording_engine``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _both_engines(recording_engine: str) -> str:
    return recording_engine
