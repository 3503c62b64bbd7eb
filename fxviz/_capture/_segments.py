"""The ``python`` nodes of a capture: the Python that ran between two graphs, replayed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fxviz._capture._inputs import describe_value
from fxviz._torch_compat import is_fake
from fxviz.errors import InputError

__all__ = ["PythonSegment", "check_same_inputs"]


class PythonSegment:
    """The target of a ``python`` node: Python ran here in the captured run.

    Calling it returns what that Python produced: with ``fresh``, a tuple of new copies
    of its tensors each call, so nothing a later node writes in place reaches the
    capture; otherwise the value itself (the model's output object). The first one also
    checks that the inputs are the captured ones: a capture holds one run, not a
    function of new inputs.
    """

    def __init__(
        self,
        label: str,
        values: Any,
        *,
        expected: Sequence[Any] | None = None,
        fresh: bool = True,
    ) -> None:
        self.__name__ = self.__qualname__ = label
        self.__module__ = "python"
        self.values = values
        self.expected = expected
        self.fresh = fresh

    def __call__(self, *args: Any) -> Any:
        if self.expected is not None and not any(_is_abstract(a) for a in args):
            check_same_inputs(self.expected, args[: len(self.expected)])
        if self.fresh:
            return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in self.values)
        return self.values

    def __repr__(self) -> str:
        return f"<python {self.__name__}>"


def _is_abstract(value: Any) -> bool:
    """Fake or meta tensors (shape propagation): nothing to compare, values pass through."""
    if not isinstance(value, torch.Tensor):
        return False
    return value.is_meta or is_fake(value)


def check_same_inputs(expected: Sequence[Any], given: Sequence[Any]) -> None:
    for i, (want, got) in enumerate(zip(expected, given, strict=False)):
        if isinstance(want, torch.Tensor) and not isinstance(got, torch.Tensor):
            continue  # a spec or a placeholder for shape propagation: nothing to compare
        if isinstance(got, torch.Tensor):
            if _is_abstract(got):
                continue
            same = (
                isinstance(want, torch.Tensor)
                and got.shape == want.shape
                and got.dtype == want.dtype
                and torch.equal(got, want)
            )
        else:
            same = got is want or bool(got == want)
        if not same:
            raise InputError(
                f"input {i} ({describe_value(got)}) is not the one this capture was made "
                f"with ({describe_value(want)}): a capture holds one run of the model. "
                "Capture the new inputs: fxviz.trace(model, *args, **kwargs)"
            )
