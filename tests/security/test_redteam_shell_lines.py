"""Red team, the guard's reading of a shell command line: lines shaped to cost it.

- ``a && a && ... && rm -rf /``: the grammar nests one level per ``&&``, and the guard's walk
  of the tree recursed; a model's line of 1,000 of them (5 kB) ran out of Python's stack, and
  the RecursionError failed the whole run (``$($($(...)))`` too). A line nesting deeper than
  `MAX_NESTING` is now opaque, unread: refused where nobody can confirm it, the run goes on.
- ``true | true | ...``: each command of a pipeline asked for the pipeline's last named child
  through ``named_children``, which makes every child: n² nodes, a minute of the event loop
  (every timeout stopped) for an 80 kB line. The last child is now found once per pipeline.
- ``a1 | a2 | ...`` under an allow rule: the parts a rule must match were kept each once by
  a list's ``in``, n² comparisons (11 s for 20,000 commands). Now in a dict.
- ``cd <20 kB>; a x; a x; ...``: every relative word after a ``cd`` is matched in that folder
  too, and each command joined every change of folder again: 120 kB made 900 MB of words
  (``cd d1; cd d2; ...`` a folder as long as the line, for each command). Now the folder is
  followed to PATH_MAX and a line's words to a bound, past which a relative word is in a
  folder only the run knows (it may name anything: no grant, every restriction).
- A line longer than `MAX_LINE_BYTES`, which no program is given as one argument (``bash -c``
  fails with E2BIG), is opaque unread: reading 50 MB took the guard many minutes.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.guard import _shell
from jianmu.guard._rules import shell_parts
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools.base import Tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []
LINE_BYTES = getattr(_shell, "MAX_LINE_BYTES", 128 << 10)  # read on code without the bound
DENIED = Constraints.model_validate(
    {"guard": {"tool_policy": {"shell": "allow", "shell(rm*)": "deny"}}})


def _run(command: str) -> str:
    RAN.append(command)
    return "ran"


SHELL = Tool.from_schema(
    _run, name="shell", description="Run a command line.", category="execute",
    input_schema={"type": "object", "properties": {"command": {"type": "string"}},
                  "required": ["command"]},
)


async def observed(command: str) -> str:
    """What the model reads after asking ``shell`` to run ``command`` (nobody to confirm)."""
    RAN.clear()
    llm = ScriptedLLM([[{"name": "shell", "arguments": {"command": command}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    result = await ReactiveRunner(create_react_node(llm, [SHELL], name="a"), state,
                                  constraints=DENIED, interactive=False).run(timeout=60)
    assert result.ok, result.error
    return str(next(m.content for m in state.get("messages") if m.role == "tool"))


@pytest.mark.parametrize("command", [
    "a" + " && a" * 1_000 + " && rm -rf /",
    "$(" * 1_000 + "rm -rf /" + ")" * 1_000,
    "echo " + "a " * (LINE_BYTES // 2) + "; rm -rf /",
])
async def test_a_line_too_deep_or_long_to_read_is_refused_and_the_run_goes_on(
    command: str,
) -> None:
    seen = await observed(command)
    assert RAN == [] and "cannot see through this command" in seen, seen


async def test_a_line_as_deep_as_real_ones_is_still_read() -> None:
    seen = await observed("a" + " && a" * 100 + " && rm -rf /")
    assert RAN == [] and "rule 'shell(rm*)' denies this call" in seen, seen
    assert await observed("a" + " && a" * 100) == "ran" and len(RAN) == 1


class _Counted:
    """A tree-sitter node that counts every node the walk is handed (made in Python)."""

    def __init__(self, node: Any, made: list[int]) -> None:
        self._node, self._made = node, made
        made[0] += 1

    def _wrapped(self, value: Any) -> Any:
        if type(value).__name__ == "Node":
            return _Counted(value, self._made)
        if isinstance(value, list):
            return [self._wrapped(v) for v in value]
        return value

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._node, name)
        if callable(value) and name != "walk":
            return lambda *args: self._wrapped(value(*args))
        return self._wrapped(value)


class _CountingParser:
    def __init__(self, made: list[int]) -> None:
        self.made = made

    def parse(self, source: bytes) -> Any:
        tree = _shell._PARSER_FOR_TESTS.parse(source)  # type: ignore[attr-defined]
        return type("Tree", (), {"root_node": _Counted(tree.root_node, self.made)})()


def test_a_long_pipeline_is_read_in_work_linear_in_its_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = [0]
    monkeypatch.setattr(_shell, "_PARSER_FOR_TESTS", _shell._PARSER, raising=False)
    monkeypatch.setattr(_shell, "_PARSER", _CountingParser(made))
    commands = 600
    line = "true" + " | true" * (commands - 1) + " | rm -rf x"
    found = _shell.scan(line)
    assert len(found.commands) == commands + 1 and not found.opaque
    # a few dozen nodes per command; each asking for the whole pipeline made 360,000
    assert made[0] < 100 * commands, made[0]


class _Compared(str):
    """A command's text that counts how often it is compared for equality."""

    compared = [0]
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        self.compared[0] += 1
        return str.__eq__(self, other)


def test_the_parts_of_a_long_line_are_kept_each_once_in_work_linear_in_them() -> None:
    _Compared.compared[0] = 0
    commands = 2_000
    found = _shell.ShellScan(tuple(
        _shell.ShellCommand(raw=_Compared(f"a{i}"), forms=((f"a{i}",),),
                            dynamic=(frozenset(),))
        for i in range(commands)
    ), ())
    assert shell_parts(found) == [f"a{i}" for i in range(commands)]
    # each a list's `in` compared with every part before it: 2,000,000
    assert _Compared.compared[0] < 10 * commands, _Compared.compared[0]


def test_words_moved_into_a_changed_folder_stay_bounded() -> None:
    found = _shell.scan("cd " + "d" * 20_000 + "; " + "a x;" * 5_000)
    assert len(found.commands) == 5_001
    chars = sum(len(w) for c in found.commands for form in c.forms for w in form)
    assert chars < 10_000_000, chars  # 100,000,000 before
    last = found.commands[-1]
    assert any(1 in late for late in last.dynamic)  # `x` there: only the run knows where


def test_a_change_of_folder_is_still_followed() -> None:
    last = _shell.scan("cd docs; cd secrets; cat key").commands[-1]
    assert ("cat", "docs/secrets/key") in last.forms, last.forms
