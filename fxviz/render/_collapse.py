"""The one owner of DOT ids for modules and of collapsing: which nodes a view draws and
which it folds into one box per module. A module called more than once has one group per
call: its later calls' paths carry ``@k`` (``pool@2``, drawn as ``pool (call 2)``).

The DOT renderer, the widget and the report all read :func:`fold`, and a cluster title
seen in the browser is turned back into its module by :func:`cluster_path` (split
``_partK`` clusters included).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re

from fxviz.render._model import DrawGraph, DrawNode, dot_id

__all__ = [
    "BIG_GRAPH",
    "Box",
    "Folding",
    "call_label",
    "cluster_id",
    "cluster_path",
    "deepest_depth",
    "fold",
    "group_wide",
    "module_id",
    "module_members",
    "opening_depth",
    "real_path",
    "unit_path",
    "units",
]

BIG_GRAPH = 300  # visible nodes above which a view opens collapsed by module
_PART = re.compile(r"_part\d+\Z")
WIDE_LEVEL = BIG_GRAPH  # modules or loose nodes side by side above which they are grouped


def module_id(path: str, prefix: str = "module__") -> str:
    """``layers.0`` -> ``module__layers__0`` (readable ids for module boxes and clusters)."""
    return dot_id(path.replace(".", "__").replace("@", "__call"), prefix)


def call_label(path: str) -> str:
    """``pool@2`` -> ``pool (call 2)``: a module path as people read it.

    >>> call_label("blk@2.0"), call_label("layers.1")
    ('blk (call 2).0', 'layers.1')
    """
    return ".".join(
        f"{name} (call {number})" if number else name
        for name, _, number in (part.partition("@") for part in path.split("."))
    )


def cluster_id(path: str, part: int | None = None) -> str:
    """The DOT subgraph name of a module's frame (``part``: one piece of a split frame).

    >>> cluster_id("layers.0"), cluster_id("layers", 1)
    ('cluster_m_layers__0', 'cluster_m_layers_part1')
    """
    base = f"cluster_{module_id(path, 'm_')}"
    return base if part is None else f"{base}_part{part}"


def cluster_path(draw: DrawGraph, cluster: str) -> str | None:
    """The module path whose frame is called ``cluster`` (any part of a split frame), or None.

    >>> from fxviz.render._model import DrawGraph, DrawNode
    >>> g = DrawGraph("g", [DrawNode("a", "a", "call_function", "relu", module="layers.0")], [])
    >>> cluster_path(g, "cluster_m_layers__0"), cluster_path(g, "cluster_m_layers_part3")
    ('layers.0', 'layers')
    """
    base = _PART.sub("", cluster)
    for path in sorted({p for n in draw.nodes for p in _prefixes(n.module)}):
        if cluster_id(path) in (cluster, base):
            return path
    return None


def _prefixes(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def unit_path(
    module: str, depth: int | None, expand: frozenset[str], collapse: frozenset[str] = frozenset()
) -> str | None:
    """The module a node collapses into, or ``None`` when it is drawn itself."""
    if not module:
        return None
    parts = module.split(".")
    for cut in range(1, len(parts) + 1 if collapse else 0):  # an explicitly collapsed module wins
        prefix = ".".join(parts[:cut])
        if prefix in collapse or (real_path(prefix) in collapse and "@" in prefix):
            return prefix
    if depth is None:
        return None
    if len(parts) < depth:
        return None
    if not expand or not _under(module, expand):  # most modules of a 50,000-node graph
        return ".".join(parts[:depth])
    cut = depth
    while cut <= len(parts) and (
        ".".join(parts[:cut]) in expand or real_path(".".join(parts[:cut])) in expand
    ):
        cut += 1
    if cut > len(parts):
        return None
    return ".".join(parts[:cut])


def _under(module: str, paths: frozenset[str]) -> bool:
    """Whether ``module`` (or its path without call numbers) starts with one of ``paths``
    as text: a cheap test that none of them is a prefix of it when False."""
    plain = real_path(module) if "@" in module else module
    return any(module.startswith(p) or plain.startswith(p) for p in paths)


@dataclasses.dataclass
class Box:
    """A collapsed module drawn as one node."""

    id: str
    path: str
    members: list[DrawNode]


@dataclasses.dataclass
class Folding:
    """What one view draws: ``boxes`` by module path, and for every node id the DOT id
    of what draws it (``where``: its module's box, or the node itself)."""

    boxes: dict[str, Box]
    where: dict[str, str]
    box_of: dict[str, str | None]  # node id -> path of the box it is folded into

    def units(self, draw: DrawGraph) -> dict[str, str]:
        """``{node name: DOT id of what draws it}`` (what the browser needs)."""
        return {n.name: self.where[n.id] for n in draw.nodes}


def fold(
    draw: DrawGraph,
    depth: int | None,
    expand: frozenset[str] = frozenset(),
    collapse: frozenset[str] = frozenset(),
) -> Folding:
    """Collapse modules per ``depth``/``expand``/``collapse``; a box around a single node
    (a leaf module's one call) is not drawn: the node is."""
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be >= 1 (or None for no collapsing), not {depth}")
    by_module = {m: unit_path(m, depth, expand, collapse) for m in {n.module for n in draw.nodes}}
    box_of: dict[str, str | None] = {}
    boxes: dict[str, Box] = {}
    for n in draw.nodes:  # one pass: a 50,000-node graph is folded at each expansion
        path = box_of[n.id] = by_module[n.module]
        if path is not None:
            box = boxes.get(path)
            if box is None:
                box = boxes[path] = Box(module_id(path), path, [])
            box.members.append(n)
    for path, box in list(boxes.items()):
        if len(box.members) == 1:
            box_of[box.members[0].id] = None
            del boxes[path]
    ids = {p: box.id for p, box in boxes.items()}
    where = {i: i if p is None else ids[p] for i, p in box_of.items()}
    return Folding(boxes, where, box_of)


def opening_depth(draw: DrawGraph, limit: int = BIG_GRAPH) -> int | None:
    """``None`` (draw everything) for small graphs; else the deepest collapse that keeps
    at most ``limit`` visible units."""
    if len(draw.nodes) <= limit:
        return None
    per_module = collections.Counter(n.module for n in draw.nodes)
    loose_at: collections.Counter[int] = collections.Counter()  # nodes directly k deep
    paths_at: collections.Counter[int] = collections.Counter()  # module paths k deep
    seen: set[str] = set()
    for module, count in per_module.items():  # once per module, not per node
        parts = module.split(".") if module else []
        loose_at[len(parts)] += count
        for cut in range(len(parts), 0, -1):  # from the deepest: stop at a known prefix
            path = ".".join(parts[:cut])
            if path in seen:
                break
            seen.add(path)
            paths_at[cut] += 1
    return deepest_depth(loose_at, paths_at, limit)


def deepest_depth(
    loose_at: collections.Counter[int], paths_at: collections.Counter[int], limit: int
) -> int:
    """The deepest collapse (4 to 1) showing at most ``limit`` units, given how many nodes
    sit directly ``k`` deep (``loose_at``) and how many module paths are ``k`` deep."""
    for depth in (4, 3, 2):  # a box per path ``depth`` deep, nodes less deep drawn loose
        loose = sum(count for k, count in loose_at.items() if k < depth)
        if paths_at[depth] + loose <= limit:
            return depth
    return 1


def units(
    draw: DrawGraph,
    depth: int | None,
    expand: frozenset[str] = frozenset(),
    collapse: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """``{node name: DOT id of what draws it}`` for this view (see :func:`fold`)."""
    return fold(draw, depth, expand, collapse).units(draw)


def real_path(path: str) -> str:
    """``blk@2.0`` -> ``blk.0``: a drawn module path without call numbers.

    >>> real_path("blk@2.0"), real_path("pool")
    ('blk.0', 'pool')
    """
    return ".".join(part.split("@", 1)[0] for part in path.split("."))


def group_wide(
    draw: DrawGraph, limit: int = WIDE_LEVEL, groups: int = 100, *, in_place: bool = False
) -> DrawGraph:
    """``draw`` with every level that holds more than ``limit`` modules or loose nodes
    split into about ``groups`` consecutive groups, each a module of its own
    (``"relu_1 … add_9"``): a flat 20,000-node chain then opens as 100 boxes and each box
    expands to a few hundred nodes, a size Graphviz lays out quickly.

    ``in_place``: move ``draw``'s own nodes and return ``draw`` (for a model nobody else
    holds: copying 100,000 nodes costs more than grouping them); else a grouped copy.

    >>> from fxviz.render._model import DrawNode
    >>> chain = DrawGraph("chain", [DrawNode(f"n{i}", f"n{i}", "call_function", "f")
    ...                             for i in range(1000)], [])
    >>> sorted({n.module for n in group_wide(chain).nodes})[:2]
    ['n0 … n9', 'n10 … n19']
    """
    paths = [n.module.split(".") if n.module else [] for n in draw.nodes]
    made: set[str] = set()
    names = [n.name for n in draw.nodes]
    _group_level(paths, names, list(range(len(paths))), 0, limit, groups, made)
    if not made:  # no level was split: every path is as it was
        return draw
    new = [".".join(p) for p in paths]
    renamed: dict[str, str] = {}
    moved = {n.module: parts for n, parts in zip(draw.nodes, paths, strict=True) if n.module}
    for module, parts in moved.items():  # once per module, not per node
        if module not in renamed:  # else a longer path mapped it and every prefix of it
            _rename_prefixes(module.split("."), parts, renamed)
    modules = {renamed.get(k, k): v for k, v in draw.modules.items()}
    params = {renamed.get(k, k): v for k, v in draw.params.items()}
    for path in made:
        modules.setdefault(path, "group")
    if in_place:
        for n, m in zip(draw.nodes, new, strict=True):
            n.module = m
        draw.modules, draw.params = modules, params
        return draw
    nodes = [_moved(n, m) for n, m in zip(draw.nodes, new, strict=True)]
    return dataclasses.replace(draw, nodes=nodes, modules=modules, params=params)


def _rename_prefixes(old_parts: list[str], parts: list[str], renamed: dict[str, str]) -> None:
    """Map each prefix of ``old_parts`` to the prefix of ``parts`` (the same path with
    group names inserted) that covers it, in one walk (prefixes already mapped kept)."""
    seen = 0
    for i, part in enumerate(parts):
        if seen < len(old_parts) and part == old_parts[seen]:
            seen += 1
            prefix = ".".join(old_parts[:seen])
            if prefix not in renamed:
                renamed[prefix] = ".".join(parts[: i + 1])
    for cut in range(seen + 1, len(old_parts) + 1):  # not found in order: the whole path
        renamed.setdefault(".".join(old_parts[:cut]), ".".join(parts))


def _moved(node: DrawNode, module: str) -> DrawNode:
    """``node`` in ``module``: a shallow copy (``dataclasses.replace`` would make the
    deferred tooltip of every node now)."""
    if node.module == module:
        return node
    moved = object.__new__(DrawNode)  # copy.copy, without its generic machinery
    moved.__dict__.update(node.__dict__)
    moved.module = module
    return moved


def _group_level(
    paths: list[list[str]],
    names: list[str],
    members: list[int],
    level: int,
    limit: int,
    groups: int,
    made: set[str],
) -> None:
    if len(members) <= limit:  # no level below can hold more than ``limit`` either
        return
    keys = [paths[i][level] if len(paths[i]) > level else "\0" + names[i] for i in members]
    order = list(dict.fromkeys(keys))
    children: dict[str, list[int]] = collections.defaultdict(list)
    if len(order) > limit:
        size = math.ceil(len(order) / groups)
        label: dict[str, str] = {}
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            name = f"{_shown(chunk[0])} … {_shown(chunk[-1])}"
            for key in chunk:
                label[key] = name
        prefix = paths[members[0]][:level]  # the members' path so far (one group's)
        made.update(".".join([*prefix, name]) for name in set(label.values()))
        for i, key in zip(members, keys, strict=True):
            name = label[key]
            paths[i].insert(level, name)
            children[name].append(i)
    else:
        for i in members:
            if len(paths[i]) > level:
                children[paths[i][level]].append(i)
    for sub in children.values():
        _group_level(paths, names, sub, level + 1, limit, groups, made)


def _shown(key: str) -> str:
    return key.lstrip("\0").replace(".", "·")


def module_members(draw: DrawGraph, path: str) -> DrawGraph:
    """Only the nodes inside module ``path`` and the edges between them: one collapsed
    box opened on its own (what an offline report shows when a box is clicked)."""
    inside = [n for n in draw.nodes if n.module == path or n.module.startswith(path + ".")]
    ids = {n.id for n in inside}
    edges = [e for e in draw.edges if e.src in ids and e.dst in ids]
    return dataclasses.replace(draw, name=f"{draw.name}.{path}", nodes=inside, edges=edges)
