"""Which nodes a view draws and which it folds into one box per module."""

from __future__ import annotations

import collections
import dataclasses
import math

from fxviz.render._model import DrawGraph, dot_id

__all__ = [
    "BIG_GRAPH",
    "group_wide",
    "module_id",
    "module_members",
    "opening_depth",
    "unit_path",
    "units",
]

BIG_GRAPH = 300  # visible nodes above which a view opens collapsed by module
WIDE_LEVEL = BIG_GRAPH  # modules or loose nodes side by side above which they are grouped


def module_id(path: str, prefix: str = "module__") -> str:
    """``layers.0`` -> ``module__layers__0`` (readable ids for module boxes and clusters)."""
    return dot_id(path.replace(".", "__"), prefix)


def unit_path(
    module: str, depth: int | None, expand: frozenset[str], collapse: frozenset[str] = frozenset()
) -> str | None:
    """The module a node collapses into, or ``None`` when it is drawn itself."""
    if not module:
        return None
    parts = module.split(".")
    for cut in range(1, len(parts) + 1):  # an explicitly collapsed module wins
        if ".".join(parts[:cut]) in collapse:
            return ".".join(parts[:cut])
    if depth is None:
        return None
    if len(parts) < depth:
        return None
    cut = depth
    while cut <= len(parts) and ".".join(parts[:cut]) in expand:
        cut += 1
    if cut > len(parts):
        return None
    return ".".join(parts[:cut])


def opening_depth(draw: DrawGraph, limit: int = BIG_GRAPH) -> int | None:
    """``None`` (draw everything) for small graphs; else the deepest collapse that keeps
    at most ``limit`` visible units."""
    if len(draw.nodes) <= limit:
        return None
    for depth in (4, 3, 2):
        if len({unit_path(n.module, depth, frozenset()) or n.id for n in draw.nodes}) <= limit:
            return depth
    return 1


def units(
    draw: DrawGraph,
    depth: int | None,
    expand: frozenset[str] = frozenset(),
    collapse: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """``{node name: DOT id of what draws it}``: its module's box, or the node itself
    (a box around a single node is not drawn)."""
    by_module = {m: unit_path(m, depth, expand, collapse) for m in {n.module for n in draw.nodes}}
    counts = collections.Counter(by_module[n.module] for n in draw.nodes)
    ids = {path: module_id(path) for path in counts if path}  # once per box, not per node
    return {
        n.name: ids[path] if (path := by_module[n.module]) and counts[path] > 1 else n.id
        for n in draw.nodes
    }


def group_wide(draw: DrawGraph, limit: int = WIDE_LEVEL, groups: int = 100) -> DrawGraph:
    """``draw`` with every level that holds more than ``limit`` modules or loose nodes
    split into about ``groups`` consecutive groups, each a module of its own
    (``"relu_1 … add_9"``): a flat 20,000-node chain then opens as 100 boxes and each box
    expands to a few hundred nodes, a size Graphviz lays out quickly.

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
    new = [".".join(p) for p in paths]
    if all(a == n.module for a, n in zip(new, draw.nodes, strict=True)):
        return draw
    renamed: dict[str, str] = {}
    moved = {n.module: parts for n, parts in zip(draw.nodes, paths, strict=True) if n.module}
    for module, parts in moved.items():  # once per module, not per node
        old_parts = module.split(".")
        for cut in range(1, len(old_parts) + 1):
            prefix = ".".join(old_parts[:cut])
            if prefix not in renamed:
                renamed[prefix] = ".".join(parts[: _position(parts, old_parts, cut)])
    nodes = [dataclasses.replace(n, module=m) for n, m in zip(draw.nodes, new, strict=True)]
    modules = {renamed.get(k, k): v for k, v in draw.modules.items()}
    params = {renamed.get(k, k): v for k, v in draw.params.items()}
    for path in made:
        modules.setdefault(path, "group")
    return dataclasses.replace(draw, nodes=nodes, modules=modules, params=params)


def _position(parts: list[str], old_parts: list[str], cut: int) -> int:
    """How many of ``parts`` (the grouped path) cover ``old_parts[:cut]``."""
    seen = 0
    for i, part in enumerate(parts):
        if seen < len(old_parts) and part == old_parts[seen]:
            seen += 1
            if seen == cut:
                return i + 1
    return len(parts)


def _group_level(
    paths: list[list[str]],
    names: list[str],
    members: list[int],
    level: int,
    limit: int,
    groups: int,
    made: set[str],
) -> None:
    keys = [paths[i][level] if len(paths[i]) > level else "\0" + names[i] for i in members]
    order = list(dict.fromkeys(keys))
    if len(order) > limit:
        size = math.ceil(len(order) / groups)
        label: dict[str, str] = {}
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            name = f"{_shown(chunk[0])} … {_shown(chunk[-1])}"
            for key in chunk:
                label[key] = name
        for i, key in zip(members, keys, strict=True):
            paths[i].insert(level, label[key])
            made.add(".".join(paths[i][: level + 1]))
    children: dict[str, list[int]] = collections.defaultdict(list)
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
