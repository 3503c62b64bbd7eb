"""Load a model named on the command line: ``package.module:attr`` or ``path/file.py:attr``."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import torch

from fxviz.errors import TargetError  # defined in errors.py, re-exported here

__all__ = ["TargetError", "load_target"]


def load_target(text: str) -> Any:
    """The model that ``text`` names.

    An ``nn.Module`` class, or a function taking no arguments (a factory), is called; an
    instance or a function that takes inputs is used as it is.
    """
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not attr:
        raise TargetError(
            f"TARGET must be 'package.module:attr' or 'path/to/file.py:attr', not {text!r}"
        )
    module = _import(where)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(module) if not n.startswith("_")]
            raise TargetError(
                f"{where} has no attribute {attr!r} (it has: {', '.join(names[:20])})"
            ) from None
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        return _call(obj, text)
    if callable(obj) and not isinstance(obj, torch.nn.Module) and _takes_no_arguments(obj):
        return _call(obj, text)
    return obj


def _import(where: str) -> Any:
    if where.endswith(".py") or "/" in where or "\\" in where:
        return _import_file(where)
    try:
        return importlib.import_module(where)
    except SyntaxError as e:
        raise TargetError(_syntax_error(where, e)) from e
    except ImportError as e:
        raise TargetError(f"cannot import {where!r}: {e}") from e
    except (Exception, SystemExit) as e:  # the module's own code raised while importing
        raise TargetError(_raised(where, e)) from e


def _import_file(where: str) -> Any:
    path = Path(where)
    if not path.is_file():
        raise TargetError(f"no such file: {where}")
    name = f"_fxviz_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot import {where}: Python does not read it as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))  # let the file import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise TargetError(_syntax_error(where, e)) from e
    except (Exception, SystemExit) as e:
        sys.modules.pop(name, None)
        raise TargetError(_raised(where, e)) from e
    finally:
        sys.path.pop(0)
    return module


def _syntax_error(where: str, error: SyntaxError) -> str:
    place = f"{error.filename or where}, line {error.lineno}"
    line = (error.text or "").strip()
    return f"{place}: {error.msg}" + (f": {line}" if line else "")


def _raised(where: str, error: BaseException) -> str:
    return f"importing {where} raised {type(error).__name__}: {error}"


def _takes_no_arguments(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    )


def _call(factory: Any, text: str) -> Any:
    try:
        return factory()
    except Exception as e:
        raise TargetError(
            f"{text} could not be built with no arguments: {type(e).__name__}: {e}. Point "
            "TARGET at a factory function that takes none, or at an instance."
        ) from e
