"""``fxviz.diff`` and ``fxviz.shapes_diff``: the structural views of the comparison engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fxviz._compare._comparison import engine
from fxviz._compare._thresholds import DEFAULT_SQNR_DB, Criterion
from fxviz._shapes._report import ShapeReport
from fxviz.errors import InputError
from fxviz.render._align import align, transformer_provenance
from fxviz.render._diff import GraphDiff, structure_diff

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["diff", "shapes_diff"]


def diff(
    before: Any,
    after: Any,
    *inputs: Any,
    metric: str = "allclose",
    sqnr_db: float = DEFAULT_SQNR_DB,
    min_cosine: float = 0.999,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kwargs: Any,
) -> GraphDiff:
    """Align two graphs node by node and say what changed; given inputs, where values part.

    Use ``diff`` for *what a pass changed in the graph* (added, removed, replaced, fused,
    inlined nodes, drawn in one merged picture) and :func:`fxviz.compare` for *how the
    values of two runs differ* (dtypes, devices, inputs). Both are views of one engine:
    the same alignment and, given inputs, the same float64 numbers and the same
    thresholds (``metric``, ``sqnr_db``, ``min_cosine``, ``rtol``, ``atol``; ``diff``
    defaults to ``"allclose"``, any change counts). The full comparison is then
    ``diff.comparison``.

    Nodes are matched by provenance (``node.meta["from_node"]``, or the ``produced``
    records of a recorded ``Transformer``), then by name, then by target and position.
    What a pass erased is then paired with what it put in its place by graph structure
    (same users, else same inputs): ``replaced`` rows name both nodes and targets, a node
    fused away says what it was fused into, and a node inserted on an edge is compared
    with the value that flowed there before. Given inputs, both graphs run on them
    (through the recorder) and every aligned pair is measured; ``first_divergence`` names
    the first node of ``after`` that fails the criterion: the node the pass changed.

    Args:
        before, after: GraphModules (or anything ``fxviz.trace`` takes), a Recording of
            a Transformer as ``after``, or TorchScript modules/graphs (e.g. a scripted
            module and ``torch.jit.freeze`` of it).
        *inputs, **kwargs: run both graphs on these (as ``model(*inputs, **kwargs)``: a
            Hugging Face model's keyword inputs) and compare values.
        metric, sqnr_db, min_cosine, rtol, atol: the criterion, as for
            :func:`fxviz.compare`.

    Examples:
        >>> import torch, fxviz
        >>> from fxviz.examples import NegSigmSwapXformer, neg_sigmoid
        >>> gm = torch.fx.symbolic_trace(neg_sigmoid)
        >>> swapped = fxviz.record(gm, interpreter=NegSigmSwapXformer)  # knows what made what
        >>> d = fxviz.diff(gm, swapped, torch.randn(3))
        >>> d.summary()
        "2 changed, 0 added, 0 removed; first divergence at 'neg'"
        >>> [(p.before.title, p.after.title) for p in d.changes()]
        [('torch.sigmoid', 'torch.neg'), ('.neg()', '.sigmoid()')]
    """
    from fxviz.render._torchscript import is_torchscript

    criterion = Criterion(metric, sqnr_db, min_cosine, rtol, atol)
    if not (inputs or kwargs):
        return structure_diff(before, after)
    if is_torchscript(before) or is_torchscript(after):
        raise InputError("TorchScript diffs compare structure only: pass no inputs")
    from fxviz._record import record
    from fxviz.capture import trace

    after, provenance = transformer_provenance(after)
    a, b = (record(trace(graph, *inputs, **kwargs), *inputs, **kwargs) for graph in (before, after))
    return engine(a, b, criterion, provenance=provenance, params="show").diff


def shapes_diff(a: ShapeReport, b: ShapeReport) -> pd.DataFrame:
    """Nodes whose shapes or dtypes differ between two reports, aligned as :func:`fxviz.diff`
    aligns graphs (provenance, name, then target and rank), so reports of a graph before
    and after a pass line up too.

    Indexed by the node's name in ``b`` (in ``a`` for removed nodes). Columns:
    ``shape_a``, ``shape_b``, ``dtype_a``, ``dtype_b``, ``change`` (``shape``, ``dtype``,
    ``shape, dtype``, ``added`` or ``removed``) and ``name_a`` (the node's name in ``a``).

    Examples:
        >>> import torch, fxviz
        >>> model = torch.nn.Linear(8, 2)
        >>> d = fxviz.shapes_diff(fxviz.shapes(model, fxviz.spec(1, 8)), fxviz.shapes(model, fxviz.spec(4, 8)))
        >>> d.loc["linear", ["shape_a", "shape_b", "change"]].tolist()
        ['1×2', '4×2', 'shape']
    """
    import pandas as pd

    from fxviz.render._api import draw

    for side, report in (("a", a), ("b", b)):
        if not isinstance(report, ShapeReport):
            raise InputError(
                f"shapes_diff() takes two ShapeReports; {side} is a {type(report).__name__}: "
                "make one with fxviz.shapes(model, *inputs)"
            )
    left, right = a.table(), b.table()
    rows = []
    for p in align(draw(a, params="show"), draw(b, params="show"), {}):
        name_a = p.before.name if p.before is not None and p.before.name in left.index else None
        name_b = p.after.name if p.after is not None and p.after.name in right.index else None
        if name_a is None and name_b is None:
            continue
        shape_a = left.at[name_a, "shape"] if name_a else ""
        shape_b = right.at[name_b, "shape"] if name_b else ""
        dtype_a = left.at[name_a, "dtype"] if name_a else ""
        dtype_b = right.at[name_b, "dtype"] if name_b else ""
        if name_a is None or name_b is None:
            change = "added" if name_b else "removed"
        else:
            differs = (("shape", shape_a != shape_b), ("dtype", dtype_a != dtype_b))
            change = ", ".join(kind for kind, different in differs if different)
        if change:
            rows.append(
                {
                    "name": name_b or name_a,
                    "shape_a": shape_a,
                    "shape_b": shape_b,
                    "dtype_a": dtype_a,
                    "dtype_b": dtype_b,
                    "change": change,
                    "name_a": name_a or "",
                }
            )
    columns = ["name", "shape_a", "shape_b", "dtype_a", "dtype_b", "change", "name_a"]
    return pd.DataFrame(rows, columns=columns).set_index("name")
