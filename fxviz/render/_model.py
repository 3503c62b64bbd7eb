"""The drawing model: nodes, edges and module paths, whatever graph they came from.

FX graphs, exported programs and TorchScript graphs are all turned into a
:class:`DrawGraph` first; DOT is made from that one shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

__all__ = [
    "DEFERRED",
    "DrawEdge",
    "DrawGraph",
    "DrawNode",
    "defer",
    "deferred_node",
    "dot_id",
    "new_edge",
]


def dot_id(name: str, prefix: str = "") -> str:
    """A DOT node id for ``name``: the name itself when it is a plain identifier (every
    name torch.fx makes is), else a stable id derived from it.

    >>> dot_id("linear1"), dot_id('<b>"x":y')
    ('linear1', '_h7b5565f073e4')
    >>> [dot_id(name) == name for name in ("_1", "1a", "é", "a-b", "")]
    [True, False, False, False, False]
    """
    text = prefix + name
    # [A-Za-z_][A-Za-z0-9_]*, without a regular expression run per node
    if text.isascii() and text.isidentifier():
        return text
    return "_h" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclasses.dataclass
class DrawNode:
    """One node as it will be drawn.

    ``kind`` is the FX op (``placeholder``, ``call_module``...) or, for other sources, a
    close equivalent (``parameter``, ``buffer``, ``constant``). ``lines`` are the label's
    lines under the title; ``record`` is the node's NodeRecord when one exists.
    """

    id: str
    name: str
    kind: str
    title: str
    lines: list[str] = dataclasses.field(default_factory=list)
    module: str = ""
    tooltip: str = ""
    color_key: str = ""
    out_label: str = ""  # put on edges leaving the node (its output shape)
    record: Any = None
    cluster: str | None = None  # an extra cluster the node belongs to
    align: tuple[str, ...] = ()  # identity keys for diffs, most telling first
    folded: tuple[tuple[str, str], ...] = ()  # (parameter name, shape) folded into it


# Fields a big graph's nodes need only once drawn: draw_fx defers them (one function a
# node makes all of them when one is first read), since a collapsed 100,000-node graph
# shows a hundred boxes and nobody reads the labels of the nodes inside them.
DEFERRED = ("title", "lines", "color_key", "out_label", "align", "folded", "tooltip")


_FILLED = object()  # a node whose deferred fields are made: its _of is gone


def _lazy(field: str) -> property:
    """A field made on first read: by the node's ``_fill`` (every deferred field at once),
    and, when its value is a function, by calling it (once)."""
    private = f"_lazy_{field}"

    def get(self: DrawNode) -> Any:
        d = self.__dict__
        if private not in d:
            # Read in the order a fill lets go of them (a fill that raised is tried
            # again): a node another thread filled meanwhile has its fields already.
            of = d.get("_of", _FILLED)
            fill = d.get("_fill")
            if fill is not None and of is not _FILLED:
                for key, value in fill(of).items():
                    d.setdefault(f"_lazy_{key}", value)  # a field set since stays as set
                d.pop("_fill", None)
                d.pop("_of", None)
        value = d[private]
        if callable(value):
            value = d[private] = value()
        return value

    def put(self: DrawNode, value: Any) -> None:
        self.__dict__[private] = value

    return property(get, put)


for _field in DEFERRED:
    setattr(DrawNode, _field, _lazy(_field))


def defer(node: DrawNode, *, tooltip: Callable[[], str]) -> DrawNode:
    """``node`` with its tooltip made by ``tooltip()`` when first read, not now.

    >>> node = defer(DrawNode("a", "a", "call_function", "relu"), tooltip=lambda: "a: relu")
    >>> node.tooltip
    'a: relu'
    """
    node.__dict__["_lazy_tooltip"] = tooltip
    return node


def deferred_node(
    id: str,
    name: str,
    kind: str,
    module: str,
    record: Any,
    fill: Callable[[Any], dict[str, Any]],
    of: Any = None,
) -> DrawNode:
    """A node whose :data:`DEFERRED` fields ``fill(of)`` makes when one is first read.

    One ``fill`` serves every node of a graph (``of`` says which node: an FX node, for
    instance), so a node costs one object: a partial or closure a node would be more
    objects for Python's cycle collector to walk once a 100,000-node drawing exists.

    >>> node = deferred_node("a", "a", "call_function", "", None, lambda of: {
    ...     "title": of.upper(), "lines": [], "color_key": "", "out_label": "",
    ...     "align": (), "folded": (), "tooltip": "a: relu"}, "relu")
    >>> node.title, node.module
    ('RELU', '')
    """
    node = object.__new__(DrawNode)  # no __init__: it would set (and so make) every field
    # set one by one: Python keeps them in the object itself (``__dict__`` read or
    # updated would make a dict object per node)
    node.id, node.name, node.kind, node.module = id, name, kind, module
    node.record, node.cluster = record, None
    node._fill, node._of = fill, of  # type: ignore[attr-defined]
    return node


@dataclasses.dataclass(frozen=True)
class DrawEdge:
    """An edge ``src -> dst`` between node ids; ``style`` is a DOT style such as dashed."""

    src: str
    dst: str
    label: str = ""
    style: str = ""


def new_edge(src: str, dst: str) -> DrawEdge:
    """``DrawEdge(src, dst)``, made in about half the time: a frozen dataclass's
    ``__init__`` sets each of its four fields through ``object.__setattr__``; the unset
    ``label`` and ``style`` are read from the class's defaults.

    >>> made, plain = new_edge("a", "b"), DrawEdge("a", "b")
    >>> made == plain, hash(made) == hash(plain), made.label, made.style
    (True, True, '', '')
    """
    edge = object.__new__(DrawEdge)
    fields = edge.__dict__
    fields["src"], fields["dst"] = src, dst
    return edge


@dataclasses.dataclass
class DrawGraph:
    """Nodes in execution order, edges, and what is known of the modules they sit in.

    ``modules`` maps a module path to its label (``"Linear(1000→100)"``); ``params`` to
    its parameter count; ``clusters`` names extra groups as ``{cluster_id: label}``.
    TorchScript blocks and fork subgraphs use module paths of their own
    (``internal_paths``), so only their labels are shown.
    """

    name: str
    nodes: list[DrawNode]
    edges: list[DrawEdge]
    modules: dict[str, str] = dataclasses.field(default_factory=dict)
    params: dict[str, int] = dataclasses.field(default_factory=dict)
    clusters: dict[str, str] = dataclasses.field(default_factory=dict)
    internal_paths: bool = False  # module paths are fxviz's own (blocks): show labels only
