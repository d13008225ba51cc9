"""What ``jianmu run`` runs: a Python script or a skill, built into a tree and its state.

A script exposes ``build_tree()`` or a module-level ``tree``, not both; optionally
``build_state()`` or ``STATE_SCHEMA`` (default: an `AgentState` state) and ``build_llm()``.
``build_tree``, ``build_state`` and ``build_llm`` may take the keyword arguments ``inputs``
(the ``--input`` values), ``config`` (the `AppConfig`) and, for ``build_tree``, ``llm``. Inputs
that ``build_state`` does not take become fields of the state.

A BT skill runs its tree directly, its inputs being the ``--input`` values. A prompt skill
runs in a `SkillNode` with the configured model; its first user message is the ``task`` (or
``message``) input, else every input as ``key: value`` lines, and every input is also a field
of the state.

How each run was started (its `Launch`) is kept beside its checkpoints so that ``jianmu resume``
can rebuild the same tree in another process: a table ``jianmu_cli_launches`` in the
checkpointer's SQLite file holds one JSON row per run: the target (script path or skill name),
the inputs, the config path, the folder the run was started in, and for BT skills the state
namespace the tree was built for. A fork (``jianmu runs fork``, the studio's Fork) has none of
its own: it runs what its origin ran.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import re
import shlex
import sqlite3
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from py_trees.behaviour import Behaviour
from pydantic import BaseModel

from jianmu._cli.common import CLIError
from jianmu.config import AppConfig
from jianmu.constraints import Constraints
from jianmu.errors import (
    CheckpointError,
    JianmuError,
    SkillLoadError,
    SkillNotFoundError,
    SkillRunError,
    failure_text,
)
from jianmu.runtime.points import forked_from
from jianmu.state import StateManager

__all__ = ("Launch", "LaunchStore", "Target", "is_script", "load_target", "skill_catalog")

_BUILD_KWARGS = ("inputs", "config", "llm")


@dataclass(kw_only=True, eq=False)
class Target:
    """A tree ready for a runner, with its state and how it was asked for."""

    tree: Behaviour
    """The root."""
    state: StateManager
    """The run's state."""
    launch: Launch
    """How it was started (saved for ``resume``)."""
    constraints: Constraints | None = None
    """The target's layer of constraints (a skill's SKILL.md)."""
    bt: Any = None
    """For BT skills: the `BTSkillContext` (its ``run`` is set by `attach`)."""
    llm: Any = None
    """A model provider to close after the run, if one was made."""

    def attach(self, runner: Any) -> None:
        """Tell the target which runner runs it."""
        if self.bt is not None:
            self.bt.run = runner.ctx

    def result(self) -> Any:
        """The run's result: a BT skill's validated ``skill_result``, else ``final_answer``.

        Raises:
            SkillRunError: a BT skill's result does not fit its ``outputs``.
        """
        if self.bt is not None:
            return self.bt.result()
        return self.state.get("final_answer")

    async def close(self) -> None:
        """Release the model provider."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result


def is_script(spec: str) -> bool:
    """Whether ``spec`` names a script rather than a skill."""
    return spec.endswith(".py") or "/" in spec or "\\" in spec or Path(spec).is_file()


def skill_catalog(config: AppConfig, skills_dirs: list[str] | None = None) -> Any:
    """The catalog: ``--skills-dir`` folders if given, else ``skills/`` and ``skills.paths``."""
    from jianmu.skills import SkillCatalog

    check_skills_dirs(skills_dirs)
    return SkillCatalog(skills_dirs or None, config=config)


def check_skills_dirs(skills_dirs: list[str] | None) -> None:
    """Refuse a ``--skills-dir`` that is not a folder: named on the command line, it is a typo,
    not a folder of ``skills.paths`` that a project may not have made yet."""
    for folder in skills_dirs or ():
        path = Path(folder).expanduser()
        if not path.exists():
            raise CLIError(f"--skills-dir {folder!r}: no such folder")
        if not path.is_dir():
            raise CLIError(f"--skills-dir {folder!r} is not a folder; give the folder that "
                           "holds the skills")


def load_target(
    spec: str,
    *,
    inputs: dict[str, Any],
    config: AppConfig,
    skills_dirs: list[str] | None = None,
    launch: Launch | None = None,
) -> Target:
    """Build the tree for a script path or a skill name (``launch``: rebuild a saved run).

    Raises:
        CLIError: the script or skill cannot be found, loaded or built.
    """
    if launch is None and Path(spec).is_dir():
        raise CLIError(_folder_given(Path(spec)))
    script = launch.kind == "script" if launch is not None else is_script(spec)
    try:
        if script:
            return _script_target(Path(spec), inputs, config)
        return _skill_target(spec, inputs, config, skills_dirs, launch)
    except SkillNotFoundError as exc:
        raise CLIError(str(exc) + _question_hint(spec)) from exc
    except (SkillLoadError, SkillRunError) as exc:
        raise CLIError(str(exc)) from exc


def _question_hint(spec: str) -> str:
    """What to say when TARGET reads as a question, not a skill's name: how to ask one."""
    if not any(c.isspace() for c in spec):
        return ""
    return ("; TARGET is a script (a .py file) or a skill's name, not a question: give the "
            f"question to a prompt skill as its task, jianmu run SKILL --input "
            f"task={shlex.quote(spec)}")


def _folder_given(folder: Path) -> str:
    """What to say when TARGET is a folder: how to run the skill in it, if it holds one."""
    if (folder / "SKILL.md").is_file():
        from jianmu.skills import SkillCatalog

        catalog = SkillCatalog([folder.parent])
        names = [s.name for s in catalog.skills() if s.folder.resolve() == folder.resolve()]
        name = names[0] if names else folder.name
        return (f"{str(folder)!r} is a skill's folder: name the skill, with its folder's parent "
                f"as --skills-dir: {name} --skills-dir {shlex.quote(str(folder.parent))}")
    return f"{str(folder)!r} is a folder; give a script (a .py file) or a skill's name"


# -- scripts ---------------------------------------------------------------------------------


def _script_line(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    line = frames[-1].lineno if frames else getattr(exc, "lineno", None)
    return f"{path}:{line}" if line else str(path)


def _import_script(path: Path) -> types.ModuleType:
    if not path.is_file():
        raise CLIError(f"script {str(path)!r} not found; give the path of a .py file")
    path = path.resolve()
    name = "jianmu_cli_script_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"{path}: cannot be imported as a Python module; name it *.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    sys.path.insert(0, str(path.parent))  # let the script import its neighbours
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a sys.exit() at the top ended jianmu silently
        sys.modules.pop(name, None)
        raise CLIError(
            f"{_script_line(exc, path)}: importing the script {failure_text(exc)}"
        ) from exc
    return module


def _call_hook(fn: Callable[..., Any], where: str, available: dict[str, Any]) -> Any:
    """Call ``fn`` with the keyword arguments it accepts among ``available``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn()
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {}
    for name, param in params.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in available:
            kwargs[name] = available[name]
        elif param.default is param.empty:
            raise CLIError(
                f"{where} has a required parameter {name!r} that jianmu run cannot fill; "
                f"accept only keyword arguments among: {', '.join(_BUILD_KWARGS)}"
            )
    if takes_all:
        kwargs = dict(available)
    return fn(**kwargs)


def _run_hook(fn: Callable[..., Any], path: Path, label: str, available: dict[str, Any]) -> Any:
    try:
        return _call_hook(fn, f"{path.name}: {label}()", available)
    except CLIError:
        raise
    except SystemExit as exc:
        raise CLIError(
            f"{_script_line(exc, path.resolve())}: {label}() {failure_text(exc)}"
        ) from exc
    except Exception as exc:
        raise CLIError(
            f"{_script_line(exc, path.resolve())}: {label}() raised {type(exc).__name__}: {exc}"
        ) from exc


def _script_state(module: types.ModuleType, path: Path, inputs: dict[str, Any],
                  config: AppConfig) -> StateManager:
    from jianmu.nodes.state import AgentState

    build_state = getattr(module, "build_state", None)
    if callable(build_state):
        state = _run_hook(build_state, path, "build_state", {"inputs": inputs, "config": config})
        if not isinstance(state, StateManager):
            raise CLIError(
                f"{path.name}: build_state() must return a jianmu StateManager, "
                f"got {type(state).__name__}"
            )
        if "inputs" not in inspect.signature(build_state).parameters and inputs:
            state.update(inputs)
        return state
    schema = getattr(module, "STATE_SCHEMA", None) or AgentState
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise CLIError(f"{path.name}: STATE_SCHEMA must be a pydantic model class, got {schema!r}")
    return StateManager(schema, inputs)


def _script_target(path: Path, inputs: dict[str, Any], config: AppConfig) -> Target:
    module = _import_script(path)
    try:
        state = _script_state(module, path, inputs, config)
    except CLIError:  # the script's own fault (build_state raised...), not the inputs'
        raise
    except JianmuError as exc:  # e.g. inputs that the state schema refuses
        raise CLIError(f"{path.name}: the state does not accept the inputs: {exc}") from exc
    llm = None
    build_llm = getattr(module, "build_llm", None)
    build_tree = getattr(module, "build_tree", None)
    if build_tree is not None and hasattr(module, "tree"):
        # running one and not the other would run a tree the author may not have meant
        raise CLIError(
            f"{path.name}: defines both build_tree() and a module-level 'tree'; keep one "
            "(rename the other), so that it is clear which tree runs"
        )
    if callable(build_llm):
        llm = _run_hook(build_llm, path, "build_llm", {"config": config, "inputs": inputs})
    elif callable(build_tree) and "llm" in inspect.signature(build_tree).parameters:
        llm = configured_llm(config, f"{path.name}: build_tree(llm)")
    if callable(build_tree):
        tree = _run_hook(build_tree, path, "build_tree",
                         {"inputs": inputs, "config": config, "llm": llm})
    elif hasattr(module, "tree"):
        tree = module.tree
    elif build_tree is not None:
        raise CLIError(f"{path.name}: build_tree must be a function that returns the tree, "
                       f"got {type(build_tree).__name__}")
    else:
        raise CLIError(
            f"{path}: defines neither build_tree() nor a module-level 'tree'; add "
            "def build_tree() -> py_trees.behaviour.Behaviour" + _agent_hint(module)
            + _main_hint(path)
        )
    if not isinstance(tree, Behaviour):
        raise CLIError(
            f"{path.name}: build_tree()/tree must be a py_trees behaviour, "
            f"got {type(tree).__name__}" + _agent_hint(module, tree)
        )
    launch = Launch(kind="script", target=str(path.resolve()), inputs=inputs,
                    config=_config_path(config), cwd=str(Path.cwd()))
    return Target(tree=tree, state=state, launch=launch, llm=llm)


def _main_hint(path: Path) -> str:
    """How to run a script that runs itself (``if __name__ == "__main__":``), as it is."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    if not re.search(r"""__name__\s*==\s*["']__main__["']""", source):
        return ""
    return f"; or run it as it runs itself: python {shlex.quote(str(path))}"


def _agent_hint(module: types.ModuleType, given: Any = None) -> str:
    """How to run the `Agent` a script made (or gave as its tree): its tree, and its question."""
    from jianmu.nodes.agent import Agent

    name = next((key for key, value in vars(module).items()
                 if isinstance(value, Agent) and (given is None or value is given)), None)
    if name is None:
        return ""
    return (f"; for the Agent {name!r}: tree = {name}.as_node(), and its question as "
            "--input 'messages:=[{\"role\": \"user\", \"content\": \"...\"}]'")


def configured_llm(config: AppConfig, who: str) -> Any:
    """The model of the ``llm:`` section.

    Raises:
        CLIError: no model server is configured (and no scripted stand-in asked for).
    """
    from jianmu.llm import from_config

    llm = config.llm
    if not (llm.endpoint_configured or llm.provider == "scripted"):
        if llm.model and llm.provider not in (None, "openai"):
            # a model and a provider named: only the key (or a server's URL) is missing
            variable = {"anthropic": "$ANTHROPIC_API_KEY"}.get(str(llm.provider), "llm.api_key")
            raise CLIError(
                f"{who} needs a model: llm names {llm.model!r} of provider {llm.provider!r}, "
                f"with no API key: set {variable} (or llm.api_key), or llm.base_url for a "
                "server that needs none"
            )
        named, fix = ((f"llm names {llm.model!r} with no server and no API key", "set")
                      if llm.model else ("none is configured", "set llm.model in the config, with"))
        raise CLIError(
            f"{who} needs a model, and {named}: {fix} "
            "llm.base_url (any OpenAI-compatible server) or an API key (llm.api_key, else "
            "$OPENAI_API_KEY, or $ANTHROPIC_API_KEY with llm.provider: anthropic); the "
            "shipped configs/jianmu.yaml reads JIANMU_LLM_BASE_URL and JIANMU_LLM_MODEL"
        )
    try:
        return from_config(config)
    except JianmuError as exc:
        raise CLIError(str(exc)) from exc


def _config_path(config: AppConfig) -> str | None:
    return str(Path(config.source).resolve()) if config.source else None


# -- skills ----------------------------------------------------------------------------------


def _skill_target(name: str, inputs: dict[str, Any], config: AppConfig,
                  skills_dirs: list[str] | None, launch: Launch | None) -> Target:
    from jianmu.skills import SkillCatalog

    if launch is not None and launch.skill_folder and Path(launch.skill_folder).is_dir():
        skill = SkillCatalog([launch.skill_folder], config=config).get(launch.target)
    else:
        skill = skill_catalog(config, skills_dirs).get(name)
    saved = Launch(kind="bt_skill" if skill.is_bt else "prompt_skill", target=skill.name,
                   inputs=inputs, config=_config_path(config), cwd=str(Path.cwd()),
                   skill_folder=str(skill.folder.resolve()))
    if skill.is_bt:
        return _bt_target(skill, inputs, saved, launch.namespace if launch else None)
    return _prompt_target(skill, inputs, config, saved)


def _bt_target(skill: Any, inputs: dict[str, Any], launch: Launch,
               namespace: str | None) -> Target:
    from jianmu.nodes.state import AgentState
    from jianmu.skills import BTSkillContext, SkillTreeLoader

    state = StateManager(AgentState)
    bt = BTSkillContext.create(skill, state_manager=state, inputs=inputs, namespace=namespace)
    tree = SkillTreeLoader().build(skill, bt)
    launch.namespace = bt.namespace  # resume must build the tree for the same namespace
    return Target(tree=tree, state=state, launch=launch, constraints=skill.constraints, bt=bt)


def _prompt_target(skill: Any, inputs: dict[str, Any], config: AppConfig,
                   launch: Launch) -> Target:
    from jianmu.nodes import AgentState
    from jianmu.nodes.state import inputs_message
    from jianmu.skills import SkillNode

    if not inputs:
        raise CLIError(
            f"skill {skill.name!r} is a prompt skill: give it a task, e.g. "
            f"jianmu run {skill.name} --input task='...'"
        )
    llm = configured_llm(config, f"prompt skill {skill.name!r}")
    try:
        first = {"role": "user", "content": inputs_message(inputs)}
        state = StateManager(AgentState, {**inputs, "messages": [first]})
    except JianmuError as exc:
        raise CLIError(f"skill {skill.name!r}: the inputs do not fit the state: {exc}") from exc
    tree = SkillNode(skill.name, [skill], llm)
    return Target(tree=tree, state=state, launch=launch, llm=llm)


# -- how a run was launched --------------------------------------------------------------------


@dataclass(kw_only=True)
class Launch:
    """What ``jianmu run`` was asked to run."""

    kind: Literal["script", "bt_skill", "prompt_skill"]
    """What the target is."""
    target: str
    """The script's absolute path, or the skill's name."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The ``--input`` values."""
    config: str | None = None
    """The config file's absolute path, if one was loaded."""
    cwd: str = "."
    """The folder the run was started in (relative paths in the config resolve against it)."""
    skill_folder: str | None = None
    """For skills: the folder it was loaded from (found again even if the catalog changed)."""
    namespace: str | None = None
    """For BT skills: the state namespace the tree reads and writes."""


class LaunchStore:
    """Saves and loads `Launch` records in a SQLite file (the checkpoint file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path)
            with self._db:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_cli_launches "
                    "(run_id TEXT PRIMARY KEY, data TEXT NOT NULL)"
                )
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the run store {self.path!r}: {exc}") from exc

    def save(self, run_id: str, launch: Launch) -> None:
        """Record how ``run_id`` was started."""
        try:
            with self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO jianmu_cli_launches VALUES (?, ?)",
                    (run_id, json.dumps(asdict(launch))),
                )
        except sqlite3.Error as exc:  # a busy or damaged file: said naming it, not bare
            raise CheckpointError(f"cannot save how run {run_id!r} was started in "
                                  f"{self.path!r}: {exc}") from exc

    def load(self, run_id: str) -> Launch | None:
        """How ``run_id`` was started (for a fork, its origin), or None if the CLI did not."""
        try:
            return self._load(run_id)
        except sqlite3.Error as exc:  # a busy or damaged file: said naming it, not bare
            raise CheckpointError(f"cannot read how run {run_id!r} was started in "
                                  f"{self.path!r}: {exc}") from exc

    def _load(self, run_id: str) -> Launch | None:
        seen: set[str] = set()
        while run_id not in seen:
            seen.add(run_id)
            row = self._db.execute(
                "SELECT data FROM jianmu_cli_launches WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row:
                return Launch(**json.loads(row[0]))
            origin = forked_from(self._db, run_id)
            if origin is None:
                return None
            run_id = origin[0]
        return None

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def launch_config(launch: Launch, run_id: str) -> AppConfig:
    """The configuration ``run_id`` was launched under, read again from its file (the defaults
    when it had none), with its workspace pinned to the folder it was launched in: a run is
    resumed, decided and forked there, whichever folder or config the command came from.

    Raises:
        CLIError: that folder, that config file or the run's script is gone.
    """
    from jianmu._cli.common import load_cli_config

    where = Path(launch.cwd)
    if not where.is_absolute() or not where.is_dir():
        raise CLIError(
            f"run {run_id!r} was started in the folder {launch.cwd!r}, which is gone; a run "
            "is resumed, decided and forked only in its own folder, under its own config"
        )
    if launch.config and not Path(launch.config).is_file():
        raise CLIError(
            f"run {run_id!r} was started under the config {launch.config!r}, which is gone; "
            "a run is resumed, decided and forked only under its own config"
        )
    if launch.kind == "script" and not Path(launch.target).is_file():
        # not 'give the path of a .py file': this command was given a run id, no path
        raise CLIError(
            f"run {run_id!r} runs the script {launch.target!r}, which is gone; put it back "
            "there to resume, decide or fork the run"
        )
    config = load_cli_config(launch.config) if launch.config else AppConfig()
    workdir = config.execution.workdir
    # relative to the run's folder, not to the folder this command runs in
    pinned = where / Path(workdir).expanduser() if workdir else where
    config.execution = config.execution.model_copy(update={"workdir": str(pinned)})
    return config
