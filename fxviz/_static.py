"""Where the built front end lives (``npm run build`` writes it; wheels carry it)."""

from __future__ import annotations

import pathlib

from fxviz.errors import FxvizError

__all__ = ["STATIC", "static_file"]

STATIC = pathlib.Path(__file__).resolve().parent / "static"


def static_file(name: str) -> pathlib.Path:
    """A file of the built front end; a clear error when the bundle was never built."""
    path = STATIC / name
    if not path.is_file():
        raise FxvizError(
            f"the fxviz front end is not built ({path} is missing). Build it with "
            "`npm install && npm run build` (Node.js needed), or reinstall fxviz from a wheel."
        )
    return path
