"""The run as the nodes of one namespace see it: the ids of the requests their calls ask a
person and the keys of the steps their calls record, qualified by the namespace.

Models number call ids per turn (``call_0``, ``call_1``: local models, OpenAI-compatible
servers, `ScriptedLLM`), so two agents in two namespaces of one run (parallel branches, a team)
give their calls one id. What the run keys by a call (its approval request, the decision, the
approval used, its question, its durable step) is therefore keyed by the call id qualified by
the namespace that owns the call, relative to the run's own (`RunContext.namespace`,
`jianmu.runtime.context.owner_prefix`): ``left/call_0``, ``left/ask:call_0``, step
``left/tool:call_0``. A call of the run's own namespace (a lone agent's) keeps its bare id. A
sub-agent's run sees its caller's channel the same way, under the call's prefix
(``researcher/call_1/``, `jianmu.nodes.agents`), so the prefixes compose:
``left/researcher/call_1/call_0``.

A request keeps the id it would have had without the namespaces' prefixes (`UNQUALIFIED`:
``call_0``, ``researcher/call_1/call_0``), and `Interaction.resolve` lets a person still name
it so where that names one pending request.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from jianmu.runtime.context import (
    UNQUALIFIED,
    ApprovalDecision,
    ApprovalRequest,
    Interaction,
    RunContext,
    StepRecorder,
    owner_prefix,
)

__all__ = ("ScopedInteraction", "ScopedSteps", "agent_part", "agent_scope", "seen_from",
           "unmarked")

T = TypeVar("T")

_AGENT_PART = re.compile(r"(?P<name>[A-Za-z0-9_-]{1,64})\[(?P<label>[^\[\]]+)\]")
"""A node path's part where a sub-agent's tree hangs (`agent_part`): a tool's name, then its
call's label in brackets."""

_PATH_ESCAPED = re.compile(r"[\[\]]")
_PATH_UNESCAPED = re.compile(r"%5[BD]")


def agent_part(name: str, label: str) -> str:
    """The node path part where the tree of agent tool ``name``'s call hangs, the call's
    namespace part being ``label`` (`jianmu.nodes.agents`): ``researcher[call_1]``. Never a
    part the runner gives a node among same-named siblings (``fetch[2]``): a label of digits
    alone (a call id ``2``, as some servers number calls) is written ``#2``, and ``[``, ``]``
    as ``%5B``, ``%5D``; a label has no raw ``#`` and no ``%5`` (`agents._label` escapes
    ``#`` and ``%``), so `agent_scope` reads it back one to one."""
    shown = _PATH_ESCAPED.sub(lambda m: f"%{ord(m.group()):02X}", label)
    return f"{name}[#{shown}]" if shown.isascii() and shown.isdigit() else f"{name}[{shown}]"


def agent_scope(path: str | None) -> str:
    """The namespace, relative to the run's own, of the sub-agent whose tree holds the node at
    ``path`` (`agent_part`): ``""`` outside any, ``researcher/call_1`` below
    ``researcher[call_1]``, ``researcher/2`` below ``researcher[#2]``. A part of digits alone
    is a sibling's index (paths written before `agent_part` marked them gave a call id of
    digits alone so: they read as the run's own)."""
    parts: list[str] = []
    for part in (path or "").split("/"):
        found = _AGENT_PART.fullmatch(part)
        if found is None:
            continue
        label = found.group("label")
        if label.isascii() and label.isdigit():
            continue
        label = _PATH_UNESCAPED.sub(lambda m: chr(int(m.group()[1:], 16)), label)
        parts += [found.group("name"), label.removeprefix("#")]
    return "/".join(parts)


def unmarked(path: str) -> str:
    """``path`` as versions before `agent_part` spelt it (``researcher[2]`` for
    ``researcher[#2]``, ``researcher[x]1]`` for ``researcher[x%5D1]``): a request asked by one
    of them, restored, names its node so. Its sub-agent parts hang below a node that calls
    tools, never below same-named siblings, so two nodes' paths differ so too."""
    def part(text: str) -> str:
        found = _AGENT_PART.fullmatch(text)
        if found is None:
            return text
        label = _PATH_UNESCAPED.sub(lambda m: chr(int(m.group()[1:], 16)), found.group("label"))
        return f"{found.group('name')}[{label.removeprefix('#')}]"

    return "/".join(part(p) for p in path.split("/"))


class ScopedInteraction(Interaction):
    """A run's channel to a person as seen under ``prefix``: every id given or returned is
    relative to it, and the requests live in ``parent`` under ``prefix + id``.

    ``qualifies``: the prefix is a namespace's, left out of the request's id as a person may
    still give it (`UNQUALIFIED`); a sub-agent's call's prefix (``helper/call_1/``) is not:
    its requests are named by their whole path.
    """

    def __init__(self, parent: Interaction, prefix: str, *, qualifies: bool = False) -> None:
        super().__init__()
        self.parent = parent
        self.prefix = prefix
        self.qualifies = qualifies

    def shown(self, request: ApprovalRequest) -> ApprovalRequest:
        """``request`` as it is asked in ``parent`` (its id under the prefix)."""
        payload = request.payload
        if self.qualifies or UNQUALIFIED in payload:
            short = payload.get(UNQUALIFIED, request.id)
            payload = {**payload, UNQUALIFIED: short if self.qualifies else self.prefix + short}
        return dataclasses.replace(request, id=self.prefix + request.id, payload=payload)

    def suspend(self, request: ApprovalRequest) -> None:
        """Ask ``request`` on the parent channel, under the prefix."""
        self.parent.suspend(self.shown(request))

    @property
    def pending(self) -> list[ApprovalRequest]:
        """The requests under the prefix waiting for a decision, with their own ids."""
        n = len(self.prefix)
        return [dataclasses.replace(r, id=r.id[n:]) for r in self.parent.pending
                if r.id.startswith(self.prefix)]

    @property
    def has_pending(self) -> bool:
        """Whether a request under the prefix waits for a decision."""
        return self.parent.has_pending and any(
            r.id.startswith(self.prefix) for r in self.parent.pending
        )

    def asked(self, request_id: str) -> bool:
        return self.parent.asked(self.prefix + request_id)

    def request(self, request_id: str) -> ApprovalRequest | None:
        return self.parent.request(self.prefix + request_id)

    def consume(self, request_id: str) -> None:
        self.parent.consume(self.prefix + request_id)

    def consumed(self, request_id: str) -> bool:
        return self.parent.consumed(self.prefix + request_id)

    def decision(self, request_id: str) -> ApprovalDecision | None:
        return self.parent.decision(self.prefix + request_id)

    def decided(self) -> frozenset[str]:
        """The ids of the requests under the prefix decided so far, as their own."""
        n = len(self.prefix)
        return frozenset(i[n:] for i in self.parent.decided() if i.startswith(self.prefix))

    def retract(self, request_ids: Iterable[str]) -> None:
        """Take back, on the parent channel, decisions under the prefix not used yet."""
        self.parent.retract([self.prefix + i for i in request_ids])

    def resolve(self, request_id: str) -> str:
        return self._own(self.parent.resolve(self.prefix + request_id))

    def approve(
        self, request_id: str, message: str | None = None, *,
        arguments: dict[str, Any] | None = None,
    ) -> str:
        return self._own(self.parent.approve(self.prefix + request_id, message,
                                             arguments=arguments))

    def answer(self, request_id: str, text: str) -> str:
        return self._own(self.parent.answer(self.prefix + request_id, text))

    def reject(self, request_id: str, message: str | None = None) -> str:
        return self._own(self.parent.reject(self.prefix + request_id, message))

    def withdraw(self, prefix: str = "") -> list[str]:
        """Withdraw the pending requests under the prefix (and ``prefix``); their own ids."""
        return [self._own(i) for i in self.parent.withdraw(self.prefix + prefix)]

    def snapshot(self) -> dict[str, Any]:
        """Nothing of its own: the parent channel keeps the requests and decisions."""
        return {}

    def restore(self, data: dict[str, Any]) -> None:
        """Nothing of its own to restore (see `snapshot`)."""

    def _own(self, request_id: str) -> str:
        return request_id.removeprefix(self.prefix)


class ScopedSteps:
    """A durable run's step recorder as seen under ``prefix``: every key under it, so a call
    (``tool:call_0``) never shares a record with a call of another namespace or sub-agent."""

    def __init__(self, parent: StepRecorder, prefix: str) -> None:
        self.parent = parent
        self.prefix = prefix

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        return await self.parent.run(self.prefix + key, factory)

    async def mark_started(self, keys: Sequence[str]) -> None:
        await self.parent.mark_started([self.prefix + k for k in keys])

    def maybe_repeated(self, key: str) -> bool:
        return self.parent.maybe_repeated(self.prefix + key)

    def replays(self, key: str) -> bool:
        """The parent's `replays` under the prefix (False for a recorder without one)."""
        replays = getattr(self.parent, "replays", None)
        return bool(callable(replays) and replays(self.prefix + key))


class _Owned:
    """A run's context as the nodes of one namespace see it: its interaction and steps under
    the namespace's prefix, everything else the run's own, read (and written) live."""

    __slots__ = ("_interaction", "_prefix", "_run", "_steps", "namespace")
    _interaction: ScopedInteraction | None
    _steps: ScopedSteps | None
    namespace: str
    """The namespace it is seen from: what is keyed through it is relative to this one."""

    def __init__(self, run: RunContext, prefix: str, namespace: str) -> None:
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_interaction", None)
        object.__setattr__(self, "_steps", None)
        object.__setattr__(self, "namespace", namespace)

    @property
    def interaction(self) -> Interaction | None:
        parent = self._run.interaction
        if parent is None:
            return None
        scoped = self._interaction
        if scoped is None or scoped.parent is not parent:  # made once per channel
            scoped = ScopedInteraction(parent, self._prefix, qualifies=True)
            object.__setattr__(self, "_interaction", scoped)
        return scoped

    @property
    def steps(self) -> StepRecorder | None:
        parent = self._run.steps
        if parent is None:
            return None
        scoped = self._steps
        if scoped is None or scoped.parent is not parent:
            scoped = ScopedSteps(parent, self._prefix)
            object.__setattr__(self, "_steps", scoped)
        return scoped

    async def step(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """`RunContext.step`, keyed under the prefix."""
        steps = self.steps
        if steps is None:
            return await factory()
        return await steps.run(key, factory)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._run, name, value)


def seen_from(run: RunContext, namespace: str | None) -> RunContext:
    """``run`` as the nodes of ``namespace`` key their calls in it (`owner_prefix`): the run
    itself in its own namespace."""
    prefix = owner_prefix(run.namespace, namespace)
    if not prefix:
        return run
    assert namespace is not None  # a prefix is made of one
    return cast(RunContext, _Owned(run, prefix, namespace))
