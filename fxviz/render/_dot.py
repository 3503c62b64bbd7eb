"""A :class:`DrawGraph` as Graphviz DOT: module clusters, collapsing, overlays, a legend.

DOT is built with the ``graphviz`` package (which quotes every id and attribute) and is
deterministic, so the same graph gives the same bytes.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

import graphviz

from fxviz.render._collapse import Box, Folding, call_label, cluster_id, fold
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode, dot_id
from fxviz.render._overlays import Overlay, apply_overlays, box_marks
from fxviz.render._shown import ModuleTree, Shown
from fxviz.render._style import KIND_STYLES, html_label, palette_colour, tooltip_text

__all__ = ["KIND_LABELS", "MAX_CLUSTER_CHILDREN", "render", "shown_title"]

MAX_CLUSTER_CHILDREN = 500  # larger groups are split so no single layout is huge
_INPUT_KINDS = ("placeholder", "get_attr", "parameter", "buffer", "constant")

# What each node kind is called in a legend: the DOT legend here and, through the page
# contract (fxviz/render/_payload.py), the widget's and the report's HTML legends.
KIND_LABELS: dict[str, str] = {
    "placeholder": "input",
    "output": "output",
    "get_attr": "attribute",
    "parameter": "parameter",
    "buffer": "buffer",
    "constant": "constant",
    "call_function": "function",
    "call_method": "method",
    "call_module": "module call",
    "module": "collapsed module",
    "stub": "copy of a widely used input",
    "collective": "collective",
}
_FONT = "Helvetica,Arial,sans-serif"
_WIDE_MARGIN = "0.24,0.08"  # inches, for nodes drawn with a badge or a thick outline
_BOX3D_MARGIN = "0.17,0.05"  # a module call's box: its 3-D edge overlaps the label's margin


def render(
    draw: DrawGraph,
    *,
    depth: int | None = None,
    expand: Iterable[str] = (),
    collapse: Iterable[str] = (),
    overlays: Sequence[Overlay] = (),
    legend: bool = True,
    edge_labels: bool | None = None,
    rankdir: str = "TB",
    max_label: int = 40,
    stub_fanout: int = 6,
    folding: Folding | None = None,
    shown: Shown | None = None,
) -> graphviz.Digraph:
    """DOT for ``draw``; see :func:`fxviz.to_dot` for the arguments. ``folding`` is the
    view's collapse (:func:`fxviz.render._collapse.fold`), computed here when not given;
    ``shown`` is what it draws, when known without a pass over every node
    (:meth:`fxviz.render._shown.ModuleTree.shown`)."""
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be >= 1 (or None for no collapsing), not {depth}")
    if isinstance(max_label, bool) or not isinstance(max_label, int) or max_label < 1:
        raise ValueError(
            f"max_label must be a positive int (the longest label line, e.g. 40), not {max_label!r}"
        )
    if shown is None:
        if folding is None:
            folding = fold(draw, depth, frozenset(expand), frozenset(collapse))
        shown = Shown(
            [n for n in draw.nodes if folding.box_of[n.id] is None],
            list(folding.boxes.values()),
            draw.edges,
            folding.where,
        )
    where = shown.where

    dot = graphviz.Digraph(
        name=dot_id(draw.name),
        graph_attr={
            "rankdir": rankdir,
            "fontname": _FONT,
            "fontsize": "11",
            "nodesep": "0.25",
            "ranksep": "0.35",
            "newrank": "true",
            "tooltip": tooltip_text(draw.name),
        },
        node_attr={"fontname": _FONT, "fontsize": "11", "margin": "0.12,0.05", "height": "0.3"},
        edge_attr={"fontname": _FONT, "fontsize": "9", "color": "#555555", "arrowsize": "0.6"},
    )
    label_edges = edge_labels if edge_labels is not None else len(draw.nodes) <= 400
    stubs = _stubbed_inputs(draw, where, stub_fanout)

    tree = _Tree()
    for n in shown.loose:
        tree.add(n.module, ("node", n))
        if n.cluster:
            tree.extra[n.id] = n.cluster
    for box in shown.boxes:
        tree.add(_parent(box.path), ("box", box))
    statements = _Statements(draw, overlays, max_label, stubs, shown.tree)
    tree.emit(dot, statements, draw)

    seen: set[tuple[str, str]] = set()
    kinds = {n.id: n for n in draw.nodes} if label_edges else {}  # sources of labels
    for edge in shown.edges:
        src, dst = where.get(edge.src, edge.src), where.get(edge.dst, edge.dst)
        if src == dst:
            continue
        if edge.src in stubs:
            stub = f"{edge.src}__to__{dst}"
            if (stub, dst) not in seen:
                seen.add((stub, dst))
                dot.edge(stub, dst, **_edge_attrs(edge, None, False))
            continue
        if (src, dst) in seen:
            continue
        seen.add((src, dst))
        dot.edge(src, dst, **_edge_attrs(edge, kinds.get(edge.src), label_edges))
    if legend:
        _legend(dot, draw, shown.boxes)
    return dot


def _subgraph(graph: graphviz.Digraph, name: str) -> AbstractContextManager[graphviz.Digraph]:
    """``graph.subgraph(name=...)`` as a context (the package's types say it may be None)."""
    return cast("AbstractContextManager[graphviz.Digraph]", graph.subgraph(name=name))


def _parent(path: str) -> str:
    return path.rpartition(".")[0]


def _natural(path: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if p.isdigit() else (1, p) for p in path.split(".")]


def _stubbed_inputs(draw: DrawGraph, where: Mapping[str, str], fanout: int) -> set[str]:
    """Inputs used by many places (a causal mask, shared weights): drawn as a small copy
    beside each user, because one node with edges to every layer makes ``dot`` explode."""
    if not fanout:
        return set()
    users: dict[str, set[str]] = collections.defaultdict(set)
    for edge in _input_edges(draw):
        users[edge.src].add(where.get(edge.dst, edge.dst))
    return {src for src, dsts in users.items() if len(dsts) > fanout}


def _input_edges(draw: DrawGraph) -> list[DrawEdge]:
    """The edges leaving inputs (placeholders, fetches): a few of a 50,000-node graph's
    edges, found once per graph rather than at each view."""
    return _inputs(draw)[1]


def _inputs(draw: DrawGraph) -> tuple[dict[str, DrawNode], list[DrawEdge]]:
    """The input nodes by id and the edges leaving them, found once per graph (kept on
    ``draw``, with the node and edge lists they were read from, so changed lists are
    read again)."""
    cached = draw.__dict__.get("_fxviz_input_edges")
    if (
        cached is not None
        and cached[0] is draw.edges
        and cached[1] == len(draw.edges)
        and cached[2] is draw.nodes
        and cached[3] == len(draw.nodes)
    ):
        return cached[4]
    inputs = {n.id: n for n in draw.nodes if n.kind in _INPUT_KINDS}
    found = (inputs, [e for e in draw.edges if e.src in inputs])
    draw.__dict__["_fxviz_input_edges"] = (
        draw.edges,
        len(draw.edges),
        draw.nodes,
        len(draw.nodes),
        found,
    )
    return found


def _edge_attrs(edge: DrawEdge, source: DrawNode | None, label: bool) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if label and source is not None and source.out_label:
        attrs["label"] = tooltip_text(source.out_label)
    if edge.label:
        attrs["label"] = tooltip_text(edge.label)
    if edge.style:
        attrs["style"] = edge.style
    return attrs


# torch's internal spellings of the functions a person wrote, as the person wrote them
_USER_PREFIXES = (
    ("torch._C._nn.", "F."),
    ("torch.nn.functional.", "F."),
    ("torch._C._linalg.", "torch.linalg."),
)


def shown_title(n: DrawNode, modules: dict[str, str]) -> str:
    """What a node's label calls it: the user's names, never torch's internals. A function
    call that is all of its module (``torch._C._nn.linear`` inside an ``nn.Linear``) is
    that module (``Linear(64→128)``); other internal spellings become what the user wrote
    (``F.scaled_dot_product_attention``).

    >>> from fxviz.render._model import DrawNode
    >>> node = DrawNode("g0_linear", "g0_linear", "call_function", "torch._C._nn.linear", module="0")
    >>> shown_title(node, {"0": "Linear(64→128)"}), shown_title(node, {})
    ('Linear(64→128)', 'F.linear')
    """
    title = n.title
    if n.kind != "call_function":
        return title
    label = modules.get(n.module, "") if n.module else ""
    short = title.rsplit(".", 1)[-1].replace("_", "").lower()
    if label and label.split("(", 1)[0].lower() == short:
        return label
    for internal, user in _USER_PREFIXES:
        if title.startswith(internal):
            return user + title.removeprefix(internal)
    return title


class _Statements:
    """Emits node statements (plain nodes, collapsed boxes, stubs) with their overlays."""

    def __init__(
        self,
        draw: DrawGraph,
        overlays: Sequence[Overlay],
        limit: int,
        stubs: set[str],
        tree: ModuleTree | None = None,
    ) -> None:
        self.draw = draw
        self.overlays = overlays
        self.limit = limit
        self.stubs = stubs
        self.tree = tree  # keeps boxes' marks and statements across views, when given
        self.lines = tree.kept_lines(overlays) if tree is not None else None

    def node(self, graph: graphviz.Digraph, n: DrawNode) -> None:
        style, badges = apply_overlays(n, self.overlays)
        shape, base, fill = KIND_STYLES.get(n.kind, KIND_STYLES["call_function"])
        title = shown_title(n, self.draw.modules)
        bold = n.name if n.name != title else ""
        try:
            label = html_label(title, [*n.lines, *badges], bold=bold, limit=self.limit)
        except Exception:  # one bad label never blanks the graph
            label = tooltip_text(n.name)
        tooltip = n.tooltip + (f"\n{style.tooltip}" if style.tooltip else "")
        attrs = {
            "label": label,
            "shape": shape,
            "style": base,
            "fillcolor": style.fill or fill or palette_colour(n.color_key or n.title),
            "tooltip": tooltip_text(tooltip),
            "class": " ".join(["fx-node", f"kind-{n.kind}", *style.classes]),
        }
        if style.border:
            attrs["color"] = style.border
        if style.penwidth:
            attrs["penwidth"] = str(style.penwidth)
        if badges or style.penwidth or "diagonals" in base:
            # a badge, a thick outline or a method's corner diagonals would touch the text:
            # a wider margin keeps it clear
            attrs["margin"] = _WIDE_MARGIN
        elif shape == "box3d":
            attrs["margin"] = _BOX3D_MARGIN  # its drawn depth takes room on the right
        graph.node(n.id, **attrs)

    def box(self, graph: graphviz.Digraph, box: Box) -> None:
        key = (box.path, box.id, self.limit)
        line = self.lines.get(key) if self.lines is not None else None
        if line is not None:  # drawn in an earlier view: the same statement
            graph.body.append(line)
            return
        self._box(graph, box)
        if self.lines is not None:
            self.lines[key] = graph.body[-1]

    def _box(self, graph: graphviz.Digraph, box: Box) -> None:
        draw = self.draw
        kind = draw.modules.get(box.path, "")
        params = draw.params.get(box.path, 0)
        # the box's output: its last node with a shape (looked for among its last few
        # nodes only: a graph without shapes would have every node's label made here)
        output = next(
            (m.out_label for m in itertools.islice(reversed(box.members), 8) if m.out_label), ""
        )
        lines = [f"{len(box.members)} nodes" + (f" · {_count(params)} params" if params else "")]
        if output:
            lines.append(f"→ {output}")
        style, badges = apply_overlays(
            DrawNode(box.id, box.path, "module", kind, module=box.path), self.overlays
        )
        # the members' overlays mark the box (an error or NaN inside)
        if self.tree is not None:
            marks = self.tree.marks(box.path, self.overlays)
        else:
            marks = box_marks(box.members, self.overlays)
        attrs = {
            "label": html_label(
                kind or box.path, [*lines, *badges], bold=call_label(box.path), limit=self.limit
            ),
            "shape": KIND_STYLES["module"][0],
            "style": KIND_STYLES["module"][1],
            "fillcolor": style.fill or KIND_STYLES["module"][2] or "",
            "tooltip": tooltip_text(f"{call_label(box.path)}: {kind}\n" + "\n".join(lines)),
            # the frame the box opens into (a page opening it keeps it where the box was)
            "class": " ".join(
                ["fx-module", f"opens-{cluster_id(box.path)}", *sorted(marks.classes)]
            ),
        }
        if marks.alarm:
            attrs["color"], attrs["penwidth"] = "#c00000", "2.5"
        graph.node(box.id, **attrs)

    def stub(self, graph: graphviz.Digraph, src: DrawNode, dst: str) -> None:
        graph.node(
            f"{src.id}__to__{dst}",
            label=html_label(src.name, [], limit=self.limit),
            shape=KIND_STYLES["stub"][0],
            style=KIND_STYLES["stub"][1],
            fillcolor=KIND_STYLES["stub"][2] or "",
            fontsize="9",
            tooltip=tooltip_text(f"{src.name} (drawn again beside each user)\n{src.tooltip}"),
            **{"class": f"fx-stub stub-of-{src.id}"},
        )


class _Tree:
    """Module paths as nested clusters, with what sits directly in each."""

    def __init__(self) -> None:
        self.members: dict[str, list[tuple[str, object]]] = collections.defaultdict(list)
        self.kids: dict[str, set[str]] = collections.defaultdict(set)
        self.extra: dict[str, str] = {}

    def add(self, path: str, item: tuple[str, object]) -> None:
        self.members[path].append(item)
        while path:
            parent = _parent(path)
            if path in self.kids[parent]:
                break  # the rest of the chain is known already
            self.kids[parent].add(path)
            self.members.setdefault(path, [])
            path = parent

    def children(self, path: str) -> list[str]:
        """Child module paths in natural order (``layers.2`` before ``layers.10``)."""
        return sorted(self.kids.get(path, ()), key=_natural)

    def emit(self, dot: graphviz.Digraph, out: _Statements, draw: DrawGraph) -> None:
        self._emit_level(dot, "", out, draw)
        if not out.stubs:
            return
        # stubs sit next to their users: in the same cluster is not needed for layout
        by_id, edges = _inputs(draw)  # stubs are of inputs: no pass over every node
        users: dict[str, set[str]] = collections.defaultdict(set)
        for edge in edges:
            if edge.src in out.stubs:
                users[edge.src].add(edge.dst)
        done: set[str] = set()
        for src in sorted(users):
            for dst in sorted(users[src]):
                stub_id = f"{src}__to__{dst}"
                if stub_id not in done:
                    done.add(stub_id)
                    out.stub(dot, by_id[src], dst)

    def _emit_level(
        self, graph: graphviz.Digraph, path: str, out: _Statements, draw: DrawGraph
    ) -> None:
        items = self.members.get(path, [])
        chunks = [
            items[i : i + MAX_CLUSTER_CHILDREN] for i in range(0, len(items), MAX_CLUSTER_CHILDREN)
        ]
        for k, chunk in enumerate(chunks or [[]]):
            if len(chunks) > 1 and path:
                with _subgraph(graph, cluster_id(path, k)) as part:
                    part.attr(
                        label=tooltip_text(f"{path} (part {k + 1}/{len(chunks)})"), style="dashed"
                    )
                    self._emit_items(part, chunk, out, draw)
            else:
                self._emit_items(graph, chunk, out, draw)
        for child in self.children(path):
            items = self.members.get(child, [])
            if len(items) == 1 and not self.children(child) and items[0][0] == "node":
                node: Any = items[0][1]
                if node.kind == "call_module":  # a leaf module: its one call needs no frame
                    out.node(graph, node)
                    continue
            if draw.internal_paths:
                label = draw.modules.get(child, child)
            else:
                label = f"{call_label(child)} · {draw.modules.get(child, '')}".rstrip(" ·")
            with _subgraph(graph, cluster_id(child)) as sub:
                sub.attr(
                    label=tooltip_text(label),
                    labeljust="l",
                    style="rounded,dashed",
                    color="#999999",
                    fontsize="10",
                    tooltip=tooltip_text(label),
                )
                self._emit_level(sub, child, out, draw)

    def _emit_items(
        self, graph: graphviz.Digraph, items: list, out: _Statements, draw: DrawGraph
    ) -> None:
        groups: dict[str, list] = collections.defaultdict(list)
        for kind, item in items:
            cluster = self.extra.get(item.id) if kind == "node" else None
            groups[cluster or ""].append((kind, item))
        for cluster in groups:  # in drawing order: a joint graph's forward pass first (left)
            if not cluster:
                for kind, item in groups[cluster]:
                    (out.node if kind == "node" else out.box)(graph, item)
                continue
            with _subgraph(graph, f"cluster_{dot_id(cluster, 'c_')}") as sub:
                sub.attr(
                    label=tooltip_text(draw.clusters.get(cluster, cluster)),
                    style="rounded,filled",
                    fillcolor="#f7f7ff",
                    color="#7777aa",
                    fontsize="10",
                )
                for kind, item in groups[cluster]:
                    (out.node if kind == "node" else out.box)(sub, item)


def _legend(dot: graphviz.Digraph, draw: DrawGraph, boxes: list[Box]) -> None:
    present = list(dict.fromkeys(n.kind for n in draw.nodes))
    if boxes:
        present.append("module")
    with _subgraph(dot, "cluster__legend") as legend:
        legend.attr(label="legend", fontsize="9", style="dotted", color="#aaaaaa")
        for kind in present:
            if kind not in KIND_STYLES:
                continue
            shape, style, fill = KIND_STYLES[kind]
            legend.node(
                f"fxviz:legend:{kind}",  # never a dot_id() result: no node merges into it
                label=KIND_LABELS.get(kind, kind),
                shape=shape,
                style=style,
                fillcolor=fill or "#dddddd",
                fontsize="9",
                **{"class": "fx-legend"},
            )


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)
