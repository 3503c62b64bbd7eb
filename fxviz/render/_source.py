"""The source adapter: how the drawing, the widgets and the report see any object.

One registry (``functools.singledispatch``) maps a type to a :class:`Source`: its
drawing, its default overlays, the run it shows, and optionally its own table rows,
inspector, report page and linked nodes. Each layer registers its own types when its
package is imported (the render layer those below it, ``fxviz._compare`` its
``Comparison``, ``fxviz._saved`` a loaded recording); render names none of them here.
An unknown object is drawn through its ``graph_module`` with a :class:`DrawingWarning`,
or refused with a :class:`RenderError` that says what to pass; a registered source whose
optional part fails degrades with a warning instead of blanking the view.

    >>> import torch, fxviz
    >>> source = source_of(fxviz.trace(torch.nn.Sequential(torch.nn.ReLU())))
    >>> type(source).__name__, [n.name for n in source.drawing("fold").nodes]
    ('GraphModuleSource', ['input_1', '_0', 'output'])
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from fxviz.errors import DrawingWarning, RenderError
from fxviz.render._fold import Params
from fxviz.render._model import DrawGraph

__all__ = ["Source", "degrade", "register", "registered", "source_of"]

_S = TypeVar("_S", bound="type[Source]")
_T = TypeVar("_T")


class Source:
    """What fxviz needs from one kind of object; subclass it and :func:`register` it.

    Only :meth:`drawing` is required. The optional parts return ``None`` to mean "the
    default": the table is every drawn node, the inspector the node's record, the report
    page the graph with a replay of :meth:`recording` when :meth:`replay` allows one.
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def drawing(self, params: Params) -> DrawGraph:
        """The drawing model (``params``: as for :func:`fxviz.to_dot`), made anew at each
        call: the caller may change it (a :class:`~fxviz.render.Drawing` groups wide
        levels in place)."""
        raise NotImplementedError

    def overlays(self) -> list[Any]:
        """The overlays drawn before the caller's (errors, NaN/Inf, debugger states)."""
        return []

    def recording(self) -> Any:
        """The :class:`fxviz.Recording` of the run drawn, ``None`` when nothing ran."""
        return None

    def replay(self) -> bool | None:
        """Whether a report replays the run: ``None`` for no replay, else whether the
        replay steps over parameter fetches."""
        return None

    def shown(self) -> Any:
        """What a report draws (a Debugger's report draws its recording)."""
        return self.obj

    def graph_module(self) -> Any:
        """The FX graph whose nodes the inspector describes (``None`` when there is none)."""
        return getattr(self.obj, "graph_module", self.obj)

    def rows(self) -> list[dict[str, Any]] | None:
        """The widget's table rows, when this object has its own."""
        return None

    def inspector(self, name: str, max_preview: int = 64) -> dict[str, Any] | None:
        """The inspector of node ``name``, when this object has its own."""
        return None

    def report(self, max_preview: int = 64) -> tuple[dict[str, Any], str] | None:
        """The report page's data and extra HTML, when this object has its own."""
        return None

    def report_extra(self) -> str:
        """HTML shown under the graph in a report (escaped by the source)."""
        return ""

    def fill(self) -> dict[str, Any] | None:
        """What a node's fill means in this view, for the legend: ``None`` for the
        operation (the default), else ``{"title": ..., "rows": [[colour, meaning], ...]}``."""
        return None

    def linked(self, node_id: str) -> list[str] | None:
        """Drawn ids to mark when ``node_id`` is selected (a joint graph's other pass)."""
        return None


class _DrawGraphSource(Source):
    def drawing(self, params: Params) -> DrawGraph:
        return self.obj


@functools.singledispatch
def _dispatch(obj: Any) -> Source:
    return _fallback(obj)


def source_of(obj: Any) -> Source:
    """The :class:`Source` registered for ``obj``'s type (the nearest in its MRO).

    Raises:
        RenderError: nothing is registered for it, nor for its ``graph_module``.

    Examples:
        >>> import torch, fxviz
        >>> from fxviz.render import source_of
        >>> rec = fxviz.record(torch.nn.ReLU(), torch.ones(2))
        >>> source = source_of(rec)
        >>> type(source).__name__, source.recording() is rec, source.replay()
        ('RecordingSource', True, True)
    """
    return _dispatch(obj)


def register(*types: type) -> Callable[[_S], _S]:
    """Class decorator: ``cls`` is the :class:`Source` of objects of ``types`` (and of
    their subclasses, unless one has its own).

    Examples:
        >>> import torch, fxviz
        >>> from fxviz.render import Source, register
        >>> class Pass:  # a user's object holding the graph a pass made
        ...     def __init__(self, gm):
        ...         self.gm = gm
        >>> @register(Pass)
        ... class PassSource(Source):
        ...     def drawing(self, params):
        ...         return fxviz.render.draw(self.obj.gm, params=params)
        >>> gm = fxviz.trace(torch.nn.Sequential(torch.nn.ReLU()))
        >>> fxviz.to_dot(Pass(gm)).source == fxviz.to_dot(gm).source
        True
    """

    def decorate(cls: _S) -> _S:
        for kind in types:
            _dispatch.register(kind, cls)
        return cls

    return decorate


def registered(obj: Any) -> bool:
    """Whether a source is registered for ``obj``'s type (the fallback does not count)."""
    return _dispatch.dispatch(type(obj)) is not _dispatch.dispatch(object)


def degrade(what: str, obj: Any, call: Callable[[], _T], default: _T) -> _T:
    """``call()``, or ``default`` with a :class:`DrawingWarning` when it raises: one
    failing part of a view never blanks the rest."""
    try:
        return call()
    except Exception as e:
        warnings.warn(
            f"could not make the {what} of this {type(obj).__name__} "
            f"({type(e).__name__}: {e}); shown without it",
            DrawingWarning,
            stacklevel=3,
        )
        return default


register(DrawGraph)(_DrawGraphSource)


def _fallback(obj: Any) -> Source:
    inner = getattr(obj, "graph_module", None)
    if inner is not None and inner is not obj and registered(inner):
        warnings.warn(
            f"fxviz does not know how to draw a {type(obj).__name__}: drawing its "
            f"graph_module ({type(inner).__name__}) instead; pass that, or a Recording, "
            "Debugger or ShapeReport of it, to draw it with its values",
            DrawingWarning,
            stacklevel=4,
        )
        return source_of(inner)
    raise RenderError(
        f"cannot draw an object of type {type(obj).__name__}: pass a GraphModule, Recording, "
        "ShapeReport, Debugger, ExportedProgram, JointGraph, GraphDiff, Comparison or "
        "TorchScript module/function/graph (fxviz.trace(model) turns a module into a "
        "GraphModule)"
    )
