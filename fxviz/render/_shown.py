"""What one view draws, found from the module tree: the work of a view, and of opening
or closing one module, is proportional to what it shows, not to the size of the graph.

:func:`fxviz.render._collapse.fold` answers the same question with a pass over every
node; :class:`ModuleTree` is made once per drawing (one pass) and then only walks the
modules a view opens. Both give the same DOT (``tests/render/test_shown.py``).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from fxviz.render._collapse import (
    _PART,
    BIG_GRAPH,
    Box,
    cluster_id,
    deepest_depth,
    module_id,
    real_path,
    unit_path,
)
from fxviz.render._model import DrawEdge, DrawGraph, DrawNode
from fxviz.render._overlays import Marks, Overlay, box_marks

__all__ = ["ModuleTree", "Shown"]


@dataclasses.dataclass
class Shown:
    """What a view draws: ``loose`` nodes (drawn themselves, in graph order), collapsed
    ``boxes`` (in the order of their first node), the ``edges`` to draw (in graph order,
    before mapping) and ``where`` (node id -> DOT id of what draws it, for their ends);
    ``tree``, when given, keeps what does not change from one view to the next (a box's
    marks and DOT statement: :meth:`ModuleTree.marks`, :meth:`ModuleTree.kept_lines`)."""

    loose: list[DrawNode]
    boxes: list[Box]
    edges: Iterable[DrawEdge]
    where: Mapping[str, str]
    tree: ModuleTree | None = None


class _Members(Sequence[DrawNode]):
    """A box's nodes, in graph order, listed only when iterated (its size is known)."""

    def __init__(self, tree: ModuleTree, path: str) -> None:
        self.tree, self.path = tree, path

    def __len__(self) -> int:
        return self.tree.count.get(self.path, 0)

    def __getitem__(self, i):
        picked = self.tree.indices(self.path)[i]  # the cached numbers, not a list of nodes
        nodes = self.tree.draw.nodes
        return [nodes[k] for k in picked] if isinstance(i, slice) else nodes[picked]

    def __iter__(self) -> Iterator[DrawNode]:
        nodes = self.tree.draw.nodes
        return (nodes[k] for k in self.tree.indices(self.path))

    def __reversed__(self) -> Iterator[DrawNode]:
        nodes = self.tree.draw.nodes
        return (nodes[k] for k in reversed(self.tree.indices(self.path)))


class _Where(Mapping[str, str]):
    """Node id -> DOT id of what draws it in one view, worked out per module when asked."""

    def __init__(self, tree: ModuleTree, boxes: dict[str, str]) -> None:
        self.tree, self.boxes = tree, boxes  # box path -> DOT id
        self.by_module: dict[str, str | None] = {}

    def __getitem__(self, node_id: str) -> str:
        module = self.tree.module_of[node_id]
        box = self.by_module.get(module, "")
        if box == "":
            box = self.by_module[module] = next(
                (self.boxes[p] for p in _prefixes(module) if p in self.boxes), None
            )
        return box or node_id

    def __iter__(self) -> Iterator[str]:
        return iter(self.tree.module_of)

    def __len__(self) -> int:
        return len(self.tree.module_of)


class ModuleTree:
    """The module paths of a drawing as a tree: for each path its child paths, the nodes
    directly in it, how many nodes it holds, and the edges whose ends first meet in it
    (an edge is drawn exactly when the module where its ends meet is drawn open).

    ``touched`` counts the nodes a call has had to look at (a test reads it: opening
    one module touches that module's nodes, whatever the size of the graph).

    Examples:
        >>> import torch, fxviz
        >>> from fxviz.render._api import Drawing
        >>> model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2, 2),
        ...                                                    torch.nn.ReLU())] * 1)
        >>> tree = ModuleTree(Drawing(fxviz.trace(model)).graph)
        >>> [b.path for b in tree.shown(1, frozenset(), frozenset()).boxes]
        ['0']
    """

    def __init__(self, draw: DrawGraph) -> None:
        self.draw = draw
        self.kids: dict[str, list[str]] = collections.defaultdict(list)  # in graph order
        self.direct: dict[str, list[int]] = {}
        self.count: dict[str, int] = {}
        # blk.0 -> blk@2.0...: the other calls' paths (a path is its own call, not listed)
        self.by_real: dict[str, list[str]] = collections.defaultdict(list)
        self.touched = 0
        self._clusters: dict[str, str] | None = None
        self._indices: dict[str, list[int]] = {}
        # per overlays object: each box's marks and DOT statement (see _kept)
        self._kept: tuple[Sequence[Overlay], dict[str, Marks], dict[Any, str]] | None = None
        direct = self.direct
        module_of = self.module_of = {n.id: n.module for n in draw.nodes}
        for i, module in enumerate(module_of.values()):  # one pass (ids are unique)
            members = direct.get(module)
            if members is None:
                direct[module] = [i]
            else:
                members.append(i)
        if len(module_of) != len(draw.nodes):  # ids repeat: number the nodes one by one
            direct.clear()
            for i, n in enumerate(draw.nodes):
                direct.setdefault(n.module, []).append(i)
        count = self.count
        kids, by_real = self.kids, self.by_real
        new: list[str] = []
        for module, members in direct.items():  # once per module: its chain of parents
            path = module
            while path not in count:  # a path not met yet: listed under its parent
                count[path] = 0
                new.append(path)
                if not path:
                    break
                path = path.rpartition(".")[0]
            # listed from the outermost: a parent's kids are in the order of their first nodes
            for path in reversed(new):
                if path:
                    kids[path.rpartition(".")[0]].append(path)
                    if "@" in path:  # only a later call's path differs from its real one
                        by_real[real_path(path)].append(path)
            new.clear()
            path, size = module, len(members)
            while path:
                count[path] += size
                path = path.rpartition(".")[0]
            count[""] += size
        self.meet: dict[str, list[int]] = collections.defaultdict(list)  # path -> edge numbers
        meet = self.meet
        get = module_of.get
        into, at = None, ""  # an edge's head: a node's inputs are listed one after another
        for k, e in enumerate(draw.edges):
            tail = get(e.src, "")
            if e.dst is not into:
                into, at = e.dst, get(e.dst, "")
            meet[tail if tail == at else _common(tail, at)].append(k)

    def opening_depth(self, limit: int = BIG_GRAPH) -> int | None:
        """What :func:`fxviz.render._collapse.opening_depth` finds, from the modules
        listed here (no pass over the nodes)."""
        if len(self.draw.nodes) <= limit:
            return None
        loose_at: collections.Counter[int] = collections.Counter()
        paths_at: collections.Counter[int] = collections.Counter()
        for module, members in self.direct.items():
            loose_at[module.count(".") + 1 if module else 0] += len(members)
        for path in self.count:
            if path:
                paths_at[path.count(".") + 1] += 1
        return deepest_depth(loose_at, paths_at, limit)

    def cluster_path(self, cluster: str) -> str | None:
        """The module path whose frame is called ``cluster`` (any part of a split frame),
        as :func:`fxviz.render._collapse.cluster_path` finds it, from a map made once."""
        if self._clusters is None:
            self._clusters = {cluster_id(p): p for p in sorted(self.count, reverse=True) if p}
        base = _PART.sub("", cluster)
        return self._clusters.get(cluster) or self._clusters.get(base)

    def indices(self, path: str) -> list[int]:
        """The numbers of the nodes inside ``path`` (its sub-modules' too), in graph order
        (kept: a box drawn again in the next view costs nothing)."""
        cached = self._indices.get(path)
        if cached is not None:
            return cached
        found: list[int] = []
        stack = [path]
        while stack:
            p = stack.pop()
            found.extend(self.direct.get(p, ()))
            stack.extend(self.kids.get(p, ()))
        found.sort()
        self.touched += len(found)
        self._indices[path] = found
        return found

    def marks(self, path: str, overlays: Sequence[Overlay]) -> Marks:
        """What ``overlays`` leave on the box of ``path`` (:func:`box_marks` of its nodes),
        made from its sub-modules' marks and kept, per overlays object: each node meets
        the overlays once per drawing, so opening a module (whose boxes were parts of the
        box it was) calls no overlay at all. No overlays (a bare graph's drawing) mark
        nothing: then no node nor sub-module is looked at."""
        if not overlays:
            return box_marks((), overlays)
        kept = self._for(overlays)[0]
        found = kept.get(path)
        if found is None:
            nodes, direct = self.draw.nodes, self.direct.get(path, ())
            self.touched += len(direct)
            found = box_marks((nodes[i] for i in direct), overlays)
            for kid in self.kids.get(path, ()):  # as deep as the module paths: a few levels
                found |= self.marks(kid, overlays)
            kept[path] = found
        return found

    def kept_lines(self, overlays: Sequence[Overlay]) -> dict[Any, str]:
        """Where the DOT renderer keeps each box's statement drawn with ``overlays``
        (a box is drawn the same in every view: only the boxes a view adds are made)."""
        return self._for(overlays)[1]

    def _for(self, overlays: Sequence[Overlay]) -> tuple[dict[str, Marks], dict[Any, str]]:
        if self._kept is None or self._kept[0] is not overlays:
            self._kept = (overlays, {}, {})
        return self._kept[1], self._kept[2]

    def roots(self, paths: Iterable[str]) -> set[str]:
        """The drawn paths that expanding or collapsing ``paths`` may change (a module
        called more than once is one path per call: ``blk.0`` and ``blk@2.0``)."""
        found: set[str] = set()
        for path in paths:
            found.update(p for p in (path, *self.by_real.get(path, ())) if p in self.count)
        return found

    def _walk(
        self,
        top: str,
        depth: int | None,
        expand: frozenset[str],
        collapse: frozenset[str],
    ) -> tuple[list[int], list[str], list[str]]:
        """Under ``top`` (drawn open): the loose node numbers, the box paths and the
        paths drawn open (``top`` included)."""
        loose: list[int] = []
        boxes: list[str] = []
        opened: list[str] = []
        stack = [top]
        while stack:
            path = stack.pop()
            opened.append(path)
            loose.extend(self.direct.get(path, ()))
            self.touched += len(self.direct.get(path, ()))
            for child in self.kids.get(path, ()):
                unit = unit_path(child, depth, expand, collapse)
                if unit is None:
                    stack.append(child)
                elif self.count.get(child, 0) == 1:  # a box around one node: the node is drawn
                    loose.extend(self.indices(child))
                else:
                    boxes.append(child)
        return loose, boxes, opened

    def shown(self, depth: int | None, expand: frozenset[str], collapse: frozenset[str]) -> Shown:
        """What the view ``depth``/``expand``/``collapse`` draws (as :func:`fold` would)."""
        loose, paths, opened = self._walk("", depth, expand, collapse)
        nodes = self.draw.nodes
        first = {p: self._first(p) for p in paths}
        boxes = [Box(module_id(p), p, _Members(self, p)) for p in sorted(paths, key=first.get)]  # type: ignore[arg-type]
        numbers = sorted(k for p in opened for k in self.meet.get(p, ()))
        edges = [self.draw.edges[k] for k in numbers]
        where = _Where(self, {b.path: b.id for b in boxes})
        return Shown([nodes[i] for i in sorted(loose)], boxes, edges, where, self)

    def _first(self, path: str) -> int:
        """The number of the first node inside ``path``: directly in it, or in its first
        child (children are kept in the order of their first nodes)."""
        direct, kids = self.direct.get(path), self.kids.get(path)
        found = [direct[0]] if direct else []
        if kids:
            found.append(self._first(kids[0]))
        return min(found) if found else 0

    def units(
        self,
        depth: int | None,
        expand: frozenset[str],
        collapse: frozenset[str],
        top: str = "",
    ) -> dict[str, str]:
        """``{node name: DOT id of what draws it}`` for the nodes under ``top`` (all of
        them by default): what a view's ``units`` holds, for one module when only that
        module was opened or closed."""
        nodes = self.draw.nodes
        if top:
            unit = unit_path(top, depth, expand, collapse)
            if unit is not None and unit != top:  # inside a box further up: nothing moved
                return {}
            if unit == top:
                members = self.indices(top)
                drawn = module_id(top) if len(members) > 1 else None
                return {nodes[i].name: drawn or nodes[i].id for i in members}
        loose, boxes, _ = self._walk(top, depth, expand, collapse)
        found = {nodes[i].name: nodes[i].id for i in loose}
        for path in boxes:
            box_id = module_id(path)
            found.update((nodes[i].name, box_id) for i in self.indices(path))
        return found


def _prefixes(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _common(a: str, b: str) -> str:
    """The deepest module path both ``a`` and ``b`` are in (``""``: none).

    >>> _common("blk.0.a", "blk.0"), _common("blk.0.a", "blk.1.a"), _common("x", "")
    ('blk.0', 'blk', '')
    """
    if a == b:
        return a
    if not a or not b:
        return ""
    if b.startswith(a) and b[len(a)] == ".":  # an edge into a sub-module: the usual case
        return a
    if a.startswith(b) and a[len(b)] == ".":
        return b
    common = []
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        common.append(x)
    return ".".join(common)
