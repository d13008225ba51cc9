"""`SkillTreeLoader`: imports a bt skill's ``tree.py`` and prepares the tree it builds.

A bt skill's ``tree.py`` defines ``build_tree(ctx: BTSkillContext) -> Behaviour``. The loader
imports it under a private module name (one per file, replaced when the file changes), from
the folder pinned when the skill was loaded (its source is read there, never by path), then
prepares the tree: every runtime node gets the skill run's namespace, and every ``ToolNode``
gets the skill's name (for ``bt.skill.node.io`` events), the SKILL.md constraints as its layer,
the guard switched on and approval ids scoped to the skill run: a skill's tools never run past
its policies. A tool the skill does not declare in ``tools`` is a load error.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import traceback
import types
from pathlib import Path

from py_trees.behaviour import Behaviour

from jianmu.constraints import Constraints
from jianmu.errors import PathEscapeError, SkillLoadError
from jianmu.nodes.tool_node import ToolNode
from jianmu.runtime.async_node import RuntimeNode
from jianmu.skills.bt_context import BTSkillContext
from jianmu.skills.loader import read_tree_source
from jianmu.skills.skill import Skill

__all__ = ("TREE_MODULE_PREFIX", "SkillTreeLoader")

TREE_MODULE_PREFIX = "jianmu._skill_trees"
"""Tree modules are imported as ``jianmu._skill_trees.<skill>_<hash of the path>``."""


class _SourceLoader(importlib.abc.InspectLoader):
    """Executes source already read (from the pinned folder) as the module at ``path``."""

    def __init__(self, source: bytes, path: str) -> None:
        self.source, self.path = source, path

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source)

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(self.source, self.path, "exec", dont_inherit=True)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__file__ = self.path
        exec(self.get_code(module.__name__), module.__dict__)


class SkillTreeLoader:
    """Imports bt skills' tree modules under private names and builds prepared trees."""

    def __init__(self) -> None:
        self._modules: dict[Path, tuple[tuple[int, int, str], types.ModuleType]] = {}

    @staticmethod
    def module_name(skill: Skill) -> str:
        """The private module name of the skill's tree file."""
        assert skill.tree_path is not None
        where = os.path.join(skill.pinned.path, skill.tree_path.name)
        digest = hashlib.sha256(where.encode()).hexdigest()[:12]
        return f"{TREE_MODULE_PREFIX}.{skill.name.replace('-', '_')}_{digest}"

    def load_module(self, skill: Skill) -> types.ModuleType:
        """Import (or re-import, if the file changed) the skill's tree module.

        Raises:
            SkillLoadError: not a bt skill, the file is missing, importing it raised, or it has
                no callable ``build_tree``.
        """
        path = skill.tree_path
        if path is None:
            raise SkillLoadError(
                "a prompt skill has no tree; set 'execution: bt'", path=str(skill.file),
                field="execution",
            )
        try:
            # from the folder pinned when the skill was loaded, never by its path again
            status = skill.pinned.stat(path.name)
            source = read_tree_source(skill.pinned, path.name)
        except (OSError, PathEscapeError) as exc:
            missing = isinstance(exc, FileNotFoundError)
            raise SkillLoadError(
                f"the tree module {path.name!r} does not exist" if missing
                else f"the tree module {path.name!r} cannot be read: {exc}",
                path=str(skill.file), field="tree",
            ) from None
        stamp = (status.st_mtime_ns, status.st_size, hashlib.sha256(source).hexdigest())
        cached = self._modules.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        name = self.module_name(skill)
        spec = importlib.util.spec_from_loader(name, _SourceLoader(source, str(path)),
                                               origin=str(path))
        assert spec is not None and spec.loader is not None
        spec.has_location = True  # tracebacks and inspect name the file
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            # tracebacks name the file as it was imported; compare real paths
            real = os.path.realpath(path)
            frames = [
                f for f in traceback.extract_tb(exc.__traceback__)
                if os.path.realpath(f.filename) == real
            ]
            line = frames[-1].lineno if frames else getattr(exc, "lineno", None)
            raise SkillLoadError(
                f"importing the tree module failed: {type(exc).__name__}: {exc}",
                path=str(path), line=line, field="build_tree",
            ) from exc
        if not callable(getattr(module, "build_tree", None)):
            sys.modules.pop(name, None)
            raise SkillLoadError(
                f"{path.name} defines no callable build_tree(ctx)", path=str(path),
                field="build_tree",
            )
        self._modules[path] = (stamp, module)
        return module

    def build(self, skill: Skill, ctx: BTSkillContext) -> Behaviour:
        """Call ``build_tree(ctx)`` and prepare the tree for the skill's namespace and guard.

        Raises:
            SkillLoadError: the module cannot be loaded, ``build_tree`` raised or returned
                something other than a behaviour, or the tree uses an undeclared tool.
        """
        module = self.load_module(skill)
        path = str(skill.tree_path)
        try:
            tree = module.build_tree(ctx)
        except SkillLoadError:
            raise
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
            raise SkillLoadError(
                f"build_tree raised {type(exc).__name__}: {exc}", path=path,
                line=frames[-1].lineno if frames else None, field="build_tree",
            ) from exc
        if not isinstance(tree, Behaviour):
            raise SkillLoadError(
                f"build_tree must return a py_trees behaviour, got {type(tree).__name__}",
                path=path, field="build_tree",
            )
        self.prepare(tree, ctx)
        return tree

    @staticmethod
    def prepare(tree: Behaviour, ctx: BTSkillContext) -> None:
        """Give every node the namespace, and every tool node the skill's name, constraints,
        guard and approval scope.

        Raises:
            SkillLoadError: a tool node uses a tool the skill does not declare.
        """
        skill = ctx.skill

        def walk(node: Behaviour, position: str) -> None:
            if isinstance(node, RuntimeNode) and node.namespace is None:
                node.namespace = ctx.namespace
            if isinstance(node, ToolNode):
                if node.tool.name.lower() not in ctx.tools:
                    declared = ", ".join(ctx.tools.names()) or "none"
                    raise SkillLoadError(
                        f"node {node.name!r} uses tool {node.tool.name!r}, which the skill does "
                        f"not declare (declared: {declared}); add it to 'tools'",
                        path=str(skill.file), field="tools",
                    )
                # every tool node of a skill passes the guard, whatever its tree asked for
                node.guarded = True
                if not node.guarded:  # a subclass of the tree's own that keeps it off
                    raise SkillLoadError(
                        f"node {node.name!r} is a tool node whose guard cannot be turned "
                        "on; a skill's tool nodes always pass the guard",
                        path=str(skill.file), field="tree",
                    )
                node.bt_skill = skill.name
                node.constraints = Constraints.merge(skill.constraints, node.constraints)
                node.approval_scope = ctx.approval_scope
                node.tree_position = position
            for index, child in enumerate(node.children):
                walk(child, f"{position}/{index}")

        walk(tree, "0")
