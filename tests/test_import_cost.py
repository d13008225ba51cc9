"""`import jianmu` stays light: no optional extra, no sub-package until a name is used."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import jianmu

EXTRAS = ("docker", "mcp", "openai", "httpx", "rich", "regex", "dbos")


def _modules_after(code: str) -> list[str]:
    """The names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_import_jianmu_pulls_in_no_optional_extra() -> None:
    loaded = _modules_after("import jianmu")
    assert [m for m in loaded if m.split(".")[0] in EXTRAS] == []


def test_every_public_name_pulls_in_no_optional_extra() -> None:
    loaded = _modules_after("import jianmu\nfor n in jianmu.__all__: getattr(jianmu, n)")
    assert [m for m in loaded if m.split(".")[0] in EXTRAS] == []


def test_import_jianmu_loads_no_sub_package_and_no_pydantic_model() -> None:
    loaded = _modules_after("import jianmu")
    assert [m for m in loaded if m.startswith("jianmu.")] == ["jianmu._lazy"]
    assert "pydantic.main" not in loaded


def test_each_public_name_is_the_object_of_its_sub_package() -> None:
    for module, names in jianmu._HOLDERS.items():
        for name in names:
            assert getattr(jianmu, name) is getattr(importlib.import_module(module), name), name
    assert sorted(n for names in jianmu._HOLDERS.values() for n in names) == sorted(jianmu.__all__)


def test_from_import_and_star_import_work_in_a_fresh_interpreter() -> None:
    loaded = _modules_after(
        "from jianmu import ReactiveRunner, tool\n"
        "from jianmu import *\n"
        "assert ReactiveRunner.__module__.startswith('jianmu.runtime')\n"
        "assert all(n in globals() for n in __import__('jianmu').__all__)"
    )
    assert "jianmu.runtime" in loaded


def test_sub_modules_resolve_as_attributes() -> None:
    assert jianmu.config is importlib.import_module("jianmu.config")
    assert set(jianmu.__all__) <= set(dir(jianmu))
