"""ShapeReport: per-node shapes and dtypes as tables people read and export."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from fxviz._record._records import NodeRecord, Recording
from fxviz._record._summary import TensorSummary, dtype_name
from fxviz._shapes._counting import human_flops, module_totals

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ShapeReport", "format_shape"]

_ACTIVATION_OPS = ("call_function", "call_method", "call_module")
_COLUMNS = [
    *("op", "target", "module", "shape", "dtype", "device", "numel", "bytes"),
    *("params", "flops", "macs", "input_shapes", "symbolic_shape", "error"),
]


def format_shape(shape: tuple[int | str, ...] | None) -> str:
    """``(64, 100)`` -> ``"64×100"``; a 0-d tensor -> ``"scalar"``; none -> ``""``."""
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if shape else "scalar"


class ShapeReport(Mapping[str, NodeRecord]):
    """Shapes and dtypes of every node of one propagation, in execution order.

    A read-only mapping from node name to :class:`fxviz.NodeRecord` (``report["linear1"]
    .shape``). ``complete`` is false when a node failed; ``error`` then holds it and the
    nodes before it are kept.

    Examples:
        >>> import torch, fxviz
        >>> rep = fxviz.shapes(torch.nn.Sequential(torch.nn.Linear(8, 2)), torch.ones(4, 8))
        >>> row = rep.table().loc["_0"]
        >>> row["shape"], int(row["params"])
        ('4×2', 18)
    """

    def __init__(
        self,
        graph_module: torch.nn.Module,
        recording: Recording,
        *,
        mode: str,
        flops: dict[str, int] | None = None,
    ) -> None:
        self.graph_module = graph_module
        self.recording = recording
        self.mode = mode
        self.flops: dict[str, int] = dict(flops or {})
        """Each node's FLOPs (torch's ``FlopCounterMode``: 2 per multiply-add of matmuls,
        convolutions and attention; elementwise ops count 0)."""
        self.complete = recording.complete
        self.error = recording.error
        self._nodes = {n.name: n for n in graph_module.graph.nodes}  # type: ignore[union-attr]

    def __getitem__(self, name: str) -> NodeRecord:
        return self.recording[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.recording)

    def __len__(self) -> int:
        return len(self.recording)

    # -- derived facts -------------------------------------------------------------------
    def symbolic_shape(self, name: str) -> tuple[str, ...] | None:
        """The node's shape with symbolic sizes (``("s0", "10")``) when the graph has them
        (``torch.export`` with dynamic dims), else ``None``."""
        node = self._nodes.get(name)
        value = node.meta.get("val") if node is not None else None
        if isinstance(value, (tuple, list)) and value:
            value = value[0]
        if not isinstance(value, torch.Tensor):
            return None
        sizes = tuple(value.shape)
        if all(isinstance(d, int) for d in sizes):
            return None
        return tuple(str(d) for d in sizes)

    def params(self, name: str) -> int:
        """Parameters owned by a ``call_module`` node's module, or held by a ``get_attr``."""
        node = self._nodes.get(name)
        if node is None or node.op not in ("call_module", "get_attr"):
            return 0
        try:
            if node.op == "call_module":
                module = self.graph_module.get_submodule(str(node.target))
                return sum(p.numel() for p in module.parameters())
            value = self.graph_module.get_parameter(str(node.target))
            return value.numel()
        except AttributeError:
            return 0

    def summary(self) -> str:
        """One line, like ``Recording.summary()`` and ``GraphDiff.summary()``: nodes,
        parameters, FLOPs, activations and the peak of live activation memory.

        The numbers themselves are in :meth:`totals`; indexing the returned text by key
        (``summary()["peak_node"]``, the old dict form) still works, with an
        FxvizDeprecationWarning.

        Examples:
            >>> import torch, fxviz
            >>> print(fxviz.shapes(torch.nn.Linear(4, 2), fxviz.spec(3, 4), mode="meta").summary())
            5 nodes, mode=meta; parameters 10 (40 B); 48 FLOPs; activations 24 B; peak live 24 B at 'linear'
        """
        return _SummaryText(self._summary_line(), self.totals())

    def totals(self) -> dict[str, Any]:
        """Totals: nodes, parameters (and their bytes), activation bytes, the peak of
        live activation bytes along the execution order with the node where it happens,
        ``flops`` and ``macs`` (multiply-adds), and ``flops_by_module`` (every module
        path, enclosing ones included).

        An activation lives from its node until its last user has run; views and in-place
        results share their input's memory and are counted once.

        Examples:
            >>> import torch, fxviz
            >>> fxviz.shapes(torch.nn.Linear(4, 2), fxviz.spec(3, 4), mode="meta").totals()["parameters"]
            10
        """
        params = {id(p): p for p in self.graph_module.parameters()}
        records = self.recording.records()
        peak, at = _peak_live(records, self._nodes)
        total = sum(self.flops.values())
        return {
            "flops": total,
            "macs": total // 2,
            "flops_by_module": module_totals(self.flops, {r.name: r.module for r in records}),
            "nodes": len(records),
            "complete": self.complete,
            "parameters": sum(p.numel() for p in params.values()),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in params.values()),
            "activation_bytes": sum(
                _bytes(r.outputs) for r in records if r.op in _ACTIVATION_OPS and not r.aliases
            ),
            "peak_live_bytes": peak,
            "peak_node": at,
        }

    # -- tables --------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row a node, indexed by name: ``op``, ``target``, ``module``, ``shape``
        (``64×100``; several outputs joined by ``, ``), ``dtype``, ``device``, ``numel``,
        ``bytes`` (all outputs), ``params`` (of a ``call_module``/``get_attr``),
        ``flops`` and ``macs`` (multiply-adds),
        ``input_shapes``, ``symbolic_shape`` (``s0×10`` under dynamic shapes, else ``""``)
        and ``error``."""
        import pandas as pd

        rows = []
        for r in self.recording.values():
            outputs = r.outputs
            rows.append(
                {
                    "name": r.name,
                    "op": r.op,
                    "target": r.target,
                    "module": r.module,
                    "shape": ", ".join(format_shape(s.shape) for s in outputs),
                    "dtype": ", ".join(dict.fromkeys(dtype_name(s.dtype) for s in outputs)),
                    "device": ", ".join(dict.fromkeys(s.device for s in outputs)),
                    "numel": sum(s.numel for s in outputs),
                    "bytes": _bytes(outputs),
                    "params": self.params(r.name),
                    "flops": self.flops.get(r.name, 0),
                    "macs": self.flops.get(r.name, 0) // 2,
                    "input_shapes": ", ".join(format_shape(s) for s in r.input_shapes if s),
                    "symbolic_shape": format_shape(self.symbolic_shape(r.name)),
                    "error": "" if r.error is None else f"{type(r.error).__name__}: {r.error}",
                }
            )
        return pd.DataFrame(rows, columns=["name", *_COLUMNS]).set_index("name")

    def to_csv(self, path: str | None = None) -> str | None:
        """The table as CSV (returned when ``path`` is None)."""
        return self.table().to_csv(path)

    def to_markdown(self, path: str | None = None) -> str | None:
        """The table as a Markdown table (returned when ``path`` is None)."""
        text = self.table().to_markdown()
        if path is None:
            return text
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        return None

    def to_text(self) -> str:
        """A plain-text table for terminals, with the summary underneath."""
        import pandas as pd

        table = self.table()
        if not table["symbolic_shape"].any():
            table = table.drop(columns=["symbolic_shape"])
        if not table["error"].any():
            table = table.drop(columns=["error"])
        with pd.option_context("display.width", 200, "display.max_colwidth", 40):
            body = table.to_string(max_rows=None)
        return f"{body}\n\n{self._summary_line()}"

    def _summary_line(self) -> str:
        s = self.totals()
        state = "" if s["complete"] else f" (stopped at {self.error_node()!r})"
        return (
            f"{s['nodes']} nodes{state}, mode={self.mode}; parameters {s['parameters']:,} "
            f"({_human(s['parameter_bytes'])}); {human_flops(s['flops'])}; "
            f"activations {_human(s['activation_bytes'])}; "
            f"peak live {_human(s['peak_live_bytes'])} at {s['peak_node']!r}"
        )

    def error_node(self) -> str | None:
        """Name of the node that failed, or ``None``."""
        failed = [r.name for r in self.recording.values() if r.error is not None]
        return failed[0] if failed else None

    def _repr_html_(self) -> str:
        table = self.table()
        depth = {  # the scope a node runs in: a called module's parent, or its own module
            name: _scope_depth(op, module)
            for name, op, module in zip(table.index, table["op"], table["module"], strict=True)
        }
        changed_dtype = [_dtype_changed(r) for r in self.recording.values()]
        changed_shape = [_shape_changed(r) for r in self.recording.values()]

        position = {name: i for i, name in enumerate(table.index)}

        def row_styles(row: pd.Series) -> list[str]:
            i = position[row.name]
            styles = []
            for column in row.index:
                style = ""
                if column == "dtype" and changed_dtype[i]:
                    style = "background-color: rgba(255, 200, 0, 0.35); font-weight: bold"
                if column == "shape" and changed_shape[i]:
                    style = "font-weight: bold"
                if column == "error" and bool(row["error"]):
                    style = "color: #c00"
                styles.append(style)
            return styles

        shown = table.drop(columns=[c for c in ("symbolic_shape", "error") if not table[c].any()])
        style: Any = shown.style  # pandas' stubs lose the Styler type along the chain
        styler = (
            style.apply(row_styles, axis=1)
            .format(escape="html", thousands=",")
            .format_index(escape="html")
            .apply_index(
                lambda names: [
                    f"padding-left: {0.2 + 1.2 * depth[n]}em; text-align: left" for n in names
                ]
            )
        )
        summary = html.escape(self._summary_line())
        legend = "bold shape: changed from its input; highlighted dtype: changed from its inputs"
        return (
            f"<div><p><b>fxviz.ShapeReport</b>: {summary}</p>"
            f"<p style='font-size: smaller'>{legend}</p>{styler.to_html()}</div>"
        )

    def __repr__(self) -> str:
        return f"<fxviz.ShapeReport: {self._summary_line()}>"


def _scope_depth(op: str, module: str) -> int:
    """How deep in the model a node runs: a ``call_module`` node runs in the module that
    calls it (``"0.fc"`` -> 1, beside that module's own functions), any other node in the
    module it was traced in (``"0"`` -> 1); the top level is 0.

    >>> _scope_depth("call_module", "0.fc"), _scope_depth("call_function", "0")
    (1, 1)
    """
    if not module:
        return 0
    return module.count(".") + (0 if op == "call_module" else 1)


def _bytes(outputs: tuple[TensorSummary, ...]) -> int:
    return sum(max(s.nbytes, 0) for s in outputs)


def _dtype_changed(record: NodeRecord) -> bool:
    known = [d for d in record.input_dtypes if d is not None]
    return bool(known) and record.dtype is not None and record.dtype not in known


def _shape_changed(record: NodeRecord) -> bool:
    known = [s for s in record.input_shapes if s is not None]
    return bool(known) and record.shape is not None and record.shape != known[0]


def _peak_live(
    records: list[NodeRecord], nodes: dict[str, torch.fx.Node]
) -> tuple[int, str | None]:
    """Peak of live activation bytes over the execution order, and where it happens."""
    position = {r.name: r.index for r in records}
    last = len(records) - 1
    owner: dict[str, str] = {}  # node -> the node whose memory it uses
    size: dict[str, int] = {}
    end: dict[str, int] = {}
    for r in records:
        if r.op not in _ACTIVATION_OPS or not r.outputs:
            continue
        parents = [owner[a] for a in r.aliases if a in owner]
        root = parents[0] if parents else r.name
        owner[r.name] = root
        if root == r.name:
            size[root] = _bytes(r.outputs)
        node = nodes.get(r.name)
        users = [position[u.name] for u in node.users if u.name in position] if node else []
        dies = max(users, default=r.index) if r.error is None else last
        end[root] = max(end.get(root, r.index), dies)
    change = [0] * (len(records) + 1)
    for root, nbytes in size.items():
        change[position[root]] += nbytes
        change[end[root] + 1] -= nbytes
    peak, at, live = 0, None, 0
    for i in range(len(records)):
        live += change[i]
        if live > peak:
            peak, at = live, records[i].name
    return peak, at


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class _SummaryText(str):
    """``ShapeReport.summary()``'s text; indexing it by key reads :meth:`ShapeReport.totals`
    (what ``summary()`` returned before 0.2), with a deprecation warning."""

    _totals: dict[str, Any]

    def __new__(cls, text: str, totals: dict[str, Any]) -> _SummaryText:
        self = super().__new__(cls, text)
        self._totals = totals
        return self

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            from fxviz.errors import warn_deprecated

            warn_deprecated("ShapeReport.summary()[key]", "ShapeReport.totals()[key]")
            return self._totals[key]
        return super().__getitem__(key)
