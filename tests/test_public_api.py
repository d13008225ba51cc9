"""The public API: every __all__ is true, and `import jianmu` stays light."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import jianmu

HEAVY = ("docker", "mcp", "openai", "httpx", "ddgs")


def public_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(jianmu.__path__, "jianmu."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        names.append(info.name)
    return names


def test_every_name_in_all_exists() -> None:
    for name in jianmu.__all__:
        assert hasattr(jianmu, name), name


def test_every_public_module_declares_all() -> None:
    missing = []
    for name in public_modules():
        if name in ("jianmu.cli",) or name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        if not hasattr(module, "__all__"):
            missing.append(name)
            continue
        for attr in module.__all__:
            assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"
    assert not missing, f"modules without __all__: {missing}"


def test_import_jianmu_does_not_import_optional_extras() -> None:
    code = (
        "import sys, json, jianmu; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
