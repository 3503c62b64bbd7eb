"""Every panel tells the same truth: inspector after the run, what fill means per view."""

from __future__ import annotations

import json

import torch

import fxviz
from fxviz.widgets import GraphView


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_after_continue_no_node_that_ran_says_not_run_yet():
    gm = fxviz.trace(_model(), torch.ones(1, 3), method="dynamo")
    app = fxviz.debug(gm, torch.ones(1, 3))
    app.handle({"type": "continue"})
    assert app.status.startswith("finished — ")
    drawn = [n.name for n in app._draw.nodes]
    for name in drawn:
        app.selected = name
        fields = dict(map(tuple, app.inspector["fields"]))
        assert fields.get("state") != "not run yet", (name, fields)
        assert "output" in fields, (name, fields)  # what it produced, as it ran


def test_a_comparisons_legend_says_fill_means_agreement():
    model, x = _model(), torch.ones(1, 3)
    cmp = fxviz.compare(fxviz.record(model, x), fxviz.record(model, x * 1.001))
    fill = GraphView(cmp).contract["fill"]
    assert fill["title"] == "fill: agreement of the two runs"
    assert len(fill["rows"]) == 7
    assert all(colour.startswith("#") and text for colour, text in fill["rows"])
    page = fxviz.report(cmp)
    assert "fill: agreement of the two runs" in page  # the offline page reads the same
    plain = GraphView(fxviz.trace(model)).contract["fill"]
    assert plain == {"title": "fill: the operation", "rows": None}
    assert json.dumps(plain)  # travels to the page as it is


def test_the_table_lists_the_nodes_drawn_as_the_report_does():  # the report: _report/_html.py
    # an exported graph fetches its parameters as inputs; a Dynamo graph with get_attr:
    # folded into their users, they are neither drawn nor rows (nor counted)
    model, x = _model(), torch.ones(1, 3)
    for method in ("export", "dynamo"):
        app = fxviz.debug(fxviz.trace(model, x, method=method), x)
        app.handle({"type": "continue"})
        drawn = [n.name for n in app._draw.nodes]
        assert [row["name"] for row in app.rows] == drawn, method
        assert app.rows_total == len(drawn), method


def test_the_report_header_names_the_capture_in_the_titles_words():
    model, x = _model(), torch.ones(1, 3)
    for method, words in (("symbolic", "symbolic_trace"), ("real", "one real run")):
        rec = fxviz.record(fxviz.trace(model, x, method=method), x)
        page = fxviz.report(rec)
        assert f"Sequential ({words})" in page, method  # the title
        assert f"captured by: {words}" in page, method  # the header, in the same words
