"""Random FX graphs, built from a grammar of ops, checked against plain torch.

Each generated graph mixes elementwise ops, matmuls, views and reshapes, in-place writes
into intermediates (through views too), multi-output ops with ``getitem``, inputs,
parameters, buffers and constants (``get_attr``), dropout, NaN/Inf producers and hostile
names and string arguments. For each one:

- ``fxviz.record`` returns exactly ``gm(*inputs)``, and the same again on a second run;
- every recorded value is the node's output as it was when the node ran (a reference run
  clones each output the moment it is made), although later in-place ops change it;
- the ``Debugger`` stepped to the end matches the recording; ``back(k)`` then
  ``step(k)`` gives the same values; ``restart()`` then ``continue_()`` the same output;
- ``to_dot`` is valid for ``dot``, and the HTML report is well formed with every user
  string escaped.

The default run checks a few hundred graphs; ``make test-slow`` (``pytest -m exhaustive``)
checks thousands.
"""

from __future__ import annotations

import dataclasses
import html.parser
import math
import operator
import subprocess
import warnings
import xml.etree.ElementTree as ET
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fxviz

# Strings passed as arguments and report titles.
HOSTILE = (
    '"',
    "'",
    "<script>alert(1)</script>",
    "</script><script>alert(2)</script>",
    "\\",
    "\\N",
    "\\G\\l",
    "\u202eexe.gnp",
    "zero\u200bwidth",
    "__proto__",
    "constructor",
    "a&amp;b",
    "{{x}}",
    "${x}",
    "new\nline",
    "<b>bold</b>",
)
# Names for parameters, buffers and submodules: torch refuses a "." in them, and FX writes
# them into its generated code as getattr(self, "<name>") unescaped, so a quote, a
# backslash or a newline breaks gm itself (a torch limitation, not fxviz's).
ATTR_NAMES = (
    *(name for name in HOSTILE if not any(c in name for c in "\"'.\n\\")),
    "evil\u202eexe_gnp",
    "&lt;i&gt;",
)

FAST = settings(
    max_examples=150,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MANY = settings(FAST, max_examples=2500)


def tagged(x: torch.Tensor, label: str) -> torch.Tensor:
    """A user function with a string argument (the label is only carried along)."""
    return x * 1.0 + len(label) * 0.0


@dataclasses.dataclass
class Value:
    node: torch.fx.Node
    shape: tuple[int, ...]
    writable: bool  # its memory belongs to an intermediate or an input (never a parameter)
    floating: bool = True
    base: int = 0  # which memory it lives in: views share their base's number


class Builder:
    """Grows one FX graph a random op at a time, tracking each value's shape."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw  # hypothesis' draw: every choice below is one of its draws
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.values: list[Value] = []
        self.inputs: list[torch.Tensor] = []
        self.count = 0

    # -- helpers -------------------------------------------------------------------------
    def shape(self) -> tuple[int, ...]:
        return self.draw(
            st.one_of(
                st.tuples(st.integers(1, 4), st.integers(1, 4)),
                st.tuples(st.integers(1, 6)),
            )
        )

    def name(self) -> str:
        self.count += 1
        return f"{self.draw(st.sampled_from(ATTR_NAMES))}{self.count}"

    def pick(self, *, floating: bool = True, writable: bool = False, dims: int | None = None):
        choices = [
            v
            for v in self.values
            if (v.floating or not floating)
            and (v.writable or not writable)
            and (dims is None or len(v.shape) == dims)
        ]
        return self.draw(st.sampled_from(choices)) if choices else None

    def add(
        self,
        node: torch.fx.Node,
        shape,
        *,
        writable: bool,
        floating: bool = True,
        view_of: Value | None = None,
    ) -> Value:
        base = view_of.base if view_of is not None else len(self.values) + 1
        value = Value(node, tuple(shape), writable, floating, base)
        self.values.append(value)
        return value

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return self.graph.call_function(fn, args, kwargs)

    # -- the grammar ---------------------------------------------------------------------
    def placeholder(self) -> None:
        shape = self.shape()
        node = self.graph.placeholder(f"x{len(self.inputs)}")
        scale = self.draw(st.sampled_from([1.0, 1e-3, 1e30]))
        self.inputs.append(torch.randn(shape) * scale)
        self.add(node, shape, writable=self.draw(st.booleans()))  # the graph may write into it

    def get_attr(self) -> None:
        shape = self.shape()
        name = self.name()
        kind = self.draw(st.sampled_from(["parameter", "buffer", "constant"]))
        tensor = torch.randn(shape)
        if kind == "parameter":
            self.root.register_parameter(name, torch.nn.Parameter(tensor, requires_grad=False))
        elif kind == "buffer":
            self.root.register_buffer(name, tensor)
        else:
            setattr(self.root, name, tensor)
        self.add(self.graph.get_attr(name), shape, writable=False)

    def unary(self) -> None:
        v = self.pick()
        if v is None:
            return
        fn = self.draw(
            st.sampled_from(
                [
                    *(torch.relu, torch.tanh, torch.sigmoid, torch.exp, torch.neg, torch.abs),
                    *(torch.log, torch.sqrt, torch.reciprocal),  # NaN and Inf producers
                ]
            )
        )
        self.add(self.call(fn, v.node), v.shape, writable=True)

    def method(self) -> None:
        v = self.pick()
        if v is None:
            return
        name = self.draw(st.sampled_from(["relu", "exp", "clone", "sin"]))
        self.add(self.graph.call_method(name, (v.node,)), v.shape, writable=True)

    def binary(self) -> None:
        a = self.pick()
        if a is None:
            return
        same = [v for v in self.values if v.floating and v.shape == a.shape]
        fn = self.draw(st.sampled_from([torch.add, torch.mul, torch.sub, torch.div, operator.add]))
        if self.draw(st.booleans()):
            b: Any = self.draw(st.sampled_from(same)).node
        else:
            b = self.draw(st.sampled_from([0.0, -1.5, 2.0, 1e30, math.inf, math.nan]))
        self.add(self.call(fn, a.node, b), a.shape, writable=True)

    def matmul(self) -> None:
        a = self.pick(dims=2)
        if a is None:
            return
        n = self.draw(st.integers(1, 4))
        if self.draw(st.booleans()):  # a parameter of matching shape
            name = self.name()
            weight = torch.nn.Parameter(torch.randn(a.shape[1], n), requires_grad=False)
            self.root.register_parameter(name, weight)
            w = self.graph.get_attr(name)
            self.add(self.call(torch.matmul, a.node, w), (a.shape[0], n), writable=True)
        else:  # a submodule with a hostile name
            name = self.name()
            self.root.add_module(name, torch.nn.Linear(a.shape[1], n).requires_grad_(False))
            node = self.graph.call_module(name, (a.node,))
            self.add(node, (a.shape[0], n), writable=True)

    def view(self) -> None:
        v = self.pick()
        if v is None:
            return
        numel = math.prod(v.shape)
        kind = self.draw(st.sampled_from(["flatten", "view", "t", "slice", "reshape"]))
        if kind == "flatten":
            node, shape = self.graph.call_method("flatten", (v.node,)), (numel,)
        elif kind == "view":
            rows = self.draw(st.sampled_from([d for d in range(1, numel + 1) if numel % d == 0]))
            flat = self.graph.call_method("reshape", (v.node, -1))  # views need contiguity
            node, shape = self.graph.call_method("view", (flat, rows, -1)), (rows, numel // rows)
        elif kind == "t" and len(v.shape) == 2:
            node, shape = self.graph.call_method("t", (v.node,)), v.shape[::-1]
        elif kind == "slice":
            stop = self.draw(st.integers(1, v.shape[0]))
            node = self.call(operator.getitem, v.node, slice(0, stop))
            shape = (stop, *v.shape[1:])
        else:
            node, shape = self.call(torch.reshape, v.node, (numel,)), (numel,)
        self.add(node, shape, writable=v.writable, view_of=v)  # writes go through to its base

    def inplace(self) -> None:
        v = self.pick(writable=True)
        if v is None:
            return
        # another value of the same shape in other memory (overlapping writes are errors)
        others = [o for o in self.values if o.floating and o.shape == v.shape and o.base != v.base]
        other = self.draw(st.sampled_from(others)).node if others else 1.5
        kind = self.draw(
            st.sampled_from(
                ["add_", "mul_", "relu_", "clamp_", "fill_", "copy_", "setitem", "aten", "out"]
            )
        )
        if kind == "setitem":
            index = self.draw(st.sampled_from([0, slice(0, 1), (Ellipsis,)]))
            value = self.draw(st.sampled_from([0.0, 7.5]))
            self.call(operator.setitem, v.node, index, value)
            return  # setitem returns None: the write shows only in later reads of v
        if kind == "out":  # torch.add(other, 2, out=v) writes into v
            if not others:
                return
            node = self.call(torch.add, other, 2.0, out=v.node)
        elif kind == "aten":  # what torch.export and aot graphs hold
            op = self.draw(st.sampled_from(["relu_", "mul_", "add_"]))
            if op == "relu_":
                node = self.call(torch.ops.aten.relu_.default, v.node)
            elif op == "mul_":
                node = self.call(torch.ops.aten.mul_.Scalar, v.node, -1.0)
            else:
                node = self.call(torch.ops.aten.add_.Scalar, v.node, 0.5)
        elif kind == "clamp_":
            node = self.graph.call_method(kind, (v.node,), {"min": -0.5, "max": 0.5})
        elif kind == "copy_":
            if not others:
                return
            node = self.graph.call_method(kind, (v.node, other))
        else:
            args = {"add_": (other,), "mul_": (-2.0,), "relu_": (), "fill_": (3.0,)}[kind]
            node = self.graph.call_method(kind, (v.node, *args))
        self.add(node, v.shape, writable=True, view_of=v)

    def multi_output(self) -> None:
        v = self.pick()
        if v is None:
            return
        dim = self.draw(st.integers(0, len(v.shape) - 1))
        if len(v.shape) == 2 and self.draw(st.booleans()):  # 1-D results: no 0-D values
            both = self.call(torch.max, v.node, dim)
            shape = v.shape[:dim] + v.shape[dim + 1 :]
            self.add(self.call(operator.getitem, both, 0), shape, writable=True)
            self.add(self.call(operator.getitem, both, 1), shape, writable=True, floating=False)
        else:
            size = self.draw(st.integers(1, v.shape[dim]))
            pieces = self.call(torch.split, v.node, size, dim)
            count = -(-v.shape[dim] // size)
            i = self.draw(st.integers(0, count - 1))
            length = min(size, v.shape[dim] - i * size)
            shape = (*v.shape[:dim], length, *v.shape[dim + 1 :])
            piece = self.call(operator.getitem, pieces, i)
            self.add(piece, shape, writable=v.writable, view_of=v)

    def random(self) -> None:
        v = self.pick()
        if v is None:
            return
        if self.draw(st.booleans()):
            node = self.call(F.dropout, v.node, p=0.5, training=True)
        else:
            node = self.call(torch.rand_like, v.node)
        self.add(node, v.shape, writable=True)

    def strings(self) -> None:
        v = self.pick()
        if v is None:
            return
        if self.draw(st.booleans()):
            node = self.call(tagged, v.node, self.draw(st.sampled_from(HOSTILE)))
        else:
            node = self.call(F.gelu, v.node, approximate="tanh")
        self.add(node, v.shape, writable=True)

    def constant(self) -> None:
        shape = self.shape()
        fill = self.draw(st.sampled_from([0.0, -1.0, 3.5]))
        self.add(self.call(torch.full, shape, fill), shape, writable=True)

    def output(self) -> None:
        chosen = self.draw(st.lists(st.sampled_from(self.values), min_size=1, max_size=3))
        nodes = [v.node for v in chosen]
        self.graph.output(nodes[0] if len(nodes) == 1 else tuple(nodes))


OPS = (
    "unary",
    "method",
    "binary",
    "matmul",
    "view",
    "inplace",
    "multi_output",
    "random",
    "strings",
    "constant",
    "get_attr",
    "placeholder",
)


@st.composite
def graphs(draw: Any, max_ops: int = 12) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """A random GraphModule and inputs for it."""
    torch.manual_seed(draw(st.integers(0, 2**16)))
    builder = Builder(draw)
    for _ in range(draw(st.integers(1, 2))):
        builder.placeholder()
    for op in draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=max_ops)):
        getattr(builder, op)()
    builder.output()
    gm = torch.fx.GraphModule(builder.root, builder.graph)
    gm.graph.lint()
    return gm, builder.inputs


# -- comparing ---------------------------------------------------------------------------
def same(a: Any, b: Any) -> bool:
    """Identical values: same types, dtypes, shapes and bits (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        nan = a.isnan() if a.is_floating_point() else torch.zeros_like(a, dtype=torch.bool)
        return bool(torch.equal(a[~nan], b[~nan]) and torch.equal(nan, b.isnan()))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def snapshot(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return tuple(snapshot(v) for v in value)
    return value


class CloneEach(torch.fx.Interpreter):
    """The reference: a plain Interpreter run that clones each output as it is made."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.seen: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "call_function" and n.target is operator.setitem:
            result = self.env[n.args[0]]  # what GraphModule's code gives (and fxviz records)
        self.seen[n.name] = snapshot(result)
        return result


def run_seeded(fn: Any, seed: int = 1234) -> Any:
    torch.manual_seed(seed)
    return fn()


def fresh(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Copies for one run: a graph may write into its inputs."""
    return [t.clone() for t in inputs]


# -- the checks --------------------------------------------------------------------------
def check_recording(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> None:
    params = snapshot(list(gm.state_dict().values()))
    eager_inputs = fresh(inputs)
    expected = snapshot(run_seeded(lambda: gm(*eager_inputs)))
    reference = CloneEach(gm)
    ref_out = snapshot(run_seeded(lambda: reference.run(*fresh(inputs))))
    assert same(ref_out, expected)

    recorded_inputs = fresh(inputs)
    rec = run_seeded(lambda: fxviz.record(gm, *recorded_inputs))
    assert same(rec.output, expected), "record's output differs from gm(*inputs)"
    assert same(recorded_inputs, eager_inputs), "record wrote its inputs unlike gm(*inputs)"
    again = run_seeded(lambda: fxviz.record(gm, *fresh(inputs)))
    assert same(again.output, expected), "a second recording differs"
    light = run_seeded(lambda: fxviz.record(gm, *fresh(inputs), keep="stats"))
    assert same(light.output, expected), "keep='stats' changed the output"
    eager = run_seeded(lambda: fxviz.record(gm, *fresh(inputs), stats="eager"))
    for name in rec:  # statistics taken when first read == taken as each node ran
        lazy = [s.to_dict() for s in rec[name].outputs]
        assert lazy == [s.to_dict() for s in eager[name].outputs], name
        assert lazy == [s.to_dict() for s in light[name].outputs], name
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        assert same(rec[node.name].value, reference.seen[node.name]), (
            f"{node.name} ({node.format_node()}) was not recorded as it was when it ran"
        )
        assert same(again[node.name].value, reference.seen[node.name])
    assert same(params, list(gm.state_dict().values())), "the run changed the parameters"


def check_debugger(
    gm: torch.fx.GraphModule, inputs: list[torch.Tensor], back: int, keep: str = "all"
) -> None:
    eager_inputs = fresh(inputs)
    expected = snapshot(run_seeded(lambda: gm(*eager_inputs)))
    rec = run_seeded(lambda: fxviz.record(gm, *fresh(inputs)))
    debugged_inputs = fresh(inputs)
    dbg = run_seeded(lambda: fxviz.Debugger(gm, *debugged_inputs, keep=keep))
    while not dbg.done:
        dbg.step()
    assert same(dbg.output, expected), "stepping to the end differs from gm(*inputs)"
    assert same(debugged_inputs, eager_inputs), "the debugger wrote its inputs unlike gm"
    names = [n.name for n in gm.graph.nodes if n.op != "output"] if keep == "all" else []
    for name in names:
        assert same(dbg.value(name), rec[name].value), f"{name}: stepped != recorded"

    k = min(back, len(gm.graph.nodes))
    dbg.back(k)
    dbg.step(k)
    assert dbg.done
    assert same(dbg.output, expected), "back then step changed the output"
    for name in names:
        assert same(dbg.value(name), rec[name].value), f"{name}: back+step != recorded"

    wrote_inputs = any(t._version for t in eager_inputs)  # a write, even of equal values
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dbg.restart()
    warned = [w for w in caught if issubclass(w.category, fxviz.FxvizWarning)]
    if keep == "stats" and wrote_inputs:  # documented: no copy kept, so restart warns
        assert warned, "restart() ran on changed inputs without a warning"
        return
    assert not warned, [str(w.message) for w in warned]
    dbg.continue_()
    assert dbg.done
    assert same(dbg.output, expected), "restart then continue_ changed the output"
    assert same(debugged_inputs, eager_inputs), "restart did not put the inputs back first"
    for name in names:
        assert same(dbg.value(name), rec[name].value), f"{name}: after restart != recorded"


def check_dot(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> None:
    source = fxviz.to_dot(fxviz.record(gm, *fresh(inputs))).source
    for raw in ("\u202e", "\u200b"):
        assert raw not in source
    done = subprocess.run(
        ["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Error" not in done.stderr, done.stderr
    assert b"Warning" not in done.stderr, done.stderr
    ET.fromstring(done.stdout)  # well-formed SVG


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)


def _tags(page: str) -> list[str]:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.tags


_PLAIN_PAGE_TAGS: list[str] = []


def check_report(gm: torch.fx.GraphModule, inputs: list[torch.Tensor], title: str) -> None:
    if not _PLAIN_PAGE_TAGS:
        plain = fxviz.report(fxviz.record(torch.nn.ReLU(), torch.ones(2)), title="plain")
        _PLAIN_PAGE_TAGS.extend(_tags(plain))
    page = fxviz.report(fxviz.record(gm, *fresh(inputs)), title=title)
    assert page is not None
    # The page has the same elements as a plain one: no user string became markup. (The
    # header's fact lines, one <p> each, depend on how the graph was captured.)
    assert [t for t in _tags(page) if t != "p"] == [t for t in _PLAIN_PAGE_TAGS if t != "p"]
    body = page.split("<script>")[0]
    for raw in ("\u202e", "<script>alert", "<b>bold"):
        assert raw not in body


pytestmark = pytest.mark.usefixtures("recording_engine")  # every test, on both engines


# -- the tests ---------------------------------------------------------------------------
@FAST
@given(graphs())
def test_record_matches_eager_and_keeps_each_value_as_it_was(case):
    check_recording(*case)


@FAST
@given(graphs(), st.integers(1, 20), st.sampled_from(["all", "all", "stats"]))
def test_debugger_step_back_restart_match_the_recording(case, back, keep):
    check_debugger(*case, back, keep)


@pytest.mark.dot
@settings(FAST, max_examples=40)
@given(graphs())
def test_to_dot_is_valid_for_dot(case):
    check_dot(*case)


@settings(FAST, max_examples=40)
@given(graphs(), st.sampled_from(HOSTILE))
def test_report_is_well_formed_and_escapes_user_strings(case, title):
    check_report(*case, title)


@pytest.mark.exhaustive
@MANY
@given(graphs(max_ops=20), st.integers(1, 30), st.sampled_from(["all", "stats"]))
def test_many_generated_graphs(case, back, keep):
    check_recording(*case)
    check_debugger(*case, back, keep)


@pytest.mark.exhaustive
@pytest.mark.dot
@settings(MANY, max_examples=400)
@given(graphs(max_ops=20), st.sampled_from(HOSTILE))
def test_many_generated_graphs_draw_and_report(case, title):
    check_dot(*case)
    check_report(*case, title)


# -- failures the generated graphs found, kept as plain regression tests -----------------
def _write_through_split_views(depth: int) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x0")
    view = x
    for _ in range(depth):
        pieces = graph.call_function(torch.split, (view, 4, 0))
        view = graph.call_function(operator.getitem, (pieces, 0))
    graph.call_method("add_", (view, 1.5))
    graph.output(x)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.mark.parametrize("depth", [1, 2])
def test_restart_warns_when_an_input_was_written_through_views_and_no_copy_kept(depth):
    # Found by test_many_generated_graphs: with keep="stats", a write into an input through
    # split/getitem views went unnoticed, and restart() silently ran on the changed input.
    x = torch.zeros(4)
    dbg = fxviz.Debugger(_write_through_split_views(depth), x, keep="stats")
    dbg.continue_()
    assert x.tolist() == [1.5] * 4
    with pytest.warns(fxviz.FxvizWarning, match="input 'x0' was changed in place"):
        dbg.restart()


@pytest.mark.parametrize("depth", [1, 2])
def test_restart_puts_an_input_written_through_views_back(depth):
    x = torch.zeros(4)
    dbg = fxviz.Debugger(_write_through_split_views(depth), x)
    dbg.continue_()
    dbg.restart()
    assert x.tolist() == [0.0] * 4
    dbg.continue_()
    assert dbg.output.tolist() == [1.5] * 4


class _OneByOneOfTwoLayouts(torch.nn.Module):
    """(1, 1) values with strides (1, 1) and (2, 1): both contiguous, laid out apart."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first = torch.split(x, 1, 1)[0]  # a (1, 1) view of a (1, 2) tensor: strides (2, 1)
        return torch.rand_like(first), torch.relu(x[:, :1].clone())


def test_statistics_read_together_keep_each_tensors_strides():
    # Found by test_record_matches_eager_and_keeps_each_value_as_it_was: statistics read in
    # a block took the layout of the first tensor of a shape for all of that shape, and a
    # (1, 1) rand_like kept the (2, 1) strides of what it was like, unlike its neighbour.
    gm = fxviz.trace(_OneByOneOfTwoLayouts(), torch.ones(1, 2))
    x = torch.tensor([[1.5, -0.3]])
    lazy = run_seeded(lambda: fxviz.record(gm, x))
    eager = run_seeded(lambda: fxviz.record(gm, x, stats="eager"))
    strides = {name: lazy[name].outputs[0].stride for name in ("rand_like", "relu")}
    assert strides == {"rand_like": (2, 1), "relu": (1, 1)}
    for name in lazy:
        assert lazy[name].outputs == eager[name].outputs, name
