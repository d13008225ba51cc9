"""A package's public names loaded on first use, through a module ``__getattr__``.

A package built with `lazy_names` imports none of its modules when it is imported itself:
``from jianmu.nodes import AgentState`` runs only the module that holds ``AgentState``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType


def lazy_names(
    package: str, holders: Mapping[str, Iterable[str]], public: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package`, whose ``holders`` map each module
    to the public names it holds."""
    where = {name: module for module, names in holders.items() for name in names}
    namespace = sys.modules[package].__dict__
    listed = frozenset(public)

    def __getattr__(name: str) -> object:
        """A public name from the module that holds it, or a sub-module, on first access."""
        module = where.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            namespace[name] = value  # the next access skips this hook
            return value
        if not name.startswith("__"):  # a sub-module: ``jianmu.tools.schema``
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        """The public names, loaded or not, the sub-modules loaded and the dunders."""
        shown = (n for n, v in namespace.items()
                 if n in listed or n.startswith("__") or isinstance(v, ModuleType))
        return sorted({*shown, *listed})

    return __getattr__, __dir__
