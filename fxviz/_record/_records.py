"""Plain, immutable records of a run: :class:`NodeRecord` per node, :class:`Recording` per run."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from fxviz._capture._subject import refuse, register_traceable
from fxviz._collector import old_objects_set_aside
from fxviz._providers import provider
from fxviz._record._frozen import positional_constructor
from fxviz._record._grads import Gradients, GradRecord
from fxviz._record._rank import process_state
from fxviz._record._summary import TensorSummary, dtype_name
from fxviz._record._table import recording_html, recording_table
from fxviz.errors import UnknownNodeError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "NodeRecord",
    "Recording",
    "StoredValue",
    "new_node_record",
    "unknown_node_message",
    "unwritten_memory",
]


class StoredValue:
    """A node's kept output. When a later node is about to write into it in place, the
    recorder swaps in a copy, so every record reads the value as it was when it ran."""

    __slots__ = ("kept", "value")

    def __init__(self, value: Any = None, kept: bool = False) -> None:
        self.value = value if kept else None
        self.kept = kept

    def read(self) -> Any:
        """The value, as a record's ``value`` reads it (a subclass may check it first)."""
        return self.value


# The targets (as records write them) of ops that return memory they did not write.
_UNINITIALIZED = re.compile(
    r"(?:torch\.(?:Tensor\.)?|aten\.|prims\.)?(?:new_)?empty(?:_like|_strided|_permuted)?"
    r"(?:\.\w+)?"
)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeRecord:
    """What one FX node did when it ran.

    Attributes:
        index: position in execution order.
        name: the FX node name (``"linear1"``).
        op: ``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
            ``call_module`` or ``output``.
        target: what it calls, readable (``"torch.relu"``, ``"view"``, ``"layers.0"``).
        module: dotted path of the module it belongs to, ``""`` at top level.
        inputs: names of the nodes it reads.
        input_shapes / input_dtypes: first-tensor shape and dtype of each input
            (``None`` for non-tensor inputs), aligned with ``inputs``.
        outputs: one :class:`TensorSummary` per tensor in the node's output.
        time_s: wall time of the node itself (statistics excluded).
        error: the exception the node raised, or ``None``.
        value: (property) the output as it was when the node ran, ``None`` when not kept.
        kept: (property) whether ``value`` was kept (a node may return ``None``).
        mutates: inputs this node wrote to in place (``add_``, ``x[i] = v``, ``out=``).
        aliases: inputs whose memory this output shares (it is a view of them, or the
            result of writing into them in place).
        produced: for a recorded ``Transformer``, the new nodes made from this one.
        source: the user's source line that made the node, when known.
        grad: (property) with ``record(..., backward=...)``, a :class:`TensorSummary` of
            the gradient of the loss with respect to this output, ``None`` when none
            arrived; ``grad_value`` is the gradient itself when kept.

    Examples:
        >>> import torch, fxviz
        >>> r = fxviz.record(torch.nn.Linear(4, 2), torch.ones(3, 4))["linear"]
        >>> r.op, r.target, r.inputs, r.shape, r.nonfinite_count
        ('call_function', 'torch._C._nn.linear', ('input_1', 'weight', 'bias'), (3, 2), 0)
    """

    index: int
    name: str
    op: str
    target: str
    module: str
    inputs: tuple[str, ...]
    input_shapes: tuple[tuple[int | str, ...] | None, ...]
    input_dtypes: tuple[torch.dtype | None, ...]
    outputs: tuple[TensorSummary, ...]
    time_s: float
    error: BaseException | None = None
    stored: StoredValue = dataclasses.field(default_factory=StoredValue, repr=False, compare=False)
    mutates: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    produced: tuple[str, ...] = ()
    source: str = ""
    gradients: Gradients | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def grads(self) -> list[GradRecord]:
        """The gradients of this node's output tensors, in output order."""
        return [] if self.gradients is None else self.gradients.of(self.name)

    @property
    def grad(self) -> TensorSummary | None:
        """Statistics of the gradient with respect to the (first) output tensor."""
        grads = self.grads
        return grads[0].summary if grads else None

    @property
    def grad_value(self) -> torch.Tensor | None:
        """The gradient with respect to the (first) output tensor, when kept."""
        grads = self.grads
        return grads[0].value if grads else None

    @property
    def value(self) -> Any:
        """The output as it was when the node ran, or ``None`` when it was not kept."""
        return self.stored.read()

    @property
    def kept(self) -> bool:
        """Whether ``value`` was kept (a node may legitimately return ``None``)."""
        return self.stored.kept

    @property
    def uninitialized(self) -> bool:
        """Whether the output is memory the op allocated without writing it
        (``torch.empty``, ``empty_like``, ``new_empty``, ``aten.empty_strided``...): its
        values are whatever that memory held, different from run to run, so comparisons
        do not measure them (a later write into it, as an MoE's ``inv_perm[perm] = ...``,
        is recorded where it happens).

        Examples:
            >>> import torch, fxviz
            >>> rec = fxviz.record(lambda x: torch.empty_like(x).copy_(x), torch.ones(2))
            >>> rec["empty_like"].uninitialized, rec["copy_"].uninitialized
            (True, False)
        """
        return self.op in ("call_function", "call_method") and bool(
            _UNINITIALIZED.fullmatch(self.target)
        )

    @property
    def shape(self) -> tuple[int | str, ...] | None:
        """Shape of the first output tensor, or ``None``."""
        return self.outputs[0].shape if self.outputs else None

    @property
    def dtype(self) -> torch.dtype | None:
        """Dtype of the first output tensor, or ``None``."""
        return self.outputs[0].dtype if self.outputs else None

    @property
    def nonfinite_count(self) -> int:
        """NaN and infinite values over all output tensors (0 when stats were off)."""
        return sum(s.nonfinite_count for s in self.outputs)

    @property
    def nonfinite(self) -> int:
        """Deprecated name of :attr:`nonfinite_count` (``fxviz.has_nonfinite`` is the predicate)."""
        from fxviz.errors import warn_deprecated

        warn_deprecated("NodeRecord.nonfinite", "NodeRecord.nonfinite_count")
        return self.nonfinite_count

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (no tensors): what the widget, the report and tables read."""
        return {
            "index": self.index,
            "name": self.name,
            "op": self.op,
            "target": self.target,
            "module": self.module,
            "inputs": list(self.inputs),
            "input_shapes": [None if s is None else list(s) for s in self.input_shapes],
            "input_dtypes": [None if d is None else dtype_name(d) for d in self.input_dtypes],
            "outputs": [s.to_dict() for s in self.outputs],
            "time_s": self.time_s,
            "error": None if self.error is None else _error_text(self.error),
            "kept": self.kept,
            "mutates": list(self.mutates),
            "aliases": list(self.aliases),
            "produced": list(self.produced),
            "source": self.source,
            **({} if self.gradients is None else {"grads": [_grad_dict(g) for g in self.grads]}),
        }


def _grad_dict(g: GradRecord) -> dict[str, Any]:
    return {"order": g.order, "time_s": g.time_s, **g.summary.to_dict()}


def _error_text(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)}


# NodeRecord(*fields) for half its cost, every field given (a record a node, at each read)
new_node_record = positional_constructor(NodeRecord)


class Recording(Mapping[str, NodeRecord]):
    """Everything one run of a graph produced, node by node, in execution order.

    A read-only mapping from node name to :class:`NodeRecord`; ``rec[i]`` and
    ``rec[node]`` also work.

    Attributes:
        graph_module: the ``GraphModule`` that ran.
        output: what the graph returned (identical to ``gm(*inputs)``); ``None`` if the
            run did not finish. For a recorded ``Transformer``, the new ``GraphModule``.
        env: the interpreter's environment after the run, ``{node: value}``. With
            ``keep="all"`` it holds every value as the graph left it; a record's
            ``value`` holds it as it was when its node ran.
        complete: whether the run reached the output node.
        error: the :class:`fxviz.NodeError` that stopped the run, or ``None``.
        gradients: with ``record(..., backward=...)``, the :class:`Gradients` of the
            backward pass (every gradient in backward order, parameters' included).
        rank, world_size, process_groups: the ``torch.distributed`` rank and world size
            of the process that recorded it and its groups (``{"name", "ranks",
            "backend"}``); ``None, None, ()`` outside a distributed job.

    Examples:
        >>> import torch, fxviz
        >>> rec = fxviz.record(lambda x: x.relu() * 2, torch.tensor([-1.0, 3.0]))
        >>> list(rec), rec["mul"].value, rec[-1].name, rec.complete
        (['x', 'relu', 'mul', 'output'], tensor([0., 6.]), 'output', True)
    """

    def __init__(
        self,
        graph_module: torch.nn.Module,
        records: Sequence[NodeRecord],
        *,
        names: Sequence[str] | None = None,
        env: dict[torch.fx.Node, Any] | None = None,
        output: Any = None,
        complete: bool = False,
        error: BaseException | None = None,
        gradients: Gradients | None = None,
    ) -> None:
        self.graph_module = graph_module
        self._records = records  # may build each NodeRecord on first access
        names = [r.name for r in records] if names is None else names
        self._index = {name: i for i, name in enumerate(names)}
        self.env = env if env is not None else {}
        self.output = output
        self.complete = complete
        self.error = error
        self.gradients = gradients
        self.rank, self.world_size, self.process_groups = process_state()

    def __getitem__(self, key: str | int | torch.fx.Node) -> NodeRecord:
        if isinstance(key, int) and not isinstance(key, bool):
            if not -len(self._records) <= key < len(self._records):
                raise UnknownNodeError(f"record index {key} is out of range ({len(self)} nodes)")
            return self._records[key]
        name = key.name if isinstance(key, torch.fx.Node) else str(key)
        try:
            return self._records[self._index[name]]
        except (KeyError, TypeError):
            raise UnknownNodeError(unknown_node_message(name, self._index)) from None

    def __contains__(self, key: object) -> bool:
        name = key.name if isinstance(key, torch.fx.Node) else key
        return isinstance(name, str) and name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def method(self) -> str:
        """How the graph was captured (``symbolic``, ``export``, ``dynamo``, ``real``), or
        ``""`` when it was given as a GraphModule."""
        return str(getattr(self.graph_module, "meta", {}).get("fxviz_method", ""))

    def records(self) -> list[NodeRecord]:
        """The records in execution order."""
        return list(self._records)

    def first_nonfinite(self, grad: bool = False) -> NodeRecord | None:
        """The first node whose output holds a NaN or an infinity, or ``None``.

        With ``grad=True``: the forward node whose gradient became NaN/Inf first, in
        backward order (``rec.gradients.first_nonfinite()`` has the gradient itself; a
        parameter's gradient names the node that uses the parameter).

        Examples:
            >>> import torch, fxviz
            >>> rec = fxviz.record(lambda x: torch.log(x) * 2, torch.tensor([1.0, -1.0]))
            >>> rec.first_nonfinite().name
            'log'
        """
        if grad:
            return self._first_nonfinite_grad()
        for r in self._records:
            if r.nonfinite_count:
                return r
        return None

    def _first_nonfinite_grad(self) -> NodeRecord | None:
        bad = None if self.gradients is None else self.gradients.first_nonfinite()
        if bad is None:
            return None
        if bad.kind == "node":
            return self[bad.name]
        for node in self.graph_module.graph.nodes:  # type: ignore[union-attr]
            owner = str(node.target)
            if node.op == "get_attr" and owner == bad.name:
                return self.get(node.name, None)
            if node.op == "call_module" and bad.name.startswith(owner + "."):
                return self.get(node.name, None)
        return None

    def parameter_grad(self, name: str) -> TensorSummary:
        """Statistics of parameter ``name``'s gradient (``rec.gradients.parameters`` has
        the value, its order and timing)."""
        found = None if self.gradients is None else self.gradients.parameters.get(name)
        if found is None:
            known = [] if self.gradients is None else list(self.gradients.parameters)
            raise UnknownNodeError(
                f"no gradient recorded for parameter {name!r}"
                + (
                    f"; recorded: {', '.join(known[:8])}"
                    if known
                    else " (record with backward=True, or the parameter did not affect the loss)"
                )
            )
        return found.summary

    def table(self) -> pd.DataFrame:
        """One row a node, indexed by node name, in execution order.

        Columns: ``index``, ``op``, ``target``, ``module``, ``inputs`` (comma-separated),
        ``shape``/``dtype``/``numel``/``nbytes`` of the first output tensor, ``outputs``
        (how many tensors it produced), its statistics ``min``, ``max``, ``mean``,
        ``std``, ``absmax``, ``nan``, ``posinf``, ``neginf``, ``zeros``, ``time_s``,
        ``flops`` (torch's FlopCounterMode formulas applied to the recorded shapes, with
        nothing run again; multiply-adds are half), ``mutates``/``aliases`` (comma-separated node names), ``error`` (``"Type:
        message"`` or ``""``) and ``kept`` (value kept). With gradients recorded, also
        ``grad_order`` (position in backward order), ``grad_time_s``, ``grad_norm``,
        ``grad_absmax``, ``grad_mean``, ``grad_std``, ``grad_nan``, ``grad_inf`` and
        ``grad_ratio`` (gradient norm / output norm) of the first output tensor.
        """
        with old_objects_set_aside(len(self)):  # a few objects a row
            return recording_table(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"complete", "error", "nodes": [record.to_dict(), ...]}``."""
        return {
            "complete": self.complete,
            "error": None if self.error is None else _error_text(self.error),
            "nodes": [r.to_dict() for r in self._records],
        }

    def save(self, path: Any, *, values: bool = True) -> Any:
        """Write this recording to one file (``run.fxrec``); ``fxviz.load(path)`` reads it
        back in any process, without the model. ``values=False`` saves the records only.
        Returns the path. See :func:`fxviz._saved.save` for the format."""
        return provider("recording.save")(self, path, values=values)

    def summary(self) -> str:
        """One line: nodes run, time, errors and non-finite values."""
        total = sum(r.time_s for r in self._records)
        state = "complete" if self.complete else "partial"
        parts = [f"{len(self)} nodes", state, f"{total * 1e3:.2f} ms"]
        failed = [r.name for r in self._records if r.error is not None]
        if failed:
            parts.append(f"error at {failed[0]!r}")
        bad = self.first_nonfinite()
        if bad is not None:
            parts.append(f"first NaN/Inf at {bad.name!r}")
        bad_grad = None if self.gradients is None else self.gradients.first_nonfinite()
        if bad_grad is not None:
            parts.append(f"first NaN/Inf gradient at {bad_grad.name!r}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        name = type(self.graph_module).__name__
        return f"<fxviz.Recording of {name}: {self.summary()}>"

    def _repr_html_(self) -> str:
        return recording_html(self)


register_traceable(
    Recording,
    refuse(
        "a Recording is a finished run: pass rec.graph_module to run its graph again; "
        "fxviz.show, report and compare take the recording itself"
    ),
)


def unwritten_memory(records: Iterable[NodeRecord]) -> dict[str, str]:
    """The records whose output was memory no op had written yet when they ran, each with
    the target that allocated it: the allocations themselves (:attr:`NodeRecord.uninitialized`)
    and the views taken of them before a write (``buf.t()`` before ``buf[:] = x``), whose
    kept values are that memory's garbage too. A write that covers a whole block (an
    in-place op, ``x[i] = v``, ``out=`` into the block or a view as large) ends it for every
    view of that block; a write into part of it (``buf[..., :4].copy_(a)``, as DeepSeek-V3
    builds its keys) does not: a view taken after it may hold the part still unwritten.

    Examples:
        >>> import torch, fxviz
        >>> def f(x):
        ...     buf = torch.empty_like(x)
        ...     early = buf.t()
        ...     buf.copy_(x)
        ...     return buf.t() + early
        >>> unwritten_memory(fxviz.record(f, torch.ones(2, 2)).values())
        {'empty_like': 'torch.empty_like', 't': 'torch.empty_like'}
    """
    block: dict[str, int] = {}  # an unwritten record -> its block (the allocation's index)
    origin: dict[int, NodeRecord] = {}  # a block -> the record that allocated it
    size: dict[str, int | None] = {}  # an unwritten record -> its element count (None: unknown)
    written: set[int] = set()
    found: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r.index):
        if r.mutates:
            written.update(
                block[m] for m in r.mutates if m in block and _covers(size[m], origin[block[m]])
            )
            continue
        size[r.name] = _numel(r)
        if r.uninitialized:
            block[r.name], origin[r.index] = r.index, r
        else:
            views = [block[a] for a in r.aliases if a in block and block[a] not in written]
            if not views:
                continue
            block[r.name] = views[0]
        found[r.name] = origin[block[r.name]].target
    return found


def _numel(record: NodeRecord) -> int | None:
    """Element count of a record's first output (``None`` when unknown or symbolic)."""
    shape = record.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _covers(written: int | None, allocation: NodeRecord) -> bool:
    """Whether a write into a view of ``written`` elements writes the whole allocation
    (unknown sizes count as whole, as every write did before sizes were compared)."""
    whole = _numel(allocation)
    return written is None or whole is None or written >= whole


def unknown_node_message(name: Any, known: Iterable[str]) -> str:
    """``no node named 'linear3' in this graph; did you mean 'linear2', 'linear1'?``"""
    close = difflib.get_close_matches(str(name), list(known), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    return f"no node named {name!r} in this graph{hint}"
