"""When a node's statistics are taken: on first read, during the run, from a cache, or
from the record of the value it is a view of.

Statistics of a kept value can wait until someone reads them: before a later in-place
write in the graph, the values on the memory it writes are copied (a view's statistics,
or a value's under a byte budget, are taken then; a dense value's are taken from its
copy, laid out alike), so nothing changes the value under them. Two things could: the
user, after the run (an optimizer step, ``x.add_(1)`` on an input or on
``rec.output``), and a write fxviz did not foresee. Each tensor's version
counter, noted when its node ran, tells: a value whose counter moved is not summarised
from what it holds now (its record says so, with a warning). Inputs, parameters and
buffers, which live on after the run, are summarised during it, from a cache keyed by
tensor and version so that unchanged weights are measured once for every run.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> cached_summary(w)[0].mean, cached_summary(w) is cached_summary(w)
    (1.0, True)
"""

from __future__ import annotations

import functools
import math
import warnings
import weakref
from typing import Any, Literal

import torch

from fxviz._record._moments import permuted_dense
from fxviz._record._summary import TensorSummary, iter_tensors, summarize, summarize_tensor
from fxviz._torch_compat import functorch_unwrapped, shares_storage
from fxviz.errors import FxvizWarning

__all__ = [
    "Stats",
    "StatsOption",
    "cached_summary",
    "check_stats",
    "deferred_summary",
    "note_versions",
    "same_elements",
    "view_summary",
    "warn_if_changed",
]

Stats = Literal["lazy", "eager", "off"]
StatsOption = bool | Literal["eager"]  # what ``stats=`` accepts
_PLAIN = (torch.Tensor, torch.nn.Parameter)

# id(tensor) -> (a weak reference to it, what it looked like, its summary): keyed by
# identity (Tensor.__eq__ is elementwise), read once a parameter on every run, so a plain
# dict (torch's WeakIdKeyDictionary makes a reference object a lookup, ~5x the cost);
# the reference's callback drops the entry, and the summaries hold no tensor: the cache
# never keeps a parameter alive.
_CACHE: dict[int, tuple[weakref.ref[torch.Tensor], tuple[Any, ...], Any]] = {}


def _forget(key: int, ref: weakref.ref[torch.Tensor]) -> None:
    """A cached tensor died: drop its entry (unless its id was reused since)."""
    found = _CACHE.get(key)
    if found is not None and found[0] is ref:
        del _CACHE[key]


def check_stats(stats: Any) -> Stats:
    """``True`` (statistics, taken when first read), ``"eager"`` (taken as each node runs)
    or ``False`` (none).

    >>> check_stats(True), check_stats("eager"), check_stats(False)
    ('lazy', 'eager', 'off')
    """
    if stats is True:
        return "lazy"
    if stats is False:
        return "off"
    if stats == "eager":
        return "eager"
    raise ValueError(f"stats must be True, False or 'eager', not {stats!r}")


def note_versions(value: Any) -> tuple[int, ...] | None:
    """The version counters of the tensors in ``value``, or ``None`` when a later change
    could go unseen (an inference tensor has no counter; a subclass may hide its data):
    such values are summarised at once."""
    versions = []
    for _, t in iter_tensors(value):
        if type(t) not in _PLAIN or t.is_inference():
            return None
        versions.append(t._version)
    return tuple(versions)


def deferred_summary(name: str, value: Any, versions: tuple[int, ...]) -> tuple[TensorSummary, ...]:
    """Statistics of a kept ``value`` read after its node ran, if it is unchanged since
    (``versions`` as :func:`note_versions` gave them); else shapes only, and a warning."""
    if type(value) in _PLAIN and value._version == versions[0]:  # most nodes: one tensor
        return (summarize_tensor("", value, True),)
    tensors = [t for _, t in iter_tensors(value)]
    if all(t._version == v for t, v in zip(tensors, versions, strict=True)):
        return summarize(value, True)
    warnings.warn(
        f"the value of node {name!r} was changed in place after it ran (after the run, or "
        "by a write fxviz did not foresee), so its statistics cannot be taken from it any "
        "more; its record has shapes only. Record with stats='eager' to take statistics "
        "while the graph runs.",
        FxvizWarning,
        stacklevel=4,
    )
    return summarize(value, False)


def cached_summary(value: Any) -> tuple[TensorSummary, ...]:
    """:func:`summarize` for a bare tensor that outlives runs (a parameter, a buffer, an
    input), measured once per version of it."""
    if type(value) is not torch.nn.Parameter:  # a functorch wrapper is a plain Tensor
        value = functorch_unwrapped(value)  # a vmap'd value has no storage: what it holds
    if type(value) not in _PLAIN or value.is_inference() or value.layout != torch.strided:
        return summarize(value, True)  # no counter, or no data pointer (sparse): not cached
    key = (
        value._version,
        value.data_ptr(),
        value.shape,
        value.stride(),
        value.dtype,
        value.device,
        value.requires_grad,
    )
    found = _CACHE.get(id(value))
    if found is not None and found[0]() is value and found[1] == key:
        return found[2]
    summary = summarize(value, True)
    _CACHE[id(value)] = (weakref.ref(value, functools.partial(_forget, id(value))), key, summary)
    return summary


def view_summary(
    value: Any, bases: list[tuple[torch.Tensor, TensorSummary, int]]
) -> tuple[TensorSummary, ...] | None:
    """The summary of ``value`` when each of its tensors covers exactly the same elements
    as one of ``bases`` (``(tensor, its summary, its version then)``): a ``view``,
    ``reshape``, ``transpose``, ``permute`` or ``detach`` of a summarised value has its
    statistics, so they are not measured again. ``None`` when one tensor is not such a view.

    >>> x = torch.arange(6.0).reshape(2, 3)
    >>> (s,) = summarize(x)
    >>> view_summary(x.t(), [(x, s, x._version)])[0].shape
    (3, 2)
    """
    found = []
    for path, t in iter_tensors(value):
        match = next((s for b, s, v in bases if same_elements(t, b, v)), None)
        if match is None or match.min is None:
            return None
        # a plain strided tensor (as ``same_elements`` found it): its own layout
        found.append(match.relaid(path, tuple(t.shape), t.stride(), t.requires_grad))
    return tuple(found)


def same_elements(t: torch.Tensor, base: torch.Tensor, version: int) -> bool:
    """Whether ``t`` holds exactly ``base``'s elements, unchanged since ``version``:
    same memory span, each element once."""
    if t is base:  # a node that gave back its input (a no-op ``.to``, ``.contiguous()``)
        plain = type(t) in _PLAIN and t.layout == torch.strided and not t.is_inference()
        return plain and t._version == version
    return (
        type(t) in _PLAIN
        and type(base) in _PLAIN
        and t.dtype == base.dtype
        and t.numel() == base.numel()
        and t.storage_offset() == base.storage_offset()
        and t.device == base.device
        and t.layout == torch.strided
        and not t.is_inference()
        and t._version == version
        and shares_storage(t, base)
        and permuted_dense(t)
        and permuted_dense(base)
    )


def warn_if_changed(
    name: str, exposed: str, value: Any, outputs: tuple[TensorSummary, ...] | None
) -> None:
    """Warn when the kept ``value`` of node ``name`` no longer gives the statistics it
    gave as it ran (``outputs``): code fxviz does not know (node ``exposed``) got its
    memory and may have written into it where no version counter sees it (through
    ``.data``). A change that keeps every statistic goes unseen.

    >>> x = torch.ones(2)
    >>> before = summarize(x)
    >>> x.data.mul_(5)
    tensor([5., 5.])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_changed("x", "f", x, before)
    >>> len(caught)
    1
    """
    if not outputs or value is None:
        return
    now = summarize(value, True)
    if len(now) == len(outputs) and all(map(_alike, now, outputs)):
        return
    warnings.warn(
        f"the value of node {name!r} changed after it ran, where no version counter saw "
        f"it: node {exposed!r} runs code fxviz does not know and got its memory (a write "
        "through .data?). Its statistics are from when it ran; its value is what it holds "
        "now.",
        FxvizWarning,
        stacklevel=4,
    )


def _alike(a: TensorSummary, b: TensorSummary) -> bool:
    """Whether two summaries of one tensor say the same (mean and std to rounding)."""
    exact = ("shape", "dtype", "min", "max", "nan", "posinf", "neginf", "zeros")
    if any(getattr(a, f) != getattr(b, f) for f in exact):
        return False
    return all(_close(getattr(a, f), getattr(b, f)) for f in ("mean", "std"))


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
