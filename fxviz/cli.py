"""The ``fxviz`` command line: thin commands over the library, imported lazily."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fxviz`` console script; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="fxviz",
        description="A visual debugger for PyTorch computation graphs.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "demo", help="record the built-in example (TwoLayerNet) and print its per-node table"
    )
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "demo":
        from fxviz._demo import run_demo

        return run_demo()
    return 2  # pragma: no cover (argparse rejects unknown commands)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
