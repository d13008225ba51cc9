"""Every exception Jianmu raises, under one root.

```
JianmuError
├── ConfigError(ValueError)              bad configs/jianmu.yaml, file/line/key named
├── MissingExtraError(ImportError)       an optional extra is not installed
├── StateValidationError(ValueError)     a state update failed validation; nothing changed
├── InteractionError(LookupError)        an unknown or already decided approval request
│   └── ApprovalEditError(ValueError)    edited arguments that do not fit the tool's schema
├── CheckpointError(RuntimeError)        a run could not be checkpointed or restored
│   ├── RunClaimedError                  another owner holds the run's lease (named, until when)
│   └── TreeMismatchError                the tree is not the run's; nothing was changed
├── RunFailed(RuntimeError)              ``RunResult.raise_for_status()``: the run timed out,
│                                        was cancelled, or failed without an exception
├── OutputValidationError(ValueError)    the model's answer never fit the output type (paths,
│                                        last raw output kept)
├── HistoryProcessorError(RuntimeError)  a history processor failed; the message names it
├── HandoffError(LookupError)            a hand-off names an agent its team does not have
├── DurableError(RuntimeError)           a durable run could not be started, found or answered
│   ├── DurableDatabaseError(ConnectionError) the database cannot be reached (URL, no password)
│   ├── UnknownTreeError(KeyError)       no tree of that name is registered with the engine
│   ├── TreeInputError(ValueError)       a run's inputs do not fit the tree's input schema
│   ├── RunNotFoundError(KeyError)       no run with that id (or no such pending approval)
│   ├── WorkerIdTaken                    a live worker (if only paused) holds that executor id
│   └── AlreadyDecidedError(InteractionError) a request was decided before: the first stands
├── ToolError
│   ├── ToolValidationError(ValueError)  a tool definition is invalid at registration
│   │   └── ToolDefinitionError          a definition contradicts itself (an injected name
│   │                                    that is also a schema property, a bad JSON Schema)
│   ├── ToolInputError(ValueError)       the model's arguments do not fit the tool
│   │   ├── PathEscapeError              a path leads outside the workspace
│   │   └── MathExpressionError          a calculator expression is refused or too large
│   ├── ToolNotFoundError(KeyError)      no tool of that name
│   ├── ToolTimeoutError(TimeoutError)   the tool ran past its timeout
│   ├── ToolSuspended                    the call waits for a person (a sub-agent's approval)
│   └── ToolExecutionError(RuntimeError) the tool raised or its command failed
├── PatternTimeout(TimeoutError)         a search pattern ran past the search's deadline
│   └── SearchOutOfTime                  the deadline passed between two matches
├── GuardError(PermissionError)          the guard refused a call outside a node
│   └── TokenBudgetExhausted             the run's token budget was spent before a model call
├── GuardrailTripped(PermissionError)    an input or output guardrail tripped (named, why)
├── SandboxError(RuntimeError)           a sandbox could not start or answer
│   └── SandboxUnavailableError          the asked-for isolation is not available here
├── LLMError(RuntimeError)               the model provider failed
│   ├── LLMTransientError                a retryable provider failure (429, 5xx, reset)
│   │   └── FallbackFailedError          every model of a FallbackLLM failed so
│   ├── ContextTooLongError              the request was longer than the model's context
│   ├── OutputTruncatedError             the answer stayed cut off at the token limit (text kept)
│   └── ContentFilterError               a content filter stopped the answer before it said anything
├── SkillLoadError(ValueError)           a broken SKILL.md or tree.py, file/line/field named
├── SkillNotFoundError(KeyError)         no skill of that name in the catalog
├── SkillRunError(RuntimeError)          a BT skill run failed, waits for approval, or bad I/O
├── MCPError(RuntimeError)               an MCP server could not be reached or answered badly
│   └── MCPLineTooLongError(ConnectionError) a stdio server wrote a line past the bound
└── CLIError                             a ``jianmu`` command failed; one line and an `ExitCode`

JianmuWarning(UserWarning)
├── ToolDefinitionWarning                a tool definition works but is incomplete
└── ToolUnavailableWarning               a named tool could not be loaded and was skipped
```

API misuse (wrong arguments to a Jianmu function) raises these or the built-in exception
that fits; failures the model should see reach the agent loop as `ToolResult(ok=False)`.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = (
    "AlreadyDecidedError",
    "ApprovalEditError",
    "CLIError",
    "CheckpointError",
    "ConfigError",
    "ContentFilterError",
    "ContextTooLongError",
    "DamagedRowError",
    "DurableDatabaseError",
    "DurableError",
    "ExitCode",
    "FallbackFailedError",
    "GuardError",
    "GuardrailTripped",
    "HandoffError",
    "HistoryProcessorError",
    "InteractionError",
    "JianmuError",
    "JianmuWarning",
    "LLMError",
    "LLMTransientError",
    "MCPError",
    "MCPLineTooLongError",
    "MathExpressionError",
    "MissingExtraError",
    "OutputTruncatedError",
    "OutputValidationError",
    "PathEscapeError",
    "PatternTimeout",
    "RunClaimedError",
    "RunFailed",
    "RunNotFoundError",
    "SandboxError",
    "SandboxUnavailableError",
    "SchemaBudgetError",
    "SearchOutOfTime",
    "SkillLoadError",
    "SkillNotFoundError",
    "SkillRunError",
    "StateValidationError",
    "TokenBudgetExhausted",
    "ToolDefinitionError",
    "ToolDefinitionWarning",
    "ToolError",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolSuspended",
    "ToolTimeoutError",
    "ToolUnavailableWarning",
    "ToolValidationError",
    "TreeInputError",
    "TreeMismatchError",
    "UnknownTreeError",
    "WorkerIdTaken",
    "YAMLRefused",
    "exit_text",
    "failure_text",
)


class JianmuError(Exception):
    """The root of every Jianmu exception."""


class ConfigError(JianmuError, ValueError):
    """The configuration is invalid; the message names the file, line and key path."""


class YAMLRefused(JianmuError):
    """A YAML document uses a refused feature or size: an anchor, an alias, deep nesting, length.

    ``problem_mark`` (a yaml ``Mark``, or ``None``) says where; callers turn it into a
    `ConfigError` or `SkillLoadError` with the file and line.
    """

    def __init__(self, problem: str, *, problem_mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = problem_mark


class MissingExtraError(JianmuError, ImportError):
    """An optional dependency is missing; the message names the pip extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package!r} is not installed; install it with: pip install 'jianmu[{extra}]'"
        )
        self.package = package
        self.extra = extra


class StateValidationError(JianmuError, ValueError):
    """A state update failed validation; the state was left unchanged."""


class InteractionError(JianmuError, LookupError):
    """An approval names a request that is unknown or already decided."""


class ApprovalEditError(InteractionError, ValueError):
    """Arguments a person edited at approval do not fit the call; nothing was recorded."""

    def __init__(self, request_id: str, problems: list[str], *, tool: str | None = None) -> None:
        what = f"tool {tool!r}" if tool else "the call"
        super().__init__(
            f"the edited arguments of request {request_id!r} do not fit {what}: "
            + "; ".join(problems) + "; the request is still pending"
        )
        self.request_id = request_id
        self.problems = list(problems)
        self.tool = tool


class CheckpointError(JianmuError, RuntimeError):
    """A run could not be saved to or restored from a checkpointer."""


class DamagedRowError(CheckpointError):
    """A stored checkpoint, point or event that is not the JSON it was written as (a damaged
    file, a hand edit): said as such, where a missing point is not found."""


class TreeMismatchError(CheckpointError):
    """The tree given is not the run's: a node of its checkpoint is named otherwise, or missing
    (a script or skill edited since). The run's checkpoint is left as it was."""


class RunClaimedError(CheckpointError):
    """Another owner holds the run: it decides or continues it now; the message names the
    holder and when its lease ends (a crashed owner's lease expires then).

    Also raised when the run went on elsewhere after this runner read it: restore it again.
    """

    def __init__(self, message: str, *, run_id: str, owner: str | None = None,
                 expires: float | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run asked for."""
        self.owner = owner
        """Who holds it (``host:pid:purpose:token``), when another owner holds it."""
        self.expires = expires
        """When the holder's lease ends unless renewed (seconds since the epoch)."""


class OutputValidationError(JianmuError, ValueError):
    """The model's answer did not fit the agent's output type after every retry.

    ``problems`` lists each problem as ``(JSON path, message)``; ``raw`` is the last output the
    model gave (the tool call's arguments as JSON, or the text).
    """

    def __init__(
        self, message: str, *, problems: list[tuple[str, str]] | None = None, raw: str = ""
    ) -> None:
        super().__init__(message)
        self.problems = list(problems or [])
        self.raw = raw


class RunFailed(JianmuError, RuntimeError):
    """A run did not succeed and no other exception says why: it timed out, was cancelled, or
    its tree failed without one (`RunResult.raise_for_status`).

    ``status`` is the run's status value (``timeout``, ``cancelled``, ``failure``); ``result``
    the `RunResult`, when raised from one.
    """

    def __init__(self, message: str, *, status: str = "failure", result: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.result = result


class HistoryProcessorError(JianmuError, RuntimeError):
    """A history processor raised, or returned something that is not a list of messages."""

    def __init__(self, message: str, *, processor: str = "") -> None:
        super().__init__(message)
        self.processor = processor


class HandoffError(JianmuError, LookupError):
    """A hand-off names an agent that its team does not have; the message lists the team."""

    def __str__(self) -> str:  # LookupError would not quote, but keep it plain like the rest
        return str(self.args[0]) if self.args else ""


class DurableError(JianmuError, RuntimeError):
    """A durable run could not be started, found or answered."""


class DurableDatabaseError(DurableError, ConnectionError):
    """The durable engine's database cannot be reached; the message names it without a password."""


class UnknownTreeError(DurableError, KeyError):
    """No tree of that name is registered with the durable engine."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TreeInputError(DurableError, ValueError):
    """A run's inputs do not fit the tree's input schema."""


class RunNotFoundError(DurableError, KeyError):
    """No durable run with that id, or no pending approval of that id in the run."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class WorkerIdTaken(DurableError):
    """A live worker (if only paused) holds that executor id: a second is refused, and so is a
    recovery of its runs."""


class AlreadyDecidedError(DurableError, InteractionError):
    """A decision on an approval request that was already decided: refused, the first stands.

    The message names the first decision; `approved`, `first_message` and `decided_at` hold it.
    """

    def __init__(self, message: str, *, run_id: str, call_id: str, approved: bool,
                 first_message: str | None = None, decided_at: float | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.call_id = call_id
        self.approved = approved
        self.first_message = first_message
        self.decided_at = decided_at


class ToolError(JianmuError):
    """The root of tool errors."""


class ToolValidationError(ToolError, ValueError):
    """A tool definition is invalid; every problem is listed in the message."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        # a definition from outside may name its tool with a megabyte
        shown = tool if not isinstance(tool, str) or len(tool) <= 100 else tool[:100] + "…"
        super().__init__(f"tool {shown!r} is invalid:\n{lines}")


class SchemaBudgetError(JianmuError):
    """A JSON Schema check spent its budget of steps: the schema's branches multiply its work
    (`jianmu._schema_rules.within_budget`); the value is refused."""


class ToolDefinitionError(ToolValidationError):
    """A tool's declaration contradicts itself or its schema is not valid JSON Schema."""


class ToolInputError(ToolError, ValueError):
    """The arguments for a tool call do not fit its schema; the message lists every problem."""

    def __init__(
        self, message: str, *, tool: str | None = None, problems: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.problems = list(problems) if problems is not None else [message]


class PathEscapeError(ToolInputError):
    """A tool's path argument leads outside the workspace root."""


class MathExpressionError(ToolInputError):
    """The expression is not allowed, not valid, or too large to compute."""


class ToolNotFoundError(ToolError, KeyError):
    """No tool of that name is registered."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class ToolTimeoutError(ToolError, TimeoutError):
    """A tool ran past its timeout and was cancelled."""

    started: bool = True
    """Whether the call had started; False for one that waited for a worker thread all along
    (it never ran, and is not counted as an executed call)."""


class ToolSuspended(ToolError):
    """A tool call waits for a person: a sub-agent it runs asked for an approval.

    Raised by the tool to its executor, which keeps the call pending (the run suspends) and
    calls the tool again once the request is decided; never an observation.
    """


class ToolExecutionError(ToolError, RuntimeError):
    """A tool raised, or the command it ran failed."""


class PatternTimeout(JianmuError, TimeoutError):
    """A match ran past the search's deadline."""


class SearchOutOfTime(PatternTimeout):
    """The deadline had passed before the next match began (no single match was slow)."""


class GuardError(JianmuError, PermissionError):
    """The guard refused a call."""


class TokenBudgetExhausted(GuardError):
    """The run's token budget (``guard.budget.total_tokens``) was spent before a model call:
    the call is not made."""


class GuardrailTripped(JianmuError, PermissionError):
    """A content guardrail tripped (`jianmu.Tripwire`): the run fails with it.

    Args:
        guardrail: the guardrail's name.
        reason: the tripwire's reason.
        kind: ``"input"``, ``"output"`` or ``"tool_output"``.
        info: the tripwire's ``info`` (`jianmu.Tripwire.info`): what the guardrail found,
            for the caller; not pickled with the error (a durable run's failure), as it may
            be anything.
    """

    def __init__(self, guardrail: str, reason: str, kind: str = "input", *,
                 info: Any = None) -> None:
        super().__init__(f"{kind} guardrail {guardrail!r} tripped: {reason}")
        self.guardrail = guardrail
        self.reason = reason
        self.kind = kind
        self.info = info

    def __reduce__(self) -> Any:  # pickles (a durable run's failure) with its fields
        return (type(self), (self.guardrail, self.reason, self.kind))


class SandboxError(JianmuError, RuntimeError):
    """A sandbox could not be started or did not answer."""


class SandboxUnavailableError(SandboxError):
    """The isolation that the constraints ask for is not available on this machine."""


class LLMError(JianmuError, RuntimeError):
    """The model provider failed."""

    status_code: int | None = None
    """The HTTP status the model's server answered with (401, 429, 503), when the failure is
    an error status; ``None`` when no status came (a connection that failed, a stream that
    broke off, an answer that could not be read)."""

    def __init__(self, *args: object, status_code: int | None = None) -> None:
        # a provider of one's own says its status as it raises: LLMError("...", status_code=429)
        super().__init__(*args)
        if status_code is not None:
            self.status_code = status_code


class LLMTransientError(LLMError):
    """A provider failure worth retrying: rate limit, server error, connection reset."""


class ContextTooLongError(LLMError):
    """The server refused the request as longer than the model's context window (HTTP 400
    "maximum context length", "prompt is too long"; 413): nothing was answered, and asking
    again would be refused again. Shorten what is sent (``history=[trim_history(...)]``, or
    the conversation itself) and run again: the run's messages are all kept."""


class OutputTruncatedError(LLMError):
    """The model's answer was cut off at its token limit and stayed so: at once with
    ``on_cut_off="fail"``, or after ``max_continuations`` continuations with ``"continue"``.

    ``text`` is the answer written so far (every part joined), ``finish_reason`` the
    provider's (``length``, ``max_tokens``), ``continuations`` how often the model was asked
    to go on.
    """

    def __init__(self, message: str, *, text: str = "", finish_reason: str = "length",
                 continuations: int = 0) -> None:
        super().__init__(message)
        self.text = text
        self.finish_reason = finish_reason
        self.continuations = continuations


class ContentFilterError(LLMError):
    """The provider's content filter stopped the model's reply before it said anything: no
    text, no tool call (finish reason ``content_filter``; Anthropic's ``refusal``). Asking the
    same again would be filtered again, so the run fails with it instead of ending in an
    empty answer. A filtered reply that still holds text is the answer.

    ``finish_reason`` is the provider's, ``model`` the model that answered.
    """

    def __init__(self, message: str, finish_reason: str = "content_filter",
                 model: str = "") -> None:
        super().__init__(message)
        self.finish_reason = finish_reason
        self.model = model

    def __reduce__(self) -> Any:  # pickles (a durable run's failure) with its fields
        return (type(self), (str(self), self.finish_reason, self.model))


class FallbackFailedError(LLMTransientError):
    """Every model of a `FallbackLLM` failed transiently; the message names each failure."""

    def __init__(self, failures: tuple[tuple[str, LLMTransientError], ...]) -> None:
        self._named = failures
        self.failures: tuple[LLMTransientError, ...] = tuple(e for _, e in failures)
        """Each model's failure, in the order they were asked."""
        said = "; ".join(f"{model}: {error}" for model, error in failures)
        super().__init__(f"every model failed ({len(failures)}): {said}")

    def __reduce__(self) -> Any:  # pickles (a durable run's failure) with its failures
        return (type(self), (self._named,))


class SkillLoadError(JianmuError, ValueError):
    """A skill could not be loaded; the message names the file, line and field."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = path or "<skill>"
        if line is not None:
            where += f":{line}"
        if field:
            where += f" [{field}]"
        super().__init__(f"{where}: {message}")


class SkillNotFoundError(JianmuError, KeyError):
    """No skill of that name is in the catalog; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class SkillRunError(JianmuError, RuntimeError):
    """A BT skill could not run: missing inputs, a failed tree, a pending approval, or a
    ``skill_result`` that does not fit the skill's ``outputs``."""


class MCPError(JianmuError, RuntimeError):
    """An MCP server could not be reached, or answered outside the protocol."""


class MCPLineTooLongError(MCPError, ConnectionError):
    """A stdio server wrote a line past `jianmu.mcp._transport.WholeLines`' bound: its
    session ends (the SDK's reader ends a session on a ``ConnectionError``) rather than the
    memory; the next call starts the server again."""


class ExitCode(enum.IntEnum):
    """The `jianmu` command's exit codes."""

    OK = 0
    """The command succeeded (for ``run``/``resume``: the tree succeeded)."""
    FAILURE = 1
    """The run failed, a skill did not validate, or an operation (image build) failed."""
    USAGE = 2
    """Bad arguments, a bad config, a script or skill that cannot be loaded."""
    SUSPENDED = 3
    """The run waits for approval; it is checkpointed and ``jianmu resume`` continues it."""
    STOPPED = 4
    """The run timed out or was cancelled (Ctrl-C)."""


class CLIError(JianmuError):
    """A problem to print as one line, without a traceback, and the exit code to use."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


class JianmuWarning(UserWarning):
    """The root of every warning Jianmu emits."""


class ToolDefinitionWarning(JianmuWarning):
    """A tool definition is usable but incomplete, e.g. a parameter has no description."""


class ToolUnavailableWarning(JianmuWarning):
    """A named tool could not be imported or built and was skipped; the message says why."""


def exit_text(exc: SystemExit) -> str:
    """``called sys.exit(2)``: how a `SystemExit` of code Jianmu called (a tool, a script, a
    tree module, a plug-in) is told; never raises (a code whose ``repr`` fails is named by
    its type)."""
    if exc.code is None:
        return "called sys.exit()"
    try:
        code = repr(exc.code)
    except Exception:
        code = f"<{type(exc.code).__name__}>"
    return f"called sys.exit({code})"


def failure_text(exc: BaseException, verb: str = "failed:") -> str:
    """``failed: ValueError: ...`` (``verb`` first), or `exit_text` for a `SystemExit`: what
    code Jianmu imported or called did instead of finishing."""
    if isinstance(exc, SystemExit):
        return exit_text(exc)
    return f"{verb} {type(exc).__name__}: {exc}"
