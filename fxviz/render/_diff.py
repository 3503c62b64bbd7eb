"""``fxviz.diff``: what a pass changed in a graph, node by node, and where numbers diverge."""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING, Any, cast

import torch

from fxviz._record._records import Recording
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import Style

if TYPE_CHECKING:
    import graphviz
    import pandas as pd

__all__ = ["GraphDiff", "diff"]

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
    "inlined": Style(
        fill="#d0ebff",
        border="#1971c2",
        penwidth=2.0,
        badge="inlined as constant",
        classes=("diff-inlined",),
    ),
    "same": Style(classes=("diff-same",)),
}


@dataclasses.dataclass(frozen=True)
class Pair:
    """One row of a diff: a node before, its counterpart after, and what happened."""

    before: DrawNode | None
    after: DrawNode | None
    status: str  # same, changed, added, removed, inlined
    detail: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    allclose: bool | None = None


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
        ("1 changed, 1 added, 0 removed; first divergence at 'output'", 'output')
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
            for s in ("changed", "added", "removed", "inlined")
        }
        text = ", ".join(f"{n} {s}" for s, n in counts.items() if n or s != "inlined")
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
    Given inputs, both graphs run on them (through the recorder) and every aligned pair
    of outputs is compared; ``first_divergence`` names the first that is not close.

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
        left, right = draw(before), draw(after)
        return GraphDiff(left, right, _align(left, right, provenance))
    from fxviz.capture import trace

    gm_before, gm_after = trace(before, *inputs), trace(cast(Any, after), *inputs)
    records_before = records_after = None
    if inputs:
        from fxviz._record import record

        records_before = record(gm_before, *inputs)
        records_after = record(gm_after, *inputs)
    left = draw(records_before if records_before is not None else gm_before)
    right = draw(records_after if records_after is not None else gm_after)
    pairs = _align(left, right, provenance)
    if records_before is not None and records_after is not None:
        pairs = [_compare(p, records_before, records_after, rtol, atol) for p in pairs]
    return GraphDiff(left, right, pairs)


def _align(before: DrawGraph, after: DrawGraph, provenance: dict[str, str]) -> list[Pair]:
    """Greedy matching, most telling key first: provenance, name, target and rank."""
    match: dict[str, DrawNode] = {}  # after id -> before node
    taken: set[str] = set()
    for new_name, old_name in provenance.items():
        a = next((n for n in after.nodes if n.name == new_name), None)
        b = next((n for n in before.nodes if n.name == old_name), None)
        if a is not None and b is not None and b.id not in taken and a.id not in match:
            match[a.id] = b
            taken.add(b.id)
    levels = max((len(n.align) for n in [*before.nodes, *after.nodes]), default=0)
    for level in range(levels):
        index: dict[str, DrawNode] = {}
        for b in before.nodes:
            if b.id not in taken and level < len(b.align):
                index.setdefault(b.align[level], b)
        for a in after.nodes:
            if a.id in match:
                continue
            for key in a.align:
                b = index.get(key)
                if b is not None and b.id not in taken and key in b.align[level : level + 1]:
                    match[a.id] = b
                    taken.add(b.id)
                    break
    inputs_before = _inputs(before)
    inputs_after = _inputs(after)
    renamed = {b.id: a_id for a_id, b in match.items()}
    pairs: list[Pair] = []
    removed = [b for b in before.nodes if b.id not in taken]
    position = {b.id: i for i, b in enumerate(before.nodes)}
    for a in after.nodes:
        b = match.get(a.id)
        while removed and b is not None and position[removed[0].id] < position[b.id]:
            pairs.append(Pair(removed.pop(0), None, "removed"))
        if b is None:
            pairs.append(Pair(None, a, "added"))
            continue
        pairs.append(_compare_structure(b, a, inputs_before, inputs_after, renamed))
    pairs.extend(Pair(b, None, "removed") for b in removed)
    return pairs


def _compare_structure(
    b: DrawNode, a: DrawNode, inputs_before: dict, inputs_after: dict, renamed: dict
) -> Pair:
    if b.kind == "get_attr" and a.kind == "constant":
        return Pair(b, a, "inlined", f"{b.title} is now a constant")
    details = []
    if b.kind != a.kind:
        details.append(f"op {b.kind} → {a.kind}")
    if b.title != a.title:
        details.append(f"target {b.title} → {a.title}")
    was = [renamed.get(i, f"?{i}") for i in inputs_before.get(b.id, [])]
    now = inputs_after.get(a.id, [])
    if was != now:
        details.append("inputs changed")
    return Pair(b, a, "changed" if details else "same", "; ".join(details))


def _inputs(graph: DrawGraph) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in graph.edges:
        if not e.style:  # data edges only
            found.setdefault(e.dst, []).append(e.src)
    return found


def _compare(pair: Pair, before: Recording, after: Recording, rtol: float, atol: float) -> Pair:
    if pair.before is None or pair.after is None:
        return pair
    x = _first_tensor(before, pair.before.name)
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
