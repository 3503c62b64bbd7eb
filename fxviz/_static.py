"""Where the built front end lives (``npm run build`` writes it; wheels carry it)."""

from __future__ import annotations

import json
import pathlib

from fxviz.errors import FxvizError

__all__ = ["BUILD_HINT", "STATIC", "static_file", "widget_css", "widget_esm"]

STATIC = pathlib.Path(__file__).resolve().parent / "static"
BUILD_HINT = (
    "Build it from a source checkout with `npm ci && npm run build` (Node.js needed; "
    "`make js` does both), or install fxviz from a wheel, which carries it."
)


def static_file(name: str) -> pathlib.Path:
    """A file of the built front end; a clear error when the bundle was never built.

    >>> static_file("widget.js").name
    'widget.js'
    """
    path = STATIC / name
    if not path.is_file():
        raise FxvizError(f"the fxviz front end is not built ({path} is missing). {BUILD_HINT}")
    return path


def widget_esm() -> str:
    """The widget's module as text, or, when the bundle is missing, a module that shows a
    message saying how to build it (never a blank widget).

    Text, not a path: anywidget ties every instance built from a path to a file-watch
    signal whose closure holds the instance, so no widget (nor its model) would be freed.
    """
    path = STATIC / "widget.js"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    message = f"fxviz: the notebook front end is not built ({path} is missing). {BUILD_HINT}"
    return (
        "export default { render({ el }) {"
        " const box = document.createElement('pre');"
        " box.className = 'fxviz-missing-bundle';"
        " box.style.cssText = 'color:#900;white-space:pre-wrap;padding:8px;';"
        f" box.textContent = {json.dumps(message)}; el.append(box); }} }};"
    )


def widget_css() -> str:
    """The widget's stylesheet as text, or no styles when the bundle is missing."""
    path = STATIC / "widget.css"
    return path.read_text(encoding="utf-8") if path.is_file() else ""
