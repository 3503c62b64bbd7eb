"""Values and names that used to break drawing: huge floats, bidi and invisible
characters, lone surrogates, empty diffs, nonsense drawing options."""

from __future__ import annotations

import html.parser

import pytest
import torch

import fxviz
from fxviz.render._inspect import inspector_data


def _histogram(fn, x):
    rec = fxviz.record(fn, x)
    name = next(r.name for r in rec.values() if r.op == "call_function")
    return inspector_data(name, None, rec[name])["histogram"]


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([-3e38, 0.0, 3e38], torch.float32),  # histc overflowed: every bin empty
        ([-3.4e38, -3.4e38, 3.4e38], torch.float32),
        ([1e300, 2e300, -1e308], torch.float64),  # lost to float32 infinity before
        ([3.4e38, 3.4e38], torch.float32),  # one value: low == high
    ],
)
def test_histogram_counts_every_finite_value_even_near_the_float_limits(values, dtype):
    x = torch.tensor(values, dtype=dtype)
    hist = _histogram(lambda t: t * 1, x)
    assert sum(hist["counts"]) == len(values)
    assert len(hist["counts"]) == 20
    assert hist["low"] == float(x.min())
    assert hist["high"] == float(x.max())


def test_histogram_skips_infinities_and_keeps_the_rest():
    hist = _histogram(lambda t: t * 1e38, torch.tensor([-3.0, 1.0, 5.0]))  # 5e38: inf
    assert sum(hist["counts"]) == 2
    assert hist["counts"][0] == 1
    assert hist["counts"][-1] == 1


class _Hostile(torch.nn.Module):
    """Submodules whose names hold a bidi override, a zero-width space, a control
    character and a lone surrogate (``add_module`` accepts any string without a dot)."""

    NAMES = ("evil\u202egnp_exe", "zero\u200bwidth", "bell\x07", "sur\ud800")

    def __init__(self) -> None:
        super().__init__()
        for name in self.NAMES:
            self.add_module(name, torch.nn.Tanh())

    def forward(self, x):
        for name in self.NAMES:
            x = getattr(self, name)(x)
        return x


def _hostile_graph():
    # fxviz.trace falls back to torch.export: symbolic_trace cannot compile the code of a
    # GraphModule with a surrogate in it (a torch limitation)
    x = torch.randn(3)
    return fxviz.trace(_Hostile(), x), x


_INVISIBLE = ("\u202e", "\u200b", "\x07", "\ud800")


def test_invisible_and_bidi_characters_are_shown_escaped_in_dot():
    gm, _ = _hostile_graph()
    source = fxviz.to_dot(gm).source
    for ch in _INVISIBLE:
        assert ch not in source
    # a backslash is drawn as the look-alike U+29F5 (Graphviz expands \N, \G...)
    for shown in ("evil\u29f5u202egnp_exe", "zero\u29f5u200bwidth", "bell\u29f5u0007"):
        assert shown in source
    assert "sur\u29f5ud800" in source


@pytest.mark.dot
def test_to_svg_renders_names_with_lone_surrogates_and_bidi_characters():
    gm, x = _hostile_graph()
    svg = fxviz.to_svg(fxviz.record(gm, x))
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    for ch in _INVISIBLE:
        assert ch not in svg
    assert "evil\u29f5u202egnp_exe" in svg


def test_a_report_of_hostile_names_writes_and_escapes_the_graph(tmp_path):
    gm, x = _hostile_graph()
    page = tmp_path / "hostile.html"
    fxviz.report(fxviz.record(gm, x), page)
    text = page.read_text(encoding="utf-8")
    assert "\u202e" not in text
    html.parser.HTMLParser().feed(text)


def test_report_of_a_diff_between_two_empty_graphs(tmp_path):
    def empty():
        return torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())  # not even an output

    diff = fxviz.diff(empty(), empty())
    assert list(diff.table().columns)[:3] == ["before", "after", "status"]
    page = tmp_path / "diff.html"
    fxviz.report(diff, page)
    assert "What changed" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_max_label_must_be_a_positive_int(bad):
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="max_label must be a positive int"):
        fxviz.to_dot(gm, max_label=bad)


def test_max_label_of_one_cuts_every_label_to_an_ellipsis():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    source = fxviz.to_dot(gm, max_label=1, legend=False).source
    assert "label=<<B>…</B>" in source


def test_report_title_shows_bidi_characters_escaped(tmp_path):
    # found by tests/test_generated_graphs.py: the title went raw into <title> and <h1>
    page = fxviz.report(fxviz.record(torch.nn.ReLU(), torch.ones(2)), title="\u202eexe.gnp")
    head = page.split("<script>")[0]
    assert "\u202e" not in head
    assert "<title>\\u202eexe.gnp</title>" in head
