"""The `jianmu` command's implementation, one module per command group; `jianmu.cli` is the
entry point."""

from __future__ import annotations

__all__ = ()
