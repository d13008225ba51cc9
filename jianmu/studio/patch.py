"""What changed between two views of a run, as a small JSON patch: a live page is sent each
change, not the whole run again (a run of many turns sent whole on every update costs the
square of its length in bytes). `static/patch.js` applies it in the page.

A patch is one of:

- ``{"=": value}``: the value replaced;
- ``{"o": {key: patch, ...}, "d": [key, ...]}``: an object with those keys changed (or new)
  and those deleted;
- ``{"n": length, "a": {"index": patch, ...}}``: a list cut or grown to ``length``, with the
  items at those indexes changed (or new).
"""

from __future__ import annotations

from typing import Any

__all__ = ("apply_patch", "diff")


def _same(old: Any, new: Any) -> bool:
    # 1 == 1.0 == True in Python, not in the page: a change of type is a change (and of
    # sign: 0.0 == -0.0, written apart)
    if isinstance(old, float) and isinstance(new, float):
        return repr(old) == repr(new)
    return type(old) is type(new) and old == new


def diff(old: Any, new: Any) -> dict[str, Any] | None:
    """The patch that turns ``old`` into ``new`` (JSON values); None when they are the same."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = {}
        for key, value in new.items():
            if key not in old:
                changed[key] = {"=": value}
            else:
                part = diff(old[key], value)
                if part is not None:
                    changed[key] = part
        deleted = [key for key in old if key not in new]
        if not changed and not deleted:
            return None
        out: dict[str, Any] = {"o": changed}
        if deleted:
            out["d"] = deleted
        return out
    if isinstance(old, list) and isinstance(new, list):
        items = {}
        for i, value in enumerate(new):
            if i >= len(old):
                items[str(i)] = {"=": value}
            else:
                part = diff(old[i], value)
                if part is not None:
                    items[str(i)] = part
        if not items and len(old) == len(new):
            return None
        return {"n": len(new), "a": items}
    return None if _same(old, new) else {"=": new}


def apply_patch(old: Any, patch: dict[str, Any]) -> Any:
    """``old`` with ``patch`` applied (a new value; ``old`` is left as it was)."""
    if "=" in patch:
        return patch["="]
    if "o" in patch:
        out = dict(old)
        for key in patch.get("d", []):
            out.pop(key, None)
        for key, part in patch["o"].items():
            out[key] = apply_patch(out.get(key), part)
        return out
    items = list(old[:patch["n"]])
    for index, part in sorted(patch["a"].items(), key=lambda pair: int(pair[0])):
        i = int(index)
        if i < len(items):
            items[i] = apply_patch(items[i], part)
        else:
            items.append(apply_patch(None, part))
    return items
