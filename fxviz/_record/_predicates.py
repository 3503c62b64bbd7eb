"""Ready-made breakpoint predicates: each takes a :class:`NodeRecord`, returns a bool.

>>> import torch, fxviz
>>> rec = fxviz.record(lambda x: (x / 0).long(), torch.ones(2))
>>> [r.name for r in rec.values() if fxviz.has_nonfinite(r)]
['truediv']
>>> [r.name for r in rec.values() if fxviz.dtype_changed(r)]
['long']
"""

from __future__ import annotations

import torch

from fxviz._record._records import NodeRecord
from fxviz._record._summary import iter_tensors
from fxviz._torch_compat import stored_values

__all__ = ["dtype_changed", "has_nonfinite"]

_PLAIN = (torch.Tensor, torch.nn.Parameter)


def has_nonfinite(record: NodeRecord) -> bool:
    """True when the node's output holds a NaN or an infinity (the predicate; the count is
    ``record.nonfinite_count``, the overlay ``fxviz.overlays.highlight_nonfinite()``).

    Uses the statistics when they were taken, else the kept value itself. Fake and meta
    tensors hold no values: they are never non-finite (nothing is asked of their sizes).

    >>> import torch, fxviz
    >>> rec = fxviz.record(lambda x: x.log(), torch.tensor([-1.0]), stats=False)
    >>> fxviz.has_nonfinite(rec["log"]), fxviz.has_nonfinite(rec["x"])
    (True, False)
    """
    if any(s.nan is not None for s in record.outputs):
        return record.nonfinite_count > 0
    return any(
        t.is_floating_point() and not bool(torch.isfinite(stored).all())
        for _, t in iter_tensors(record.value)
        if type(t) in _PLAIN and not t.is_meta and (stored := stored_values(t)) is not None
    )


def dtype_changed(record: NodeRecord) -> bool:
    """True when the node's first output dtype differs from all of its tensor inputs'.

    >>> import torch, fxviz
    >>> rec = fxviz.record(lambda x: x.half() + 1, torch.ones(2))
    >>> fxviz.dtype_changed(rec["half"]), fxviz.dtype_changed(rec["add"])
    (True, False)
    """
    if record.dtype is None:
        return False
    known = [d for d in record.input_dtypes if d is not None]
    return bool(known) and record.dtype not in known
