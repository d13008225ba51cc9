"""`RunContext`: what the runner hands every node (never globals); and `Interaction`, the run's
channel to a person: suspend, approve (possibly with edited arguments), reject, answer.

`StepRecorder` is the seam through which a durable engine records a run's steps. A plain run
has no recorder: a step is just its coroutine. A durable run (`jianmu.durable`) puts one in
`RunContext.steps`; it runs each step once, stores its result under the step's key, and on
recovery hands the stored result back instead of running the step again. The keys are stable
across re-executions of the same run: a model turn is ``model:{node path}`` (numbered by the
recorder per key), a tool call is ``tool:{call id}`` (under the call's namespace:
``left/tool:call_0``, `jianmu.runtime.scopes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable

from jianmu._json import MAX_ARGUMENT_NESTING, nests_within
from jianmu.config import AppConfig, default_config
from jianmu.constraints import Constraints, is_read_only, read_only
from jianmu.errors import ApprovalEditError, CheckpointError, InteractionError
from jianmu.runtime.events import EventBus

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = (
    "QUESTION",
    "UNQUALIFIED",
    "ApprovalDecision",
    "ApprovalRequest",
    "Interaction",
    "RunContext",
    "StepRecorder",
    "check_edit",
    "check_message",
    "consume_approval",
    "copy_of",
    "fresh_request_id",
    "named_request",
    "owner_prefix",
    "run_constraints",
    "unattended",
)


T = TypeVar("T")

QUESTION = "question"
"""`ApprovalRequest.kind` of a question a person answers with text (`Interaction.answer`)."""


# -- the channel to a person -------------------------------------------------------------------


_LOCK = threading.RLock()
"""Guards every run's interaction (decisions are rare; a lock each would cost every run)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """A question the run asks before it goes on; for a tool call, ``id`` is the call's id."""

    id: str
    """Unique in the run; `ReactiveRunner.approve` and ``reject`` take it. A call's is the
    call id qualified by the namespace that owns the call (`jianmu.runtime.scopes`)."""
    kind: str = "tool_call"
    """What is asked: ``tool_call`` (approve or reject), ``question`` (answer with text) or a
    node's own kind."""
    summary: str = ""
    """One line for a person, possibly shortened: show ``payload`` (the full tool arguments)
    before asking for a decision, never the summary alone."""
    payload: dict[str, Any] = field(default_factory=dict)
    """Details: tool name, arguments, the guard's reason."""
    node: str | None = None
    """Path of the node that asked."""
    created: float = field(default_factory=time.time)
    """When it was asked."""

    @property
    def question(self) -> str | None:
        """The question a person is asked to answer, when ``kind`` is ``question``."""
        if self.kind != QUESTION:
            return None
        return str(self.payload.get("question", self.summary))

    @property
    def tool(self) -> str | None:
        """The tool of the call asked about (``payload["tool"]``; ``ask_user`` for its
        question), None for a request of no tool."""
        tool = self.payload.get("tool")
        return tool if isinstance(tool, str) else None

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The call's whole arguments (``payload["arguments"]``): what to show a person, or
        edit (``approve(id, arguments=...)``), rather than the shortened ``summary``."""
        given = self.payload.get("arguments") if self.kind != QUESTION else None
        return given if isinstance(given, dict) else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequest:
        """Rebuild from `to_dict`."""
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class ApprovalDecision:
    """A person's answer to one request."""

    request_id: str
    approved: bool
    message: str | None = None
    arguments: dict[str, Any] | None = None
    """The arguments a person edited the call to (it runs with these), or None: as asked."""
    answer: str | None = None
    """A person's answer to a question (``kind == "question"``)."""

    @property
    def edited(self) -> bool:
        """Whether a person changed the call's arguments when approving it."""
        return self.arguments is not None


class Interaction:
    """The run's channel to a person: pending requests and recorded decisions.

    Nothing is approved by default, and a decision for an id that was never asked is refused:
    the channel fails closed.
    """

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._pending: dict[str, ApprovalRequest] = {}
        self._asked: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, ApprovalDecision] = {}
        self._consumed: dict[str, None] = {}
        """Approvals used, as the keys of a dict (which holds no object the collector
        tracks, as a set would)."""
        self._lock = _LOCK
        self._on_change = on_change
        self.suspended = False

    def suspend(self, request: ApprovalRequest) -> None:
        """Ask ``request`` and make the run return SUSPENDED after this tick."""
        with self._lock:
            self._asked[request.id] = request
            if request.id not in self._decisions:
                self._pending[request.id] = request
                self.suspended = True

    @property
    def has_pending(self) -> bool:
        """Whether any request waits for a decision (the runner asks after every tick)."""
        return bool(self._pending)  # one read of a dict's size: no lock, no copy

    @property
    def pending(self) -> list[ApprovalRequest]:
        """Requests asked and not yet decided, oldest first."""
        with self._lock:
            return list(self._pending.values())

    def asked(self, request_id: str) -> bool:
        """Whether the run ever asked this id."""
        return request_id in self._asked

    def request(self, request_id: str) -> ApprovalRequest | None:
        """The request asked under ``request_id``, if the run ever asked one."""
        return self._asked.get(request_id)

    def consume(self, request_id: str) -> None:
        """Mark an approval as used: the call it allowed has run, so it allows nothing more.

        A caller that meets a consumed id again (a model replaying it, another node) must ask
        anew under a fresh id.
        """
        with self._lock:
            self._consumed[request_id] = None

    def consumed(self, request_id: str) -> bool:
        """Whether the approval under ``request_id`` was already used."""
        return request_id in self._consumed

    def decision(self, request_id: str) -> ApprovalDecision | None:
        """The decision recorded for ``request_id``, if any."""
        return self._decisions.get(request_id)

    def resolve(self, request_id: str) -> str:
        """The id of the request ``request_id`` names (`named_request`): itself when a
        request was asked under it, else the one request, pending or decided, that had that id
        before ids were qualified by the namespace that owns the call (``call_0`` for
        ``left/call_0``, `jianmu.runtime.scopes`).

        Raises:
            InteractionError: ``request_id`` names several requests (of several namespaces,
                pending or decided); the message lists their ids.
        """
        with self._lock:
            return named_request(request_id, self._pending.values(), self._asked,
                                 _earlier(self._asked))

    def _decide(
        self, request_id: str, approved: bool, message: str | None, *,
        arguments: dict[str, Any] | None = None, answer: str | None = None,
    ) -> str:
        check_message(message)
        with self._lock:
            request_id = named_request(request_id, self._pending.values(), self._asked,
                                       _earlier(self._asked))
            if request_id not in self._asked:
                known = ", ".join(sorted(self._pending)) or "none"
                raise InteractionError(
                    f"no approval request {request_id!r} was asked in this run "
                    f"(pending: {known})"
                )
            asked = self._asked[request_id]
            if (asked.kind == QUESTION) != (answer is not None):
                if answer is None:
                    raise InteractionError(
                        f"request {request_id!r} is a question ({asked.question!r}); answer it "
                        "with answer(request_id, text) rather than approve or reject it"
                    )
                raise InteractionError(
                    f"request {request_id!r} asks for approval ({asked.summary}), not for an "
                    "answer; approve or reject it"
                )
            first = self._decisions.get(request_id)
            if first is not None:
                verb = ("answered" if first.answer is not None
                        else "approved" if first.approved else "rejected")
                said = f" ({first.message!r})" if first.message else ""
                raise InteractionError(
                    f"request {request_id!r} was already {verb}{said}; the first decision "
                    "stands and this one was not recorded"
                )
            if request_id not in self._pending:  # withdrawn: its run ended without it
                raise InteractionError(
                    f"request {request_id!r} no longer waits for a decision: the run ended "
                    "before it was decided, and nothing would act on this one"
                )
            if arguments is not None:
                check_edit(asked, arguments)
            self._decisions[request_id] = ApprovalDecision(
                request_id=request_id, approved=approved, message=message,
                arguments=arguments, answer=answer,
            )
            self._pending.pop(request_id, None)
            if not self._pending:
                self.suspended = False
        if self._on_change is not None:
            self._on_change()
        return request_id

    def approve(
        self, request_id: str, message: str | None = None, *,
        arguments: dict[str, Any] | None = None,
    ) -> str:
        """Approve a pending request; with ``arguments``, the call runs with those instead.
        Returns the request's id (``request_id`` may be a call id alone: `resolve`).

        Edited arguments are checked against the tool's input schema here (nothing is recorded
        when they do not fit), and by the guard's policy again before the call runs.

        Raises:
            ApprovalEditError: the edited arguments do not fit the tool's schema, or the
                request is not a tool call.
            InteractionError: the id was never asked, was already decided, is a question, or
                names several requests.
            TypeError: ``message`` is not text.
        """
        return self._decide(request_id, True, message, arguments=arguments)

    def answer(self, request_id: str, text: str) -> str:
        """Answer a question (a request of kind ``question``); ``text`` is what the asker reads.
        Returns the request's id (`resolve`).

        Raises:
            InteractionError: the id was never asked, was already decided, is not a
                question, or names several requests.
        """
        if not isinstance(text, str):
            raise TypeError(f"an answer is text, got {type(text).__name__}")
        return self._decide(request_id, True, None, answer=text)

    def reject(self, request_id: str, message: str | None = None) -> str:
        """Reject a pending request; ``message`` is shown to the model. Returns the request's
        id (`resolve`).

        Raises:
            InteractionError: the id was never asked, was already decided, or names several
                pending requests.
            TypeError: ``message`` is not text.
        """
        return self._decide(request_id, False, message)

    def decided(self) -> frozenset[str]:
        """The ids of the requests decided so far."""
        with self._lock:
            return frozenset(self._decisions)

    def retract(self, request_ids: Iterable[str]) -> None:
        """Take back decisions not used yet (several given together, one of them refused:
        `all_or_none`): their requests wait again, in the order they were asked."""
        with self._lock:
            gone = {i for i in request_ids
                    if i not in self._consumed and self._decisions.pop(i, None) is not None}
            if not gone:
                return
            self._pending = {i: r for i, r in self._asked.items()
                             if i in self._pending or i in gone}
            self.suspended = bool(self._pending)

    @contextlib.contextmanager
    def all_or_none(self) -> Iterator[None]:
        """Decisions made in the block stand only if it ends well: one refused (it raises),
        the others given with it are taken back (`retract`), not kept for the run to act on."""
        before = self.decided()
        try:
            yield
        except BaseException:
            self.retract(self.decided() - before)
            raise

    def withdraw(self, prefix: str = "") -> list[str]:
        """Withdraw the pending requests (those whose id starts with ``prefix``): the run's
        tree ended without them, so no decision of theirs would ever be acted on. Their ids.
        """
        with self._lock:
            gone = [i for i in self._pending if i.startswith(prefix)]
            for request_id in gone:
                del self._pending[request_id]
            self.suspended = bool(self._pending)
        return gone

    def snapshot(self) -> dict[str, Any]:
        """Asked requests and decisions, JSON-serialisable."""
        with self._lock:
            return {
                "asked": [r.to_dict() for r in self._asked.values()],
                "pending": list(self._pending),
                "decisions": [asdict(d) for d in self._decisions.values()],
                "consumed": sorted(self._consumed),
            }

    def restore(self, data: dict[str, Any]) -> None:
        """Load what `snapshot` returned; nothing changes if it is not such a snapshot.

        Raises:
            CheckpointError: ``data`` is damaged (a request or decision that is not one, a
                pending id never asked).
        """
        try:
            asked = {r["id"]: ApprovalRequest.from_dict(r) for r in data.get("asked", [])}
            pending = {i: asked[i] for i in data.get("pending", [])}
            decisions = {
                d["request_id"]: ApprovalDecision(**d) for d in data.get("decisions", [])
            }
            consumed = dict.fromkeys(data.get("consumed", []))
        except (AttributeError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"the run's requests cannot be restored: {type(exc).__name__}: {exc}"
            ) from None
        with self._lock:
            self._asked, self._pending = asked, pending
            self._decisions, self._consumed = decisions, consumed
            self.suspended = bool(self._pending)


UNQUALIFIED = "unqualified_id"
"""The payload key of a request's id without the prefixes of the namespaces it was asked
under (`jianmu.runtime.scopes`): the id it had before ids were qualified, which still names it
where no other pending request has it (`named_request`). Absent: the id itself."""


def named_request(
    given: str, pending: Iterable[ApprovalRequest], asked: Container[str],
    earlier: Iterable[tuple[str, str | None]] = (),
) -> str:
    """The request id ``given`` names: ``given`` itself when a request was asked under it
    (its exact id always means that request, decided or not); else the one request, pending or
    asked before (``earlier``: each id and its id without the prefixes), whose id without its
    namespaces' prefixes is ``given`` (`UNQUALIFIED`: ``call_0`` for ``left/call_0``, never for
    a sub-agent's ``helper/call_1/call_0``): a second decision by that id is told of the first,
    as one by the whole id; else ``given`` as it is (unknown, said so by whoever looks it up).

    Raises:
        InteractionError: several requests have that id in their namespaces, pending or
            decided: which one is meant is not guessed (once ``left/call_0`` is decided, a
            repeated ``call_0`` must not approve ``right/call_0``).
    """
    if given in asked:
        return given
    named = [r.id for r in pending if r.payload.get(UNQUALIFIED) == given]
    named += [rid for rid, short in earlier if short == given and rid not in named]
    if len(named) > 1:
        raise InteractionError(
            f"{given!r} names {len(named)} requests, of calls of different namespaces "
            f"that were given one id: {', '.join(sorted(named))}; give the one you mean"
        )
    return named[0] if named else given


def _earlier(asked: dict[str, ApprovalRequest]) -> Iterator[tuple[str, str | None]]:
    """Each request of ``asked`` as `named_request` takes an earlier one: its id, and its id
    without the namespaces' prefixes."""
    for request_id, request in asked.items():
        yield request_id, request.payload.get(UNQUALIFIED)


def fresh_request_id(base: str, ctx: RunContext) -> str:
    """``base``, or ``base.N`` when the approvals under the earlier ids were already used."""
    interaction = ctx.interaction
    candidate, n = base, 0
    while interaction is not None and interaction.consumed(candidate):
        n += 1
        candidate = f"{base}.{n}"
    return candidate


def consume_approval(ctx: RunContext, request_id: str) -> None:
    """Mark a person's approval as used once the call it allowed has run."""
    interaction = ctx.interaction
    if interaction is not None and interaction.decision(request_id) is not None:
        interaction.consume(request_id)


def owner_prefix(run_namespace: str | None, namespace: str | None) -> str:
    """The prefix under which a node of ``namespace`` keys its calls in the run of
    ``run_namespace`` (`jianmu.runtime.scopes`): ``""`` in the run's own namespace, else the
    namespace (relative to the run's) and ``/``.

    Call ids never hold ``/`` (`jianmu.nodes.tool_executor.unique_ids` escapes it), so two
    namespaces' keys of one call id never meet, nor meet a bare one.
    """
    if not namespace or namespace == run_namespace:
        return ""
    if run_namespace and namespace.startswith(run_namespace + "."):
        namespace = namespace[len(run_namespace) + 1:]
    return namespace + "/"


def _key_not_text(value: Any) -> tuple[Any] | None:
    """The first key in ``value`` (nested) that is not a string, in a tuple; or ``None``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return (key,)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def check_message(message: Any) -> None:
    """Refuse a decision's ``message`` that is not text (or None): recorded, ``b"no"`` failed
    every save after it, and the run could neither go on nor be decided again.

    Raises:
        TypeError: ``message`` is not text.
    """
    if message is not None and not isinstance(message, str):
        raise TypeError(f"a decision's message is text (or None), got {type(message).__name__}")


def check_edit(request: ApprovalRequest, arguments: Any) -> None:
    """Refuse edited arguments that are not a tool call's or do not fit its input schema.

    Raises:
        ApprovalEditError: naming every problem.
    """
    if request.kind != "tool_call":
        raise ApprovalEditError(
            request.id, [f"a request of kind {request.kind!r} has no arguments to edit"]
        )
    if not request.payload.get("fingerprint"):
        # only a call the guard asked about runs with the edit (`edited_call` matches it by
        # this fingerprint): a node's own request would go on as asked, the edit unused
        raise ApprovalEditError(request.id, [
            "the request names no tool call the guard asked about, so nothing would run with "
            "edited arguments: approve or reject it as it is"
        ])
    if not isinstance(arguments, dict):
        raise ApprovalEditError(
            request.id, [f"arguments must be a JSON object, got {type(arguments).__name__}"]
        )
    if not nests_within(arguments, MAX_ARGUMENT_NESTING):  # as for a model's arguments
        raise ApprovalEditError(
            request.id, [f"arguments nest deeper than {MAX_ARGUMENT_NESTING} levels"]
        )
    try:  # the decision is checkpointed and sent to durable workers as JSON
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ApprovalEditError(request.id, [f"arguments must be plain JSON: {exc}"]) from None
    key = _key_not_text(arguments)
    if key is not None:  # JSON made it text: the call ran with {1: ...}, after a restore {"1": ...}
        raise ApprovalEditError(request.id, [
            f"arguments must be plain JSON: the key {key[0]!r} is not text (write {str(key[0])!r})"
        ])
    schema = request.payload.get("parameters")
    if not isinstance(schema, dict):  # asked before schemas were kept: the tool checks them
        return
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable

    from jianmu import _schema_rules  # RE2 and jsonschema: only for an edit

    if _schema_rules.schema_problems(schema):  # the tool refuses it: its own check runs
        return
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        _schema_rules.meta_check(cls, schema)  # jsonschema's, uniqueItems hashed (draft 4's enum)
        # patterns by RE2, nothing fetched, the work bounded: the schema may be an MCP
        # server's, and Python's re on its ^(a+)+$ held the studio's process for years
        validator = _schema_rules.validator_class(cls)(
            schema, registry=_schema_rules.local_registry()
        )
        errors = _schema_rules.within_budget(
            lambda: validator.iter_errors(arguments), _schema_rules.steps_for(arguments)
        )
    except (SchemaError, Unresolvable):  # a schema jsonschema cannot use: the tool's own check runs
        return
    except _schema_rules.TooComplex:
        raise ApprovalEditError(request.id, [
            "the tool's schema is too complex to check these arguments"
        ], tool=request.payload.get("tool")) from None
    problems = [
        f"{error.json_path}: {error.message}"
        for error in sorted(errors, key=lambda e: e.json_path)
    ]
    if problems:
        raise ApprovalEditError(request.id, problems, tool=request.payload.get("tool"))


# -- the run's context -------------------------------------------------------------------------


def _noop() -> None:
    return None


@dataclass(kw_only=True)
class RunContext:
    """The run's configuration, constraints, event bus, interaction channel and tracer."""

    def __class_getitem__(cls, item: Any) -> Any:
        # pydantic-ai's tools are written ctx: RunContext[Deps]: said so, not "not subscriptable"
        raise TypeError(
            "Jianmu's RunContext takes no type (pydantic-ai's RunContext[Deps] does): annotate "
            "ctx: RunContext, and pass what pydantic-ai gives as deps= as extras={...} on the "
            "run (agent.run(..., extras={'deps': deps})), read as ctx.extras['deps']"
        )

    config: AppConfig = field(default_factory=default_config)
    """The loaded configuration (`default_config`, shared and read-only, when none is given)."""
    constraints: Constraints = field(default_factory=Constraints)
    """The constraints in force for this run (config layer merged with the caller's)."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """Id of the run, kept across checkpoint and restore."""
    events: EventBus = field(default_factory=EventBus)
    """The runtime event bus."""
    interaction: Interaction | None = field(default_factory=Interaction)
    """The channel to a person; ``None`` means nobody can approve (confirm becomes deny)."""
    tracer: Tracer | None = None
    """OpenTelemetry tracer for spans; ``None`` disables tracing."""
    user_roles: frozenset[str] = frozenset()
    """Roles of the user who started the run (``admin`` unlocks admin_only tools)."""
    wake: Callable[[], None] = _noop
    """Wakes the runner; thread-safe."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Anything a host wants nodes to reach (services, clients)."""
    cancelled_tasks: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)
    """Tasks of pre-empted nodes; the runner lets them finish their ``finally`` blocks."""
    cleaning: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)
    """Stopped tasks still in their ``finally`` blocks after `run()` returned (a timed run's
    grace ran out): they still write to this run's state, so its tree serves no other run
    until they end (each leaves the set as it does)."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False)
    """Async callbacks the runner awaits when the run ends (not when it suspends)."""
    open_spans: dict[Any, Any] = field(default_factory=dict, repr=False)
    """Spans of nodes still running (an agent's, by its node), ended with the run's span when
    the run stops before they do: a run that suspends leaves none open."""
    runner: Any = field(default=None, repr=False)
    """The `ReactiveRunner` ticking this run (for nodes that compile subtrees lazily)."""
    steps: StepRecorder | None = field(default=None, repr=False)
    """Records model turns and tool calls when the run is durable (`jianmu.durable`)."""
    running_calls: dict[object, list[str]] = field(default_factory=dict, repr=False)
    """The names of admitted tool calls still running, per batch; shared with the runs of
    sub-agents and parallel branches, whose guard counts them as made, in every limit (an agent
    tool's own call ends only after its sub-agent's)."""
    agent_runs: list[int] = field(default_factory=lambda: [0], repr=False)
    """Sub-agent runs started in this run's ``run()``, counted in one cell shared with the runs
    of sub-agents, so `jianmu.nodes.agents.MAX_AGENT_RUNS` bounds the whole tree of them."""
    agent_calls: dict[int, Any] = field(default_factory=dict, repr=False)
    """The sub-runs of agent tools' calls still under way (waiting for a person), by tool,
    shared with the runs of sub-agents: the run holds them, so they go when it is dropped."""
    namespace: str | None = None
    """The state namespace of the run's tree (its root's; a sub-agent's run: its call's). A
    call of a node in another namespace is keyed in the run (its request id, its durable step)
    under that namespace, relative to this one (`jianmu.runtime.scopes`)."""
    guardrails: dict[str, tuple[Any, ...]] = field(default_factory=dict, repr=False)
    """Guardrails by kind (``input``, ``output``, ``tool_output``) given in code to the agents
    that called this run (a sub-agent's callers): every agent of the run runs them after its
    own, as it runs the configured ones (`jianmu.guard.guardrails.configured_guardrails`)."""

    def __post_init__(self) -> None:
        if not self.events.run_id:
            self.events.run_id = self.run_id

    @staticmethod
    def roles(user_roles: Iterable[str]) -> frozenset[str]:
        """The set of ``user_roles`` (`user_role_names`: a name given as text is refused)."""
        return frozenset(user_role_names(user_roles))

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Await ``closer`` when the run ends (sandboxes, connections); once per closer."""
        if closer not in self.closers:
            self.closers.append(closer)

    async def step(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``factory()`` as the step ``key``: once per durable run, replayed on recovery."""
        steps = self.steps
        if steps is None:
            return await factory()
        return await steps.run(key, factory)

    @property
    def checkpointed(self) -> bool:
        """Whether the run has a checkpointer (`save_checkpoint` saves something)."""
        return getattr(self.runner, "checkpointer", None) is not None

    def save_checkpoint(self) -> None:
        """Checkpoint the run now, if it has a checkpointer (after a side effect, say)."""
        if self.checkpointed:
            self.runner.save_checkpoint()


class _Unattended:
    """A run's context where nobody may be asked: no interaction channel, everything else the
    run's own, read (and written) live."""

    __slots__ = ("_run",)
    interaction = None

    def __init__(self, run: RunContext) -> None:
        object.__setattr__(self, "_run", run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._run, name, value)


def copy_of(run: RunContext, **changes: Any) -> RunContext:
    """A new context with ``run``'s fields and ``changes`` (as `dataclasses.replace`), also of
    a view of a run (`unattended`, `jianmu.runtime.scopes.seen_from`): it holds what the view
    shows (no channel, or the channel under the view's namespace)."""
    values = {f.name: getattr(run, f.name) for f in dataclasses.fields(RunContext)}
    values.update(changes)
    return RunContext(**values)


def unattended(run: RunContext) -> RunContext:
    """``run`` as seen where nobody may be asked (a person answers its other parts): a call
    that needs a confirmation is denied there, and a question gets no answer."""
    if run.interaction is None:
        return run
    return cast(RunContext, _Unattended(run))


def run_constraints(*layers: Constraints | None) -> Constraints:
    """The run's constraints: the layers merged, a given workdir made absolute.

    An unset workdir stays unset: it means the working folder, and a skill's layer is measured
    against that folder (`ExecutionConstraints.tightened_by`), while a node the operator wrote
    may still choose its own workspace, as it may when the config names none.

    Read-only layers (the default configuration's) give one read-only result, merged once:
    the runs that nobody gave constraints share it rather than each copying the defaults.
    """
    present = [layer for layer in layers if layer is not None]
    if not present or not all(map(is_read_only, present)):
        return _merged(present)
    key = tuple(map(id, present))
    shared = _shared_constraints.get(key)
    if shared is None:
        shared = _merged(present)
        if shared.execution.workdir is not None:  # made absolute from the working folder,
            return shared  # which may change: merged anew every time
        shared = _shared_constraints[key] = read_only(shared)
    return shared


_shared_constraints: dict[tuple[int, ...], Constraints] = {}
"""`run_constraints` of read-only layers (which live for good: their ids stay theirs)."""


def _merged(layers: list[Constraints]) -> Constraints:
    merged = Constraints.merge(*layers)
    if merged.execution.workdir is None:
        return merged
    workdir = os.path.abspath(os.path.expanduser(merged.execution.workdir))
    return merged.model_copy(
        update={"execution": merged.execution.model_copy(update={"workdir": workdir})}
    )


@runtime_checkable
class StepRecorder(Protocol):
    """Runs a run's steps once, durably."""

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """The result recorded under ``key`` (numbered per key), or ``factory()``'s, recorded."""
        ...

    async def mark_started(self, keys: Sequence[str]) -> None:
        """Record that the steps under ``keys`` (each its next run) are about to run: one a
        recovery finds started and unrecorded was in flight (`maybe_repeated`)."""
        ...

    def maybe_repeated(self, key: str) -> bool:
        """Whether an earlier attempt started the next run of the step under ``key`` and
        recorded no result: an idempotent call runs again, any other is maybe done."""
        ...


def key_part(value: Any) -> str:
    """A value as it may appear in a step key (no ``#``, which numbers repeats)."""
    return str(value).replace("#", "%23")


def user_role_names(user_roles: Iterable[str]) -> Iterable[str]:
    """``user_roles`` as given, once checked to be a collection of role names.

    Raises:
        TypeError: one name given as text (``"admin"`` would be the roles a, d, m, i, n).
    """
    if isinstance(user_roles, (str, bytes)):
        raise TypeError(f"user_roles is a collection of roles: write user_roles=[{user_roles!r}]"
                        f", not user_roles={user_roles!r} (its letters would be the roles)")
    return user_roles
