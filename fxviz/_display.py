"""In IPython, ``display(dbg)`` (a Debugger as a cell's last value) shows the debugger app."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["register_notebook_display"]


def register_notebook_display() -> None:
    """Show a :class:`fxviz.Debugger` as :class:`fxviz.DebuggerApp` (the same app
    ``fxviz.debug`` opens; a static table where widgets cannot load).

    Registered by type name, so nothing is imported until a Debugger is displayed; outside
    IPython it does nothing.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def app_bundle(dbg: Any, include: object = None, exclude: object = None) -> object:
        try:
            from fxviz.widgets import DebuggerApp

            app: Any = DebuggerApp(dbg)
            return app._repr_mimebundle_(include=include, exclude=exclude)
        except Exception:
            return {"text/html": dbg._repr_html_()}

    shell.display_formatter.mimebundle_formatter.for_type_by_name(
        "fxviz._record._debugger", "Debugger", app_bundle
    )
