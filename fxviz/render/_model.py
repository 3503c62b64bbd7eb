"""The drawing model: nodes, edges and module paths, whatever graph they came from.

FX graphs, exported programs and TorchScript graphs are all turned into a
:class:`DrawGraph` first; DOT is made from that one shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable
from typing import Any

__all__ = ["DrawEdge", "DrawGraph", "DrawNode", "defer", "dot_id"]

_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def dot_id(name: str, prefix: str = "") -> str:
    """A DOT node id for ``name``: the name itself when it is a plain identifier (every
    name torch.fx makes is), else a stable id derived from it.

    >>> dot_id("linear1"), dot_id('<b>"x":y')
    ('linear1', '_h7b5565f073e4')
    """
    text = prefix + name
    if _PLAIN_ID.match(text):
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


def _lazy(field: str) -> property:
    """A field whose value may be a function, called (once) when the field is first read."""
    private = f"_lazy_{field}"

    def get(self: DrawNode) -> Any:
        value = self.__dict__[private]
        if callable(value):
            value = self.__dict__[private] = value()
        return value

    def put(self: DrawNode, value: Any) -> None:
        self.__dict__[private] = value

    return property(get, put)


# A collapsed 50,000-node graph shows a hundred boxes: nobody reads the tooltips of the
# nodes inside them, so draw_fx defers them until the DOT of an opened module asks.
setattr(DrawNode, "tooltip", _lazy("tooltip"))  # noqa: B010 (a dataclass field made lazy)


def defer(node: DrawNode, *, tooltip: Callable[[], str]) -> DrawNode:
    """``node`` with its tooltip made by ``tooltip()`` when first read, not now.

    >>> node = defer(DrawNode("a", "a", "call_function", "relu"), tooltip=lambda: "a: relu")
    >>> node.tooltip
    'a: relu'
    """
    node.__dict__["_lazy_tooltip"] = tooltip
    return node


@dataclasses.dataclass(frozen=True)
class DrawEdge:
    """An edge ``src -> dst`` between node ids; ``style`` is a DOT style such as dashed."""

    src: str
    dst: str
    label: str = ""
    style: str = ""


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
