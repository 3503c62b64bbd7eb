"""The ``fxviz`` command line: thin commands over the library, imported lazily."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]

_TARGET_HELP = (
    "the model (for report, also a saved recording: run.fxrec): 'package.module:attr' or 'path/to/file.py:attr' (an nn.Module class or a "
    "factory called with no arguments, an instance, or a function)"
)
_INPUT_HELP = (
    "one input, e.g. 'randn(50,1000)', 'randint(0,50257,(2,128))' or "
    "'zeros(1,3,224,224,dtype=float16)'; repeat for several inputs"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fxviz",
        description="A visual debugger for PyTorch computation graphs.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="record the built-in example (TwoLayerNet), print its table, write a replay report",
    )
    demo.add_argument("-o", "--output", default="fxviz-demo.html", help="the report to write")
    shapes = commands.add_parser(
        "shapes",
        help="print every node's output shape and dtype",
        description="Propagate shapes through a model and print one row a node.",
    )
    shapes.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    shapes.add_argument(
        "--input", "-i", action="append", default=[], metavar="SPEC", help=_INPUT_HELP
    )
    shapes.add_argument(
        "--mode",
        choices=("real", "fake", "meta"),
        default="real",
        help="real tensors, fake tensors (nothing allocated) or the meta device",
    )
    shapes.add_argument(
        "--format", choices=("table", "csv", "markdown", "html"), default="table", dest="fmt"
    )
    shapes.add_argument(
        "--device", default=None, help="with --mode fake: pretend the model lives here (cuda)"
    )
    rep = commands.add_parser(
        "report",
        help="record a model and write a self-contained HTML report (a replay of the run)",
        description="Record a model on the inputs (or propagate shapes in fake/meta mode) "
        "and write one HTML file that opens offline.",
    )
    rep.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    rep.add_argument("--input", "-i", action="append", default=[], metavar="SPEC", help=_INPUT_HELP)
    rep.add_argument("--mode", choices=("real", "fake", "meta"), default="real")
    rep.add_argument("-o", "--output", default="fxviz-report.html", help="the HTML file to write")
    _add_compare(commands)
    return parser


def _add_compare(commands: argparse._SubParsersAction) -> None:
    """``fxviz compare A B``: two saved recordings (``rec.save("run.fxrec")``) side by side."""
    cmp = commands.add_parser(
        "compare",
        help="compare two saved recordings (.fxrec) node by node and write an HTML report",
        description="Align two saved runs as fxviz.compare does, print where they part "
        "(exit code 1 when they diverge) and write one HTML file that opens offline.",
    )
    cmp.add_argument("a", metavar="A", help="the reference run (a .fxrec file)")
    cmp.add_argument("b", metavar="B", help="the run to check against it (a .fxrec file)")
    cmp.add_argument("-o", "--output", default="fxviz-compare.html", help="the HTML file to write")
    cmp.add_argument("--metric", choices=("sqnr", "allclose", "cosine"), default="sqnr")
    cmp.add_argument("--sqnr-db", type=float, default=30.0, help="SQNR floor in dB (default 30)")
    cmp.add_argument("--rtol", type=float, default=1e-5, help="with --metric allclose")
    cmp.add_argument("--atol", type=float, default=1e-6, help="with --metric allclose")


def _run_compare(args: argparse.Namespace) -> int:
    from fxviz._compare._commands import run_compare

    return run_compare(
        args.a, args.b, args.output,
        metric=args.metric, sqnr_db=args.sqnr_db, rtol=args.rtol, atol=args.atol,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fxviz`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "demo":
        from fxviz._demo import run_demo

        return run_demo(args.output)
    if args.command == "shapes":
        if args.device is not None and args.mode != "fake":
            parser.error("--device needs --mode fake")
        from fxviz._commands import run_shapes

        return run_shapes(args.target, args.input, args.mode, args.fmt, args.device)
    if args.command == "compare":
        return _run_compare(args)
    if args.command == "report" and args.target.endswith(".fxrec"):
        from fxviz._compare._commands import run_saved_report

        return run_saved_report(args.target, args.output)
    if args.command == "report":
        from fxviz._commands import run_report

        return run_report(args.target, args.input, args.mode, args.output)
    return 2  # pragma: no cover (argparse rejects unknown commands)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
