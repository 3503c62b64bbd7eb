"""``fxviz.diff``: what a pass changed in a graph, node by node, and where numbers diverge."""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING, Any, cast

import torch

from fxviz._record._records import Recording
from fxviz.render._align import Pair, align
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import Style

if TYPE_CHECKING:
    import graphviz
    import pandas as pd

__all__ = ["GraphDiff", "Pair", "diff"]

_STATUS_STYLES = {
    "changed": Style(
        fill="#ffd8a8", border="#e8590c", penwidth=2.0, badge="changed", classes=("diff-changed",)
    ),
    "added": Style(
        fill="#c3fac8", border="#2b8a3e", penwidth=2.0, badge="added", classes=("diff-added",)
    ),
    "removed": Style(
        fill="#ffc9c9", border="#c92a2a", penwidth=2.0, badge="removed", classes=("diff-removed",)
    ),
    "replaced": Style(
        fill="#e5dbff", border="#6741d9", penwidth=2.0, badge="replaced", classes=("diff-replaced",)
    ),
    "inlined": Style(
        fill="#d0ebff",
        border="#1971c2",
        penwidth=2.0,
        badge="inlined as constant",
        classes=("diff-inlined",),
    ),
    "same": Style(classes=("diff-same",)),
}


class GraphDiff:
    """The aligned nodes of two graphs; see :func:`fxviz.diff`.

    Attributes:
        pairs: one :class:`Pair` per node of either graph, in the order of ``after``
            (removed nodes where they were).
        first_divergence: with inputs, the first node (of ``after``) whose output is not
            close to its counterpart's; ``None`` when all are.

    Examples:
        >>> import torch, fxviz
        >>> x = torch.ones(2)
        >>> d = fxviz.diff(fxviz.trace(lambda x: x.relu(), x), fxviz.trace(lambda x: x.relu() + 1, x), x)
        >>> d.summary(), d.first_divergence
        ("1 changed, 1 added, 0 removed; first divergence at 'add'", 'add')
    """

    def __init__(self, before: DrawGraph, after: DrawGraph, pairs: list[Pair]) -> None:
        self.before = before
        self.after = after
        self.pairs = pairs
        diverged = [p for p in pairs if p.allclose is False and p.after is not None]
        self.first_divergence = diverged[0].after.name if diverged else None  # type: ignore[union-attr]

    def changes(self) -> list[Pair]:
        """The pairs that are not ``same``."""
        return [p for p in self.pairs if p.status != "same"]

    def table(self) -> pd.DataFrame:
        """One row a pair: ``before``, ``after``, ``status``, ``target_before``,
        ``target_after``, ``detail`` and, when inputs were given, ``max_abs_error``,
        ``max_rel_error`` and ``allclose``."""
        import pandas as pd

        rows = []
        numeric = any(p.allclose is not None for p in self.pairs)
        for p in self.pairs:
            row = {
                "before": p.before.name if p.before else "",
                "after": p.after.name if p.after else "",
                "status": p.status,
                "target_before": p.before.title if p.before else "",
                "target_after": p.after.title if p.after else "",
                "detail": p.detail,
            }
            if numeric:
                row |= {
                    "max_abs_error": p.max_abs_error,
                    "max_rel_error": p.max_rel_error,
                    "allclose": p.allclose,
                }
            rows.append(row)
        columns = ["before", "after", "status", "target_before", "target_after", "detail"]
        if numeric:
            columns += ["max_abs_error", "max_rel_error", "allclose"]
        return pd.DataFrame(rows, columns=columns)  # the columns even for two empty graphs

    def summary(self) -> str:
        """``2 changed, 1 added, 0 removed; first divergence at 'relu'``."""
        counts = {
            s: sum(p.status == s for p in self.pairs)
            for s in ("changed", "replaced", "added", "removed", "inlined")
        }
        text = ", ".join(
            f"{n} {s}" for s, n in counts.items() if n or s not in ("inlined", "replaced")
        )
        if any(p.allclose is not None for p in self.pairs):
            text += (
                f"; first divergence at {self.first_divergence!r}"
                if self.first_divergence
                else "; outputs agree everywhere"
            )
        return text

    def merged(self) -> DrawGraph:
        """Both graphs in one: ``after``'s nodes, and ``before``'s removed ones where they were."""
        nodes: list[DrawNode] = []
        edges: list[DrawEdge] = list(self.after.edges)
        counterpart = {p.before.id: p.after.id for p in self.pairs if p.before and p.after}
        removed_ids = {}
        for p in self.pairs:
            if p.after is not None:
                nodes.append(dataclasses.replace(p.after, tooltip=_with(p.after.tooltip, p.detail)))
            elif p.before is not None:
                node_id = f"removed__{p.before.id}"
                removed_ids[p.before.id] = node_id
                nodes.append(
                    dataclasses.replace(
                        p.before, id=node_id, tooltip=_with(p.before.tooltip, "removed")
                    )
                )
        for e in self.before.edges:
            if e.src in removed_ids or e.dst in removed_ids:
                src = removed_ids.get(e.src) or counterpart.get(e.src)
                dst = removed_ids.get(e.dst) or counterpart.get(e.dst)
                if src and dst:
                    edges.append(DrawEdge(src, dst, style="dashed"))
        return DrawGraph(
            f"{self.after.name} (diff)",
            nodes,
            edges,
            {**self.before.modules, **self.after.modules},
            {**self.before.params, **self.after.params},
            internal_paths=self.after.internal_paths,
        )

    def overlay(self) -> Any:
        """The overlay that colours nodes by status (used by :meth:`to_dot`)."""
        status = {}
        for p in self.pairs:
            if p.after is not None:
                status[p.after.id] = p.status
            elif p.before is not None:
                status[f"removed__{p.before.id}"] = "removed"
                status[p.before.id] = "removed"
        for p in self.pairs:  # on the "before" side, mark what changed there too
            if p.before is not None and p.after is not None and p.status != "same":
                status.setdefault(p.before.id, p.status)

        def colour(node: DrawNode) -> Style | None:
            return _STATUS_STYLES.get(status.get(node.id, ""))

        return colour

    def to_dot(self, view: str = "merged", **options: Any) -> graphviz.Digraph:
        """DOT of the ``"merged"`` view (colours by status), or of ``"before"``/``"after"``
        alone with their changes coloured; options as for :func:`fxviz.to_dot`."""
        from fxviz.render._api import to_dot

        graphs = {"merged": self.merged, "before": lambda: self.before, "after": lambda: self.after}
        if view not in graphs:
            raise ValueError(f"unknown view: {view!r} (must be one of {list(graphs)})")
        extra = options.pop("overlay", None)
        overlays = [self.overlay(), *([extra] if callable(extra) else list(extra or []))]
        return to_dot(graphs[view](), overlay=overlays, **options)

    def __repr__(self) -> str:
        return f"<fxviz.GraphDiff: {self.summary()}>"

    def _repr_html_(self) -> str:
        table = self.table()
        shown = table[table["status"] != "same"] if len(table) > 40 else table
        body = shown.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.3g}")
        return f"<div><p><b>fxviz.GraphDiff</b>: {html.escape(self.summary())}</p>{body}</div>"


def diff(
    before: Any, after: Any, *inputs: Any, rtol: float = 1e-5, atol: float = 1e-6
) -> GraphDiff:
    """Align two graphs node by node and say what changed.

    Nodes are matched by provenance (``node.meta["from_node"]``, or the ``produced``
    records of a recorded ``Transformer``), then by name, then by target and position.
    What a pass erased is then paired with what it put in its place by graph structure
    (same users, else same inputs): ``replaced`` rows name both nodes and targets, a node
    fused away says what it was fused into, and a node inserted on an edge is compared
    with the value that flowed there before. Given inputs, both graphs run on them
    (through the recorder) and every aligned pair of outputs is compared;
    ``first_divergence`` names the first that is not close: the node the pass changed.

    Args:
        before, after: GraphModules (or anything ``fxviz.trace`` takes), a Recording of
            a Transformer as ``after``, or TorchScript modules/graphs (e.g. a scripted
            module and ``torch.jit.freeze`` of it).
        *inputs: run both graphs on these and compare values.

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
    from fxviz.render._api import draw
    from fxviz.render._torchscript import is_torchscript

    provenance: dict[str, str] = {}
    if isinstance(after, Recording) and isinstance(after.output, torch.fx.GraphModule):
        provenance = {new: r.name for r in after.values() for new in r.produced}
        after = after.output
    if is_torchscript(before) or is_torchscript(after):
        if inputs:
            raise TypeError("TorchScript diffs compare structure only: pass no inputs")
        left, right = draw(before, params="show"), draw(after, params="show")
        return GraphDiff(left, right, align(left, right, provenance))
    from fxviz.capture import trace

    gm_before, gm_after = trace(before, *inputs), trace(cast(Any, after), *inputs)
    records_before = records_after = None
    if inputs:
        from fxviz._record import record

        records_before = record(gm_before, *inputs)
        records_after = record(gm_after, *inputs)
    left = draw(records_before if records_before is not None else gm_before, params="show")
    right = draw(records_after if records_after is not None else gm_after, params="show")
    pairs = align(left, right, provenance)
    if records_before is not None and records_after is not None:
        pairs = [_compare(p, records_before, records_after, rtol, atol) for p in pairs]
    return GraphDiff(left, right, pairs)


def _compare(pair: Pair, before: Recording, after: Recording, rtol: float, atol: float) -> Pair:
    reference = pair.before or pair.reference
    if reference is None or pair.after is None:
        return pair
    x = _first_tensor(before, reference.name)
    y = _first_tensor(after, pair.after.name)
    if x is None or y is None:
        return pair
    if x.shape != y.shape:
        return dataclasses.replace(
            pair,
            allclose=False,
            detail=_with(pair.detail, f"shape {tuple(x.shape)} → {tuple(y.shape)}"),
        )
    # compared in double precision; complex outputs stay complex (.double() would drop
    # their imaginary parts)
    wide = torch.complex128 if x.is_complex() or y.is_complex() else torch.float64
    a, b = x.detach().to(wide), y.detach().to(wide)
    abs_err = (a - b).abs()
    max_abs = float(abs_err.max()) if abs_err.numel() else 0.0
    max_rel = float((abs_err / a.abs().clamp_min(1e-12)).max()) if abs_err.numel() else 0.0
    close = bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return dataclasses.replace(pair, max_abs_error=max_abs, max_rel_error=max_rel, allclose=close)


def _first_tensor(recording: Recording, name: str) -> torch.Tensor | None:
    if name not in recording:
        return None
    value = recording[name].value
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _with(text: str, extra: str) -> str:
    return f"{text}\n{extra}" if extra else text
