"""`moved`: the module ``__getattr__`` that keeps an old import path working for one release.

A lower layer cannot import a name that moved up (say ``jianmu.nodes.SkillNode``, now in
``jianmu.skills``) without breaking the layering, so the old module resolves it by name on
first use, with `importlib`, and warns.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping

__all__ = ("moved",)


def moved(old: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``old``: each name in ``names`` comes from its new module.

    Args:
        old: The old module's name (its ``__name__``).
        names: Each moved name and the module it lives in now.

    Returns:
        The ``__getattr__``: it warns with `DeprecationWarning` and returns the moved object;
        any other name raises `AttributeError` as usual.
    """

    def __getattr__(name: str) -> object:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old}.{name} moved to {new}.{name}; import it from there "
            "(the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)

    return __getattr__
