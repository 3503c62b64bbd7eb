"""The one data contract from Python to the page: what the widget and the report read.

Both front ends are fed the same JSON-ready payload, made here and nowhere else:

``payload_version`` (int)
    :data:`PAYLOAD_VERSION`; bumped when a field changes meaning.
``model`` (str), ``dot`` (str), ``depth`` (int | None)
    The drawn object's name, the DOT of the current view and its collapse depth.
``units`` ({node: DOT id})
    What draws each node: its collapsed module's box, or the node itself.
``rows`` ([{name, op, target, shape, dtype, mean, nonfinite, ms}])
    The linked table, one row a node (:func:`node_rows`).
``index`` ([[name, target, module], ...])
    Every node, whatever the view folds: what the page's search looks in.
``node_states`` ({node: [state, ...]})
    Debugger states (``done``, ``current``, ``pending``, ``error``, ``breakpoint``,
    ``nonfinite``), made by the :class:`fxviz.Debugger`'s own rules
    (:func:`debugger_states`).
``contract`` (:func:`page_contract`)
    Everything else the page must agree on with Python, said once here: the states and
    what the legend calls them, their colours, the node kinds' names, the toolbar's
    actions with their labels and keys, the table's row limit and the NaN/Inf wording.

The report adds ``inspectors`` ({node: inspector}), ``expansions`` ({box DOT id:
{dot, nodes}}: each collapsed box's insides drawn on their own, what a click on a box
shows in a page with no kernel; :func:`box_expansions`) and, for a recorded run, ``replay``
(:func:`replay_payload`): the states and status text of every cursor position, where
each toolbar action moves the cursor from there and where "continue" stops, produced by
the Debugger's functions and rules, so the page only looks positions up.

    >>> import torch, fxviz
    >>> from fxviz.render._api import Drawing
    >>> drawing = Drawing(fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4)))
    >>> payload = graph_payload(drawing, drawing.view())
    >>> payload["payload_version"], payload["units"]["linear"]
    (3, 'linear')
    >>> payload["contract"]["limits"]["table_rows"]
    1000
    >>> [row["shape"] for row in payload["rows"] if row["name"] == "linear"]
    ['1×2']
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast

import torch.fx

from fxviz._nodes import is_stepped_over
from fxviz._record._debugger import Debugger, node_state, status_line
from fxviz._record._debugger_state import node_count
from fxviz._record._predicates import has_nonfinite
from fxviz._record._records import NodeRecord, Recording
from fxviz.overlays import STATE_STYLES
from fxviz.render._api import Drawing, View
from fxviz.render._dot import KIND_LABELS
from fxviz.render._inspect import table_rows

__all__ = [
    "BREAKPOINTS_SUFFIX",
    "NONFINITE_TEXT",
    "OPENED_MAX",
    "PAYLOAD_VERSION",
    "TABLE_ROWS",
    "TOOLBAR_ACTIONS",
    "box_expansions",
    "breakpoint_names",
    "debugger_states",
    "graph_payload",
    "node_rows",
    "node_rows_page",
    "nonfinite_status",
    "page_contract",
    "replay_payload",
]

# 2: ``index`` and the report's ``expansions``; 3: ``contract``, the replay's moves
PAYLOAD_VERSION = 3
BREAKPOINTS_SUFFIX = " · breakpoints: {breakpoints}"  # appended to a status line
TABLE_ROWS = 1000  # rows a page's table shows: 50,000 would freeze it (search finds the rest)
NONFINITE_TEXT = "NaN/Inf"  # how every panel names a non-finite value, in words

# Node states, in the legend's order, and what the legend calls each (they combine).
STATES: tuple[tuple[str, str], ...] = (
    ("current", "next to run"),
    ("selected", "selected"),
    ("breakpoint", "breakpoint"),
    ("error", "raised an error"),
    ("nonfinite", f"output holds {NONFINITE_TEXT}"),
    ("done", "already ran"),
    ("linked", "the same step in the other pass"),
    ("match", "search match"),
)

# The debugger's toolbar: (message type, button label, tooltip, key or "", is a toggle).
# DebuggerApp.handle answers each type; the report's replay looks each one up.
TOOLBAR_ACTIONS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("restart", "restart", "start again from the first node", "r", False),
    ("back", "◀ back", "back one node", "b", False),
    ("step", "step ▶", "step one node", "n", False),
    ("step10", "step 10", "step 10 nodes", "", False),
    ("continue", "continue", "run to the next breakpoint, error or the end", "c", False),
    ("run_to_selected", "run to selected", "run until the selected node is next", "", False),
    ("toggle_breakpoint", "● breakpoint", "toggle a breakpoint on the selected node", "", True),
    (
        "break_nan",
        f"break on {NONFINITE_TEXT}",
        f"stop after the first node whose output holds {NONFINITE_TEXT}",
        "",
        True,
    ),
)


def nonfinite_status(names: list[str], position: int, skip: Collection[int] = ()) -> str:
    """The status line after a NaN/Inf break: it names the node that produced the value
    (the one just run), never the next one, and says NaN/Inf in words.

    >>> nonfinite_status(["x", "log", "relu", "output"], 2)
    "stopped after 'log' produced NaN/Inf — 2/4 nodes"
    """
    culprit = names[position - 1]
    count = node_count(len(names), position, skip)  # fetches not counted, as in status_line
    return f"stopped after {culprit!r} produced {NONFINITE_TEXT} — {count}"


def breakpoint_names(breakpoints: list[str]) -> str:
    """The breakpoints as a status line lists them (the NaN/Inf one in words).

    >>> breakpoint_names(["at relu", "has_nonfinite"]), breakpoint_names([])
    ('at relu, NaN/Inf', 'none')
    """
    return (
        ", ".join(NONFINITE_TEXT if b == has_nonfinite.__name__ else b for b in breakpoints)
        or "none"
    )


def page_contract(fill: dict[str, Any] | None = None, linked: bool = False) -> dict[str, Any]:
    """What both front ends read instead of restating it: states (and their legend text
    and colours), node kinds' names, toolbar actions and keys, limits and wording, and
    what a node's fill means in this view (``fill``: see :meth:`Source.fill`; by default
    the operation, each target's colour read off the drawing). The ``linked`` state (the
    same step in the other pass) is listed only for a view that links passes (``linked``:
    a joint graph), so the legend never explains a colour the graph cannot show.

    >>> contract = page_contract()
    >>> contract["states"][0], contract["kinds"]["placeholder"], contract["actions"][2]["key"]
    (['current', 'next to run'], 'input', 'n')
    """
    colours = {}
    for state, style in STATE_STYLES.items():
        if style.border:
            colours[state] = style.border
        if style.fill:
            colours[f"{state}-fill"] = style.fill
    return {
        "states": [list(pair) for pair in STATES if linked or pair[0] != "linked"],
        "state_colours": colours,
        "kinds": dict(KIND_LABELS),
        "actions": [
            {"type": t, "label": label, "title": title, "key": key, "toggle": toggle}
            for t, label, title, key, toggle in TOOLBAR_ACTIONS
        ],
        "limits": {"table_rows": TABLE_ROWS},
        "texts": {"nonfinite": NONFINITE_TEXT, "nonfinite_tag": "NaN"},
        "fill": fill or {"title": "fill: the operation", "rows": None},
    }


def node_rows(drawing: Drawing, records: list[NodeRecord] | None = None) -> list[dict[str, Any]]:
    """The table's rows: from the records when the graph ran (every node run, parameter
    fetches folded out of the drawing included), else from the drawing."""
    return node_rows_page(drawing, records)[0]


def node_rows_page(
    drawing: Drawing, records: list[NodeRecord] | None = None, limit: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` rows of :func:`node_rows` (all with ``None``) and how many
    there are: a widget's table shows 1,000 of a 50,000-node graph's rows.

    >>> import torch, fxviz
    >>> from fxviz.render._api import Drawing
    >>> rows, total = node_rows_page(Drawing(fxviz.trace(torch.nn.Linear(4, 2))), limit=1)
    >>> [row["name"] for row in rows], total
    (['input_1'], 3)
    >>> recording = fxviz.record(torch.nn.Linear(4, 2), torch.ones(1, 4), method="export")
    >>> [row["name"] for row in node_rows_page(Drawing(recording))[0]]  # no weight, bias
    ['input_1', 'linear', 'output']
    """
    nodes = drawing.graph.nodes
    if records is None:
        records = drawing.records() or [n.record for n in nodes if n.record is not None]
        if not records:  # the graph did not run: the drawing's nodes
            rows = [
                {"name": n.name, "op": n.kind, "target": n.title, "shape": n.out_label}
                for n in nodes[:limit]
            ]
            return rows, len(nodes)
    # the drawn nodes only, as the graph, the header and the report's table count them
    # (parameter fetches folded into their users and telemetry calls are not rows)
    drawn = drawing.drawn_names
    shown = [r for r in records if r.name in drawn]
    return table_rows(shown[:limit]), len(shown)


def graph_payload(
    drawing: Drawing,
    view: View,
    records: list[NodeRecord] | None = None,
    *,
    include_rows: bool = True,
    include_index: bool = True,
) -> dict[str, Any]:
    """The payload of one view of ``drawing`` (see the module docstring); a view that
    already shows the table may leave ``rows`` out (``include_rows=False``), and one that
    sends search's index when it is asked for, ``index`` (``include_index=False``)."""
    payload: dict[str, Any] = {
        "payload_version": PAYLOAD_VERSION,
        "model": drawing.graph.name,
        "dot": view.dot,
        "depth": view.depth,
        "units": view.units,
        "node_states": {},
        "contract": page_contract(
            fill=drawing.source.fill(), linked=drawing.source.linked("") is not None
        ),
    }
    if include_index:
        payload["index"] = drawing.index()
    if include_rows:
        payload["rows"] = node_rows(drawing, records)
    return payload


OPENED_MAX = 3000  # nodes a box may hold to be pre-drawn in a report


def box_expansions(drawing: Drawing, view: View) -> dict[str, Any]:
    """For each collapsed box of ``view`` (2 to :data:`OPENED_MAX` nodes), its insides
    drawn on their own (:meth:`Drawing.inside`): ``{box id: {"dot", "nodes": [[name,
    DOT id], ...]}}``.

    >>> import torch, fxviz
    >>> from fxviz.render._api import Drawing
    >>> model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
    >>> drawing = Drawing(fxviz.trace(model))
    >>> opened = box_expansions(drawing, drawing.view(depth=1))
    >>> list(opened), opened["module__0"]["nodes"]
    (['module__0'], [['_0_0', '_0_0'], ['_0_1', '_0_1']])
    """
    members: dict[str, list[str]] = {}
    for name, unit in view.units.items():
        if unit in view.boxes:
            members.setdefault(unit, []).append(name)
    opened = {}
    for box, path in view.boxes.items():
        if 1 < len(members.get(box, ())) <= OPENED_MAX:
            inside = drawing.inside(path).view(depth=None, legend=False)
            opened[box] = {"dot": inside.dot, "nodes": [list(kv) for kv in inside.units.items()]}
    return opened


def debugger_states(debugger: Debugger) -> dict[str, list[str]]:
    """The debugger's node states, with ``nonfinite`` on nodes whose output held NaN/Inf."""
    states = debugger.node_states()
    for record in debugger.recording.values():
        if has_nonfinite(record):
            states[record.name].append("nonfinite")
    return states


def replay_payload(recording: Recording, *, skip_fetches: bool = True) -> dict[str, Any]:
    """Every cursor position of a recorded run, as the :class:`fxviz.Debugger` shows it,
    and where each toolbar action moves from there: the page only looks positions up.

    ``order``: the nodes run. ``skip``: the inputs and the nodes that only fetch a
    parameter, buffer or constant, which stepping goes over as
    ``Debugger(skip_fetches=True)`` does (none with ``skip_fetches=False``). ``start``:
    where the run starts (after the inputs and leading fetches). ``positions``: the cursor positions a scrubber visits (never one on a
    fetch). ``steps[p]`` (``p`` nodes run, up to the failing node): ``status`` (the
    Debugger's status line, ``{reason}`` standing for why it stopped), ``states`` (the
    node states that differ from position ``p - 1``; all of them at 0), ``nonfinite``
    (whether the node just run satisfies :func:`fxviz.has_nonfinite`: where "break on
    NaN/Inf" stops; ``nonfinite_status``: the status line when it stops there), ``error`` (the cursor is on the node that raised), ``stop`` (why
    "continue" stops on reaching ``p`` whatever the breakpoints: ``"error"``, ``"end"``
    or ``None``) and ``moves`` (the position ``step``, ``step10`` and ``back`` go to).

    >>> import torch, fxviz
    >>> replay = replay_payload(fxviz.record(torch.nn.ReLU(), torch.ones(2)))
    >>> replay["steps"][1]["status"], replay["steps"][1]["states"]
    ("stopped at 'relu' ({reason}) — 1/3 nodes", {'input_1': ['done'], 'relu': ['current']})
    >>> replay["start"], replay["steps"][1]["moves"], replay["steps"][3]["stop"]
    (1, {'step': 2, 'step10': 3, 'back': 1}, 'end')
    """
    records = recording.records()
    graph = cast(torch.fx.Graph, recording.graph_module.graph)
    names = [n.name for n in graph.nodes]
    failed = next((i for i, r in enumerate(records) if r.error is not None), None)
    last = failed if failed is not None else len(records)
    flags = [has_nonfinite(r) for r in records]
    fetch_names = {
        n.name for n in graph.nodes if skip_fetches and is_stepped_over(recording.graph_module, n)
    }
    fetches = {i for i, r in enumerate(records) if r.name in fetch_names}
    uncounted = {i for i in fetches if records[i].op != "placeholder"}  # inputs count as run
    moves = _Moves(fetches, last)
    steps: list[dict[str, Any]] = []
    for position in range(last + 1):
        error = records[position].error if position == failed else None
        if position == 0:
            changed = range(len(names))
        else:
            changed = range(position - 1, min(position + 1, len(names)))
        states = {}
        for i in changed:
            state = node_state(i, position, error is not None)
            if i < len(records) and i < position and flags[i]:
                state.append("nonfinite")
            states[names[i]] = state
        steps.append(
            {
                "status": status_line(names, position, "{reason}", error, uncounted),
                "states": states,
                "nonfinite": bool(position and flags[position - 1]),
                "nonfinite_status": (
                    nonfinite_status(names, position, uncounted)
                    if position and flags[position - 1]
                    else None
                ),
                "error": error is not None,
                "stop": "error" if error is not None else "end" if position >= len(names) else None,
                "moves": {
                    "step": moves.step(position),
                    "step10": moves.step(position, 10),
                    "back": moves.back(position),
                },
            }
        )
    return {
        "order": [r.name for r in records],
        "skip": [n.name for n in graph.nodes if n.name in fetch_names],
        "start": moves.start,
        "positions": [p for p in range(last + 1) if p == last or p not in fetches],
        "steps": steps,
        "breakpoints_suffix": BREAKPOINTS_SUFFIX,
    }


class _Moves:
    """Where :meth:`Debugger.step` and :meth:`Debugger.back` take the cursor of a run
    whose nodes ``fetches`` only fetch a parameter and whose cursor ends at ``last``
    (breakpoints aside: the page stops "continue" at its own)."""

    def __init__(self, fetches: set[int], last: int) -> None:
        self.fetches = fetches
        self.last = last
        self.start = self._over_fetches(0)

    def _over_fetches(self, position: int) -> int:
        while position < self.last and position in self.fetches:
            position += 1
        return position

    def step(self, position: int, n: int = 1) -> int:
        for _ in range(n):
            position = self._over_fetches(position)
            position = self._over_fetches(min(position + 1, self.last))
        return position

    def back(self, position: int) -> int:
        position = max(0, position - 1)
        while position > 0 and position in self.fetches:
            position -= 1
        return max(position, self.start)
