"""Which nodes a view draws and which it folds into one box per module."""

from __future__ import annotations

from fxviz.render._model import DrawGraph, dot_id

__all__ = [
    "BIG_GRAPH",
    "call_label",
    "module_id",
    "opening_depth",
    "real_path",
    "unit_path",
    "units",
]

BIG_GRAPH = 300  # visible nodes above which a view opens collapsed by module


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


def unit_path(
    module: str, depth: int | None, expand: frozenset[str], collapse: frozenset[str] = frozenset()
) -> str | None:
    """The module a node collapses into, or ``None`` when it is drawn itself."""
    if not module:
        return None
    parts = module.split(".")
    for cut in range(1, len(parts) + 1):  # an explicitly collapsed module wins
        prefix = ".".join(parts[:cut])
        if prefix in collapse or (real_path(prefix) in collapse and "@" in prefix):
            return prefix
    if depth is None:
        return None
    if len(parts) < depth:
        return None
    cut = depth
    while cut <= len(parts) and (
        ".".join(parts[:cut]) in expand or real_path(".".join(parts[:cut])) in expand
    ):
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
    paths = {n.name: unit_path(n.module, depth, expand, collapse) for n in draw.nodes}
    counts: dict[str, int] = {}
    for path in paths.values():
        if path:
            counts[path] = counts.get(path, 0) + 1
    return {
        n.name: module_id(paths[n.name]) if paths[n.name] and counts[paths[n.name]] > 1 else n.id
        for n in draw.nodes
    }


def real_path(path: str) -> str:
    """``blk@2.0`` -> ``blk.0``: a drawn module path without call numbers.

    >>> real_path("blk@2.0"), real_path("pool")
    ('blk.0', 'pool')
    """
    return ".".join(part.split("@", 1)[0] for part in path.split("."))
