"""What the ``fxviz`` subcommands do; ``fxviz.cli`` only parses arguments and imports this.

Commands raise :class:`~fxviz.FxvizError` for bad input and :class:`~fxviz.NodeError` for a
failing model; ``fxviz.cli`` turns them into one ``fxviz: error:`` line and an exit code.
"""

from __future__ import annotations

import html
import sys
from typing import Any

from fxviz.errors import NodeError

__all__ = ["run_report", "run_shapes"]

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 13px; }}
td, th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; }}</style></head>
<body><h1>{title}</h1>{body}</body></html>
"""


def run_shapes(target: str, inputs: list[str], mode: str, fmt: str, device: str | None) -> int:
    """``fxviz shapes``: print a model's per-node shape table."""
    from fxviz._shapes import shapes
    from fxviz._shapes._spec import parse_device

    where = parse_device(device) if device is not None else None
    model, specs = _load(target, inputs)
    report = shapes(model, *specs, mode=mode, device=where)  # type: ignore[arg-type]
    print(_render(report, fmt, f"fxviz shapes {target}"))
    return 0


def run_report(target: str, inputs: list[str], mode: str, output: str) -> int:
    """``fxviz report``: record a model (or propagate shapes) and write one HTML file."""
    from fxviz._record import record
    from fxviz._report import report
    from fxviz._shapes import shapes

    model, specs = _load(target, inputs)
    try:
        if mode == "real":
            tensors = [s.materialize() for s in specs]
            obj: Any = record(model, *tensors, progress=None)
        else:
            obj = shapes(model, *specs, mode=mode)  # type: ignore[arg-type]
    except NodeError as e:
        partial = getattr(e, "report", None) or e.recording
        if partial is not None:
            report(partial, output, title=f"fxviz report {target} (failed at {e.node})")
            print(f"wrote {output} with everything recorded before the failure", file=sys.stderr)
        raise
    report(obj, output, title=f"fxviz report {target}")
    print(f"wrote {output}: open it in any browser (it works offline)")
    return 0


def _load(target: str, inputs: list[str]) -> tuple[Any, list[Any]]:
    """The model TARGET names and the parsed input specs (FxvizError when either is bad).

    The specs are read first: a typo in one is reported before the model is built.
    """
    from fxviz._shapes import parse_spec
    from fxviz._targets import load_target

    specs = [parse_spec(text) for text in inputs]
    return load_target(target), specs


def _render(report: Any, fmt: str, title: str) -> str:
    if fmt == "csv":
        return report.to_csv().rstrip("\n")
    if fmt == "markdown":
        return report.to_markdown()
    if fmt == "html":
        return _PAGE.format(title=html.escape(title), body=report._repr_html_())
    return report.to_text()
