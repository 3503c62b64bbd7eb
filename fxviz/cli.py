"""The ``fxviz`` command line: thin commands over the library, imported lazily.

Every failure is one ``fxviz: error: ...`` line on stderr (the message's further lines
indented under it, then a hint), never a traceback unless ``--debug`` asks for one. Exit
codes: 0 done, 1 the model failed (or fxviz did), 2 bad usage or input, 130 Ctrl-C, 141
the reader of the output went away (``| head``). A failing node is one line (node, op,
error) and a hint; ``--debug`` adds its inputs, what to do and the traceback. ``-o``
never replaces a file without ``--force`` and never writes through a symbolic link.
``--help`` and usage errors answer without importing torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from fxviz.errors import FxvizError, NodeError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

# Only argparse, os and sys are imported to answer --help or a usage error (no torch, no
# pathlib, no traceback): the answer comes at once.

__all__ = ["main"]

_TARGET_HELP = (
    "the model (for report, also a saved recording: run.fxrec): 'package.module:attr' or 'path/to/file.py:attr' (an nn.Module class or a "
    "factory called with no arguments, an instance, or a function)"
)
_INPUT_HELP = (
    "one input, e.g. 'randn(50,1000)', 'randint(0,50257,(2,128))' or "
    "'zeros(1,3,224,224,dtype=float16)'; repeat for several inputs"
)
_DEBUG_HELP = "on an error, show the Python traceback too"
_DEBUG_HINT = "hint: add --debug to see the Python traceback"
_NODE_HINT = "(add --debug for the node's inputs and the Python traceback)"
_FORCE_HELP = "replace the output file if it exists"


class UsageError(Exception):
    """A command line that cannot be carried out (exit code 2); ``prog`` names the command."""

    def __init__(self, message: str, prog: str = "fxviz") -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises instead of exiting, so ``main`` reports every
    failure the same way."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fxviz",
        description="A visual debugger for PyTorch computation graphs.",
        epilog="Exit codes: 0 done, 1 the model failed, 2 bad usage or input.",
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    # Subcommands accept --debug too; SUPPRESS keeps their default from hiding the top one.
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="record the built-in example (TwoLayerNet), print its table, write a replay report",
    )
    demo.add_argument("-o", "--output", default="fxviz-demo.html", help="the report to write")
    demo.add_argument("--force", action="store_true", help=_FORCE_HELP)
    shapes = commands.add_parser(
        "shapes",
        parents=[common],
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
        parents=[common],
        help="record a model and write a self-contained HTML report (a replay of the run)",
        description="Record a model on the inputs (or propagate shapes in fake/meta mode) "
        "and write one HTML file that opens offline.",
    )
    rep.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    rep.add_argument("--input", "-i", action="append", default=[], metavar="SPEC", help=_INPUT_HELP)
    # default None: a saved recording (TARGET.fxrec) refuses a --mode it would ignore
    rep.add_argument("--mode", choices=("real", "fake", "meta"), default=None)
    rep.add_argument("-o", "--output", default="fxviz-report.html", help="the HTML file to write")
    rep.add_argument("--force", action="store_true", help=_FORCE_HELP)
    _add_compare(commands)
    _add_compare_ranks(commands)
    return parser


def _add_compare_ranks(commands: argparse._SubParsersAction) -> None:
    """``fxviz compare-ranks run-*.fxrec``: one saved recording a rank of a distributed job."""
    ranks = commands.add_parser(
        "compare-ranks",
        help="find the first rank and node where a job's ranks part (.fxrec, one a rank)",
        description="Align the ranks' saved runs as fxviz.compare_ranks does (bitwise to "
        "rank 0, or to a single-process --reference), print where they part (exit code 1 "
        "when they do) and write one HTML file that opens offline.",
    )
    ranks.add_argument("files", metavar="FILES", nargs="+", help="one .fxrec file a rank")
    ranks.add_argument("-o", "--output", default="fxviz-ranks.html", help="the HTML file to write")
    ranks.add_argument("--force", action="store_true", help=_FORCE_HELP)
    ranks.add_argument("--reference", metavar="FILE", help="a single-process run (.fxrec)")
    ranks.add_argument("--backward", action="store_true", help="compare the saved gradients")
    ranks.add_argument("--metric", choices=("exact", "sqnr", "allclose"), default=None)
    ranks.add_argument("--sqnr-db", type=float, default=60.0, help="SQNR floor (default 60)")


def _add_compare(commands: argparse._SubParsersAction) -> None:
    """``fxviz compare A B``: two saved recordings (``rec.save("run.fxrec")``) side by side."""
    cmp = commands.add_parser(
        "compare",
        help="compare two saved recordings (.fxrec) node by node and write an HTML report",
        description="Align two saved runs as fxviz.compare does, print where they part "
        "(exit code 1 when they diverge, 3 when nothing diverges but some pairs could not "
        "be measured) and write one HTML file that opens offline.",
    )
    cmp.add_argument("a", metavar="A", help="the reference run (a .fxrec file)")
    cmp.add_argument("b", metavar="B", help="the run to check against it (a .fxrec file)")
    cmp.add_argument("-o", "--output", default="fxviz-compare.html", help="the HTML file to write")
    cmp.add_argument("--force", action="store_true", help=_FORCE_HELP)
    cmp.add_argument("--metric", choices=("sqnr", "allclose", "cosine"), default="sqnr")
    # defaults None: a threshold of another metric is refused, not silently ignored
    cmp.add_argument("--sqnr-db", type=float, default=None, help="SQNR floor in dB (default 30)")
    cmp.add_argument("--min-cosine", type=float, default=None, help="with --metric cosine (0.999)")
    cmp.add_argument("--rtol", type=float, default=None, help="with --metric allclose (1e-5)")
    cmp.add_argument("--atol", type=float, default=None, help="with --metric allclose (1e-6)")


def _run_compare(args: argparse.Namespace) -> int:
    from fxviz._compare._commands import run_compare
    from fxviz._report import report

    for option, value, metric in (
        ("--sqnr-db", args.sqnr_db, "sqnr"),
        ("--min-cosine", args.min_cosine, "cosine"),
        ("--rtol", args.rtol, "allclose"),
        ("--atol", args.atol, "allclose"),
    ):
        if value is not None and args.metric != metric:
            raise UsageError(
                f"{option} applies to --metric {metric}, not --metric {args.metric}",
                "fxviz compare",
            )
    return run_compare(
        args.a, args.b, args.output, metric=args.metric,
        sqnr_db=30.0 if args.sqnr_db is None else args.sqnr_db,
        min_cosine=0.999 if args.min_cosine is None else args.min_cosine,
        rtol=1e-5 if args.rtol is None else args.rtol,
        atol=1e-6 if args.atol is None else args.atol,
        report=report,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fxviz`` console script; returns the exit code."""
    parser = _parser()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("choose a COMMAND: demo, shapes, report or compare")
        return _run(args)
    except UsageError as e:
        _print_error(str(e), hint=f"hint: see '{e.prog} --help'")
        return 2
    except KeyboardInterrupt:
        print("fxviz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_left()
    except NodeError as e:  # one line (node, op, error); the rest with --debug
        message = str(e).strip() or type(e).__name__
        if debug:
            _print_error(message, error=e)
        else:
            _print_error(message.splitlines()[0], hint=_node_hint(message))
        return 1
    except FxvizError as e:
        _print_error(str(e) or type(e).__name__, error=e if debug else None, hint=_hint(e, debug))
        return 2
    except Exception as e:  # a bug, in fxviz or in a library: still one line, code 1
        message = f"unexpected {type(e).__name__}: {e}"
        _print_error(message, error=e if debug else None, hint=None if debug else _DEBUG_HINT)
        return 1


def _node_hint(message: str) -> str:
    """The error's own "What to do", on one line, and where the rest is."""
    _, found, what = message.partition("What to do:")
    what = " ".join(what.replace(" above", "").split())
    return f"hint: {what} {_NODE_HINT}" if found and what else f"hint: {_NODE_HINT[1:-1]}"


def _reader_left() -> int:
    """The reader of stdout went away (``fxviz shapes ... | head``): stop quietly, as a
    Unix tool killed by SIGPIPE does (exit code 141), with no error of Python's at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test's capture)
        pass
    return 141


def _run(args: argparse.Namespace) -> int:
    """Check what can be checked without torch, then import and run the command."""
    if getattr(args, "output", None) is not None:
        _check_output(args.output, f"fxviz {args.command}", force=args.force)
    if args.command == "report" and args.target.endswith(".fxrec") and (args.input or args.mode):
        given = "--input" if args.input else "--mode"
        raise UsageError(
            f"{given} does not apply to a saved recording: {args.target} is reported as it "
            "was recorded (to record again, give the model as TARGET)",
            "fxviz report",
        )
    if args.command == "demo":
        from fxviz._demo import run_demo

        return run_demo(args.output)
    if args.command == "shapes":
        if args.device is not None and args.mode != "fake":
            raise UsageError("--device needs --mode fake", "fxviz shapes")
        from fxviz._commands import run_shapes

        return run_shapes(args.target, args.input, args.mode, args.fmt, args.device)
    if args.command == "compare":
        return _run_compare(args)
    if args.command == "compare-ranks":
        from fxviz._ranks._command import run_compare_ranks
        from fxviz._report import report

        return run_compare_ranks(
            args.files, args.output, write=report, reference=args.reference,
            backward=args.backward, metric=args.metric, sqnr_db=args.sqnr_db,
        )  # fmt: skip
    if args.command == "report" and args.target.endswith(".fxrec"):
        from fxviz._compare._commands import run_saved_report
        from fxviz._report import report

        return run_saved_report(args.target, args.output, report=report)
    from fxviz._commands import run_report

    return run_report(args.target, args.input, args.mode or "real", args.output)


def _check_output(output: str, prog: str, *, force: bool = False) -> None:
    """Refuse an output path that cannot (or must not) be written, before any work."""
    folder = os.path.dirname(output) or "."
    if not output.strip() or "\0" in output:
        why = f"-o {output!r} is not a file name: name the file to write, such as report.html"
    elif os.path.islink(output):
        why = (
            f"-o {output} is a symbolic link (to {os.readlink(output)}): fxviz does not "
            "write through links; name the file itself"
        )
    elif os.path.isdir(output):
        why = f"-o {output} is a folder: name a file such as {os.path.join(output, 'report.html')}"
    elif not os.path.isdir(folder):
        why = f"-o {output}: the folder {folder} does not exist (create it first)"
    elif not os.access(folder, os.W_OK) or (
        os.path.exists(output) and not os.access(output, os.W_OK)
    ):
        why = f"-o {output}: cannot write there (permission denied)"
    elif os.path.lexists(output) and not force:
        why = f"-o {output} exists: add --force to replace it, or name another file"
    elif os.path.lexists(output) and not os.path.isfile(output):
        why = f"-o {output} is not a regular file (a FIFO or a device): name a file"
    else:
        return
    raise UsageError(why, prog)


def _hint(error: BaseException, debug: bool) -> str | None:
    """The debug hint, for errors that wrap an exception from torch or the user's code."""
    return None if debug or error.__cause__ is None else _DEBUG_HINT


def _print_error(
    message: str, *, error: BaseException | None = None, hint: str | None = None
) -> None:
    if error is not None:
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    lines = message.strip().splitlines() or ["error"]
    print(f"fxviz: error: {lines[0]}", file=sys.stderr)
    for line in lines[1:]:
        print(f"  {line}", file=sys.stderr)
    if hint:
        print(f"  {hint}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
