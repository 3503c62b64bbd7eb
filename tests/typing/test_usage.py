"""Runs the typed usage file (pyright checks it in make lint)."""

from tests.typing.usage import test_usage_runs

__all__ = ["test_usage_runs"]
