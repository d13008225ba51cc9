"""Toy plug-ins that live outside the `jianmu` package, as a user's would.

Tests import this module by name (``"toy_plugins:ToySandbox"``) with its folder on
``sys.path``, and through a ``jianmu.plugins`` entry point.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from jianmu.config import LLMConfig
from jianmu.execution import ExecResult
from jianmu.guard import BaseChecker, CheckerSetup, Decision, GuardContext
from jianmu.llm import BaseLLMProvider, ChatRequest, LLMResponse, Message


class ToySandbox:
    """A sandbox mode that runs nothing: it answers every command with the command's text."""

    isolation_rank = 30  # stricter than local (10) and docker (20): a skill may move here

    def __init__(self, workspace: str | os.PathLike[str], *, network: bool = False,
                 timeout: float = 60.0, **limits: Any) -> None:
        self.workspace = Path(workspace)
        self.network = network
        self.commands: list[str] = []

    async def start(self) -> None:
        """Nothing to prepare."""

    async def exec(self, command: Sequence[str] | str, **options: Any) -> ExecResult:
        """Record the command and echo it back (``stdin``, ``env``, ``cwd``, ``timeout`` are
        accepted and ignored)."""
        text = command if isinstance(command, str) else command[-1]
        self.commands.append(text)
        return ExecResult(exit_code=0, stdout=f"toy sandbox ran: {text}\n")

    async def close(self) -> None:
        """Nothing to release."""


class NoRemoveChecker(BaseChecker):
    """Denies any ``bash`` command that contains ``rm``."""

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Deny ``rm``; otherwise pass ``previous`` on."""
        command = str(context.call.arguments.get("command", ""))
        if context.call.name == "bash" and "rm" in command.split():
            return Decision.deny("the toy checker forbids rm", checker=self.name)
        return previous


class MaxTokensChecker(BaseChecker):
    """Reads the guard's settings at build time, as a checker with options would."""

    def __init__(self, budget: int | None) -> None:
        self.budget = budget

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """Take ``guard.budget.total_tokens``."""
        return cls(setup.guard.budget.total_tokens)

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Pass everything on."""
        return previous


class NotAChecker:
    """Has no ``check``: the registry refuses it."""

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> NotAChecker:
        return cls()


class BuildsNothing:
    """Looks like a checker class but builds something that is not one."""

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> object:
        return object()

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        return previous


class EchoLLM(BaseLLMProvider):
    """A provider plug-in: answers with the last user message."""

    def __init__(self, model: str) -> None:
        self.model = model

    @classmethod
    def from_llm_config(cls, llm: LLMConfig) -> Self:
        """Built from the ``llm:`` section."""
        return cls(llm.model or "echo")

    async def send(self, request: ChatRequest) -> LLMResponse:
        """Echo the last message."""
        return LLMResponse(message=Message.assistant(request.messages[-1].content or ""))
