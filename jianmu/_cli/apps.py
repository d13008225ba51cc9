"""Loading a durable app named ``module:attr`` or ``path/to/file.py:attr``, as uvicorn does."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from jianmu._cli.common import CLIError

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine

__all__ = ("DEFAULT_ATTR", "load_app", "split_app")

DEFAULT_ATTR = "engine"
"""The attribute an APP without ``:attr`` names."""


def split_app(spec: str) -> tuple[str, str]:
    """``(module or file, attribute)`` of an APP spec; the attribute defaults to ``engine``."""
    where, sep, attr = spec.rpartition(":")
    # no colon, or the colon is a Windows drive's ("C:\\app.py"): the whole spec is the place
    if not sep or any(c in attr for c in "/\\") or attr.endswith(".py"):
        return spec, DEFAULT_ATTR
    return where, attr or DEFAULT_ATTR


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def _import_file(spec: str, where: str) -> ModuleType:
    path = Path(where).expanduser().resolve()
    if not path.is_file():
        raise CLIError(f"app {spec!r}: no file {where!r}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    folder = str(path.parent)
    if folder not in sys.path:  # its sibling modules import as they do when run as a script
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise CLIError(f"app {spec!r}: {where!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise CLIError(f"app {spec!r}: {where} failed to load: {type(exc).__name__}: {exc}"
                       ) from exc
    return module


def _import_module(spec: str, where: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:  # as uvicorn's --app-dir: the current folder
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        if exc.name and (where == exc.name or where.startswith(exc.name + ".")):
            raise CLIError(f"app {spec!r}: no module {where!r} (looked in {cwd} and the "
                           "Python path)") from None
        raise CLIError(f"app {spec!r}: module {where!r} failed to import: {exc}") from exc
    except Exception as exc:
        raise CLIError(f"app {spec!r}: module {where!r} failed to import: "
                       f"{type(exc).__name__}: {exc}") from exc


def load_app(spec: str) -> DurableEngine:
    """The `DurableEngine` that ``spec`` names (``module:attr``, ``file.py:attr``; attr
    defaults to ``engine`` and may be dotted).

    Raises:
        CLIError: the module or file cannot be found or imported, it has no such attribute,
            or the attribute is not a `DurableEngine`.
    """
    from jianmu.durable import DurableEngine

    where, attr = split_app(spec)
    if not where:
        raise CLIError(f"app {spec!r}: write MODULE:ATTR or path/to/file.py:ATTR")
    value: object = _import_file(spec, where) if _is_file(where) else _import_module(spec, where)
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CLIError(f"app {spec!r}: {where} has no attribute {attr!r}") from None
    if not isinstance(value, DurableEngine):
        raise CLIError(f"app {spec!r}: {attr} is a {type(value).__name__}, not a DurableEngine")
    return value
