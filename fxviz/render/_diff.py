"""What a pass changed in a graph, node by node: :class:`GraphDiff`, the structural view of
the comparison engine (the numbers are measured in :mod:`fxviz._compare`)."""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING, Any, cast

from fxviz.errors import InputError, warn_deprecated
from fxviz.render._align import Pair, align, transformer_provenance
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import Style

if TYPE_CHECKING:
    import graphviz
    import pandas as pd

__all__ = ["GraphDiff", "Pair", "diff", "structure_diff"]

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
        comparison: with inputs, the :class:`~fxviz.Comparison` that measured the values
            (``None`` for a structural diff).

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
        self.comparison: Any = None
        self.first_divergence: str | None = None

    def measured_by(self, comparison: Any) -> None:
        """Take the numbers of the comparison engine (one ``NodeComparison`` a pair, in
        the same order): errors, ``allclose``, ``diverged`` and the first divergence."""
        measured = []
        for p, n in zip(self.pairs, comparison.pairs, strict=True):
            m = n.metrics
            detail = _with(p.detail, n.reason) if n.diverged and m is None else p.detail
            measured.append(
                dataclasses.replace(
                    p,
                    detail=detail,
                    max_abs_error=None if m is None else m.max_abs_error,
                    max_rel_error=None if m is None else m.max_rel_error,
                    allclose=m.allclose if m is not None else (False if n.diverged else None),
                    diverged=n.diverged if n.measured or n.diverged else None,
                    reason=n.reason,
                )
            )
        self.pairs, self.comparison = measured, comparison
        first = comparison.first_divergence
        self.first_divergence = first.b if first is not None else None

    def changes(self) -> list[Pair]:
        """The pairs that are not ``same``."""
        return [p for p in self.pairs if p.status != "same"]

    def table(self) -> pd.DataFrame:
        """One row a pair: ``before``, ``after``, ``status``, ``target_before``,
        ``target_after``, ``detail`` and, when inputs were given, ``max_abs_error``,
        ``max_rel_error``, ``allclose``, ``diverged`` and ``reason`` (``None`` where a pair
        was not measured; ``reason`` says why)."""
        import pandas as pd

        rows = []
        numeric = self.comparison is not None
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
                    "diverged": p.diverged,
                    "reason": p.reason,
                }
            rows.append(row)
        columns = ["before", "after", "status", "target_before", "target_after", "detail"]
        if numeric:
            columns += ["max_abs_error", "max_rel_error", "allclose", "diverged", "reason"]
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
        comparison = self.comparison
        if comparison is not None:
            measured = sum(p.measured for p in comparison.pairs)
            if self.first_divergence:
                text += f"; first divergence at {self.first_divergence!r}"
            elif comparison.agree:
                text += "; outputs agree everywhere"
            elif measured:
                text += f"; outputs agree on the {measured} of {len(self.pairs)} pairs compared"
            else:
                text += "; no outputs could be compared"
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


def structure_diff(before: Any, after: Any) -> GraphDiff:
    """Align two graphs node by node and say what changed, without running them.

    ``before``/``after`` as for :func:`fxviz.diff` (GraphModules or anything
    ``fxviz.trace`` takes, a Recording of a Transformer as ``after``, TorchScript).
    """
    from fxviz.render._api import draw
    from fxviz.render._torchscript import is_torchscript

    after, provenance = transformer_provenance(after)
    if not (is_torchscript(before) or is_torchscript(after)):
        from fxviz.capture import trace

        before, after = trace(before), trace(cast(Any, after))
    left, right = draw(before, params="show"), draw(after, params="show")
    return GraphDiff(left, right, align(left, right, provenance))


def diff(before: Any, after: Any, *inputs: Any, **options: Any) -> GraphDiff:
    """Deprecated name of :func:`fxviz.diff` (``fxviz.render`` draws; comparing values is
    the compare layer's work). Without inputs it gives the same structural diff."""
    warn_deprecated("fxviz.render.diff", "fxviz.diff")
    if inputs or options:
        raise InputError(
            "fxviz.render.diff compares structure only; call fxviz.diff(before, after, "
            "*inputs) to run both graphs and compare their values"
        )
    return structure_diff(before, after)


def _with(text: str, extra: str) -> str:
    return f"{text}\n{extra}" if extra else text
