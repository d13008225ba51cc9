"""A model server as strict as the real OpenAI Chat Completions and Anthropic Messages APIs:
every request body is checked against their rules before it is answered, and one that breaks
any is answered 400 with the real API's error shape (and recorded in ``refused``).

`openai_problems` and `anthropic_problems` are the rules, usable on any body; `StrictServer`
is `ModelServer` (keep-alive, scripted, streamed or not) with them in front::

    with StrictServer() as server:
        server.add(Turn(calls=[...]), "Done.")
        ...
        assert not server.refused, server.refused
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.support.model_server import ModelServer, Raw, Request, Turn, strict_json

__all__ = ("StrictServer", "anthropic_problems", "openai_problems")

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}
_OPENAI_CHOICES = {"none", "auto", "required"}
_MAX_TOOLS = 128
_ROOT_REFUSED = {"oneOf", "anyOf", "allOf", "enum", "const"}  # and "not", left to the schema


# -- OpenAI ---------------------------------------------------------------------------------------


def _openai_tools(body: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    problems: list[str] = []
    names: set[str] = set()
    tools = body.get("tools")
    if tools is None:
        if body.get("tool_choice") is not None:
            problems.append("tool_choice: only allowed when tools are specified")
        return problems, names
    if not isinstance(tools, list) or not tools:
        return [f"tools: expected a non-empty array, got {tools!r}"], names
    if len(tools) > _MAX_TOOLS:
        problems.append(f"tools: array too long, expected at most {_MAX_TOOLS}")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or not isinstance(
                function, Mapping):
            problems.append(f"tools[{i}]: not a function tool: {tool!r}")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"tools[{i}].function.name: {name!r} does not match "
                            f"'^[a-zA-Z0-9_-]{{1,64}}$'")
        elif name in names:
            problems.append(f"tools[{i}].function.name: duplicate tool name {name!r}")
        else:
            names.add(name)
        params = function.get("parameters")
        if params is not None and (not isinstance(params, Mapping)
                                   or params.get("type") != "object"):
            problems.append(f"tools[{i}].function.parameters: schema must be a JSON Schema of "
                            f"'type: \"object\"', got {params!r}")
        elif params is not None and params.keys() & _ROOT_REFUSED:
            problems.append(f"Invalid schema for function {name!r}: schema must have type "
                            "'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the "
                            "top level.")
    choice = body.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str):
            if choice not in _OPENAI_CHOICES:
                problems.append(f"tool_choice: invalid value {choice!r}")
        elif isinstance(choice, Mapping):
            named = (choice.get("function") or {}).get("name")
            if choice.get("type") != "function" or named not in names:
                problems.append(f"tool_choice: names no tool that was given: {choice!r}")
        else:
            problems.append(f"tool_choice: invalid value {choice!r}")
    return problems, names


def _openai_content(where: str, role: str, content: Any) -> list[str]:
    if content is None or isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"{where}.content: expected a string or a non-empty array of parts"]
    allowed = {"text"} if role in ("system", "developer", "tool", "assistant") else {
        "text", "image_url", "input_audio", "file"}
    problems = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            problems.append(f"{where}.content[{j}].type: {kind!r} is not allowed in a "
                            f"{role} message")
        elif kind == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{where}.content[{j}].text: expected a string")
    return problems


def openai_problems(body: Mapping[str, Any]) -> list[str]:
    """Why the OpenAI Chat Completions API would refuse ``body`` (empty: it takes it)."""
    problems, _ = _openai_tools(body)
    if not body.get("model"):
        problems.append("model: required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: expected a non-empty array"]
    problems += _response_format(body.get("response_format"))
    if body.get("stream_options") is not None and not body.get("stream"):
        problems.append("stream_options: only allowed when stream is true")
    seen_ids: set[str] = set()
    waiting: list[str] = []  # the calls of the last assistant turn still without a result
    answered: set[str] = set()
    first_other = next((i for i, m in enumerate(messages)
                        if isinstance(m, Mapping)
                        and m.get("role") not in ("system", "developer")), len(messages))
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: expected an object")
            continue
        role = message.get("role")
        if role not in _OPENAI_ROLES:
            problems.append(f"{where}.role: invalid role {role!r}")
            continue
        if role in ("system", "developer") and i > first_other:
            problems.append(f"{where}: a {role} message after the conversation began; the "
                            "system message comes first")
        if role != "tool" and waiting:
            problems.append(
                f"{where}: an assistant message with 'tool_calls' must be followed by tool "
                f"messages responding to each 'tool_call_id'. The following tool_call_ids did "
                f"not have response messages: {', '.join(waiting)}")
            waiting = []
        if "name" in message and not (isinstance(message["name"], str)
                                      and _TOOL_NAME.match(message["name"])):
            problems.append(f"Invalid '{where}.name': string does not match pattern. Expected "
                            "a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.")
        content = message.get("content")
        problems += _openai_content(where, role, content)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(content, (str, list)):
                problems.append(f"{where}.content: a tool message needs content")
            if call_id not in waiting:
                problems.append(
                    f"{where}: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (tool_call_id {call_id!r}"
                    f"{' answered twice' if call_id in answered else ''})")
            else:
                waiting.remove(call_id)
                answered.add(call_id)
            continue
        if role == "assistant":
            calls = message.get("tool_calls")
            if calls is not None and (not isinstance(calls, list) or not calls):
                problems.append(f"{where}.tool_calls: expected a non-empty array")
                calls = []
            calls = calls or []
            if content is None and not calls and not message.get("function_call"):
                problems.append(f"{where}.content: an assistant message without tool_calls "
                                "needs content")
            for j, call in enumerate(calls):
                problems += _openai_call(f"{where}.tool_calls[{j}]", call, seen_ids)
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    waiting.append(call["id"])
        elif content is None:
            problems.append(f"{where}.content: required in a {role} message")
        for key in ("tool_calls", "tool_call_id"):
            if key in message and role != ("assistant" if key == "tool_calls" else "tool"):
                problems.append(f"{where}.{key}: not allowed in a {role} message")
    if waiting:
        problems.append(f"messages: tool_call_ids without response messages: "
                        f"{', '.join(waiting)}")
    return problems


def _response_format(given: Any) -> list[str]:
    """Structured outputs: a named schema, an object at its root; strict, every object closed
    (``additionalProperties: false``) with every property required."""
    if given is None:
        return []
    if not isinstance(given, Mapping) or given.get("type") not in (
            "text", "json_object", "json_schema"):
        return [f"response_format: invalid {given!r}"]
    if given["type"] != "json_schema":
        return []
    spec = given.get("json_schema")
    if not isinstance(spec, Mapping):
        return ["response_format.json_schema: required"]
    problems = []
    name = spec.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        problems.append(f"response_format.json_schema.name: {name!r} does not match "
                        "'^[a-zA-Z0-9_-]{1,64}$'")
    schema = spec.get("schema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        problems.append("Invalid schema for response_format: schema must be a JSON Schema of "
                        "'type: \"object\"'")
    elif spec.get("strict"):
        problems += _strict_objects("response_format.json_schema.schema", schema)
    return problems


def _strict_objects(where: str, schema: Any) -> list[str]:
    if isinstance(schema, list):
        return [p for i, s in enumerate(schema) for p in _strict_objects(f"{where}[{i}]", s)]
    if not isinstance(schema, Mapping):
        return []
    problems = []
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: 'additionalProperties' is required to be supplied and "
                            "to be false (strict)")
        properties = schema.get("properties") or {}
        if set(schema.get("required") or ()) != set(properties):
            problems.append(f"{where}: 'required' is required to be supplied and to be an "
                            "array including every key in properties (strict)")
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            problems += [p for k, v in value.items() for p in _strict_objects(f"{where}.{k}", v)]
        elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems"):
            problems += _strict_objects(f"{where}.{key}", value)
    return problems


def _openai_call(where: str, call: Any, seen: set[str]) -> list[str]:
    if not isinstance(call, Mapping):
        return [f"{where}: expected an object"]
    problems = []
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        problems.append(f"{where}.id: required")
    elif call_id in seen:
        problems.append(f"{where}.id: duplicate tool_call id {call_id!r} in the request")
    else:
        seen.add(call_id)
    if len(call_id or "") > 40:
        problems.append(f"{where}.id: string too long")
    if call.get("type") != "function":
        problems.append(f"{where}.type: expected 'function'")
    function = call.get("function")
    if not isinstance(function, Mapping):
        return [*problems, f"{where}.function: required"]
    name = function.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        problems.append(f"{where}.function.name: {name!r} does not match "
                        "'^[a-zA-Z0-9_-]{1,64}$'")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        problems.append(f"{where}.function.arguments: expected a string, got {arguments!r}")
    else:
        try:
            strict_json(arguments)
        except ValueError:
            problems.append(f"{where}.function.arguments: not JSON: {arguments[:60]!r}")
    return problems


# -- Anthropic ------------------------------------------------------------------------------------


def _text_block(where: str, block: Mapping[str, Any]) -> list[str]:
    text = block.get("text")
    if not isinstance(text, str) or not text:
        return [f"{where}: text content blocks must be non-empty"]
    if text.isspace():
        return [f"{where}: text content blocks must contain non-whitespace text"]
    return []


def _anthropic_tools(body: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    problems: list[str] = []
    names: set[str] = set()
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return [f"tools: expected an array, got {tools!r}"], names
        for i, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                problems.append(f"tools.{i}: expected an object")
                continue
            if tool.get("type") not in (None, "custom"):
                names.add(str(tool.get("name")))  # a server tool (web search...)
                continue
            name = tool.get("name")
            if not isinstance(name, str) or not _TOOL_NAME.match(name):
                problems.append(f"tools.{i}.custom.name: String should match pattern "
                                f"'^[a-zA-Z0-9_-]{{1,64}}$' ({name!r})")
            elif name in names:
                problems.append(f"tools: Tool names must be unique ({name!r})")
            else:
                names.add(name)
            schema = tool.get("input_schema")
            if not isinstance(schema, Mapping) or schema.get("type") != "object":
                problems.append(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
            elif schema.keys() & {"oneOf", "allOf", "anyOf"}:
                problems.append(f"tools.{i}.custom.input_schema: input_schema does not support "
                                "oneOf, allOf, or anyOf at the top level")
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, Mapping) else None
        if kind not in ("auto", "any", "tool", "none"):
            problems.append(f"tool_choice: invalid {choice!r}")
        elif kind == "tool" and choice.get("name") not in names:
            problems.append(f"tool_choice.name: names no tool that was given: {choice!r}")
        thinking = body.get("thinking")
        if kind in ("any", "tool") and isinstance(thinking, Mapping) and thinking.get(
                "type") in ("enabled", "adaptive"):
            problems.append("Thinking may not be enabled when tool_choice forces tool use.")
    return problems, names


def _anthropic_system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return [f"system: expected a string or an array of text blocks, got {system!r}"]
    problems = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"system.{i}: expected a text block")
        else:
            problems += _text_block(f"system.{i}", block)
    return problems


def anthropic_problems(body: Mapping[str, Any],
                       given: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """Why the Anthropic Messages API would refuse ``body`` (empty: it takes it); ``given``:
    the thinking blocks the server gave, by signature, which must come back unchanged."""
    problems, _ = _anthropic_tools(body)
    problems += _anthropic_system(body.get("system"))
    if not body.get("model"):
        problems.append("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        problems.append(f"max_tokens: Field required (an integer >= 1), got {max_tokens!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: at least one message is required"]
    ids: set[str] = set()
    uses: list[str] = []  # the tool_use ids of the previous assistant turn
    used_any = False
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: expected an object")
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant' ({role!r})")
            continue
        if i == 0 and role != "user":
            problems.append(f"{where}: first message must use the \"user\" role")
        if i > 0 and isinstance(messages[i - 1], Mapping) and messages[i - 1].get(
                "role") == role:
            problems.append(f"{where}: roles must alternate between \"user\" and \"assistant\"")
        content = message.get("content")
        last = i == len(messages) - 1
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = content
        else:
            problems.append(f"{where}.content: expected a string or an array")
            continue
        if not blocks and not (last and role == "assistant"):
            problems.append(f"{where}: all messages must have non-empty content except for "
                            "the optional final assistant message")
        results_done = False
        answered: list[str] = []
        for j, block in enumerate(blocks):
            at = f"{where}.content.{j}"
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                problems += _text_block(at, block)
                results_done = True
            elif kind == "tool_use":
                used_any = True
                if role != "assistant":
                    problems.append(f"{at}: tool_use blocks only in assistant messages")
                    continue
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not _ANTHROPIC_ID.match(call_id):
                    problems.append(f"{at}.id: String should match pattern "
                                    f"'^[a-zA-Z0-9_-]+$' ({call_id!r})")
                elif call_id in ids:
                    problems.append(f"{at}: `tool_use` ids must be unique ({call_id!r})")
                ids.add(str(call_id))
                if not isinstance(name, str) or not _TOOL_NAME.match(name):
                    problems.append(f"{at}.name: String should match pattern "
                                    f"'^[a-zA-Z0-9_-]{{1,64}}$' ({name!r})")
                if not isinstance(block.get("input"), Mapping):
                    problems.append(f"{at}.input: Input should be a valid dictionary")
            elif kind == "tool_result":
                if role != "user":
                    problems.append(f"{at}: tool_result blocks only in user messages")
                    continue
                if results_done:
                    problems.append(f"{at}: tool_result blocks must come first in the user "
                                    "message, before any other content")
                call_id = block.get("tool_use_id")
                if call_id not in uses or call_id in answered:
                    problems.append(
                        f"{at}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{call_id}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message.")
                answered.append(str(call_id))
                problems += _tool_result(at, block)
            elif kind in ("thinking", "redacted_thinking"):
                if role != "assistant":
                    problems.append(f"{at}: thinking blocks only in assistant messages")
                elif kind == "thinking" and given is not None and given.get(
                        str(block.get("signature"))) != dict(block):
                    problems.append(f"{at}: thinking block was changed or is not one the "
                                    "model gave (invalid signature)")
            elif kind == "image":
                if role != "user":
                    problems.append(f"{at}: image blocks only in user messages")
                results_done = True
            else:
                problems.append(f"{at}.type: unknown block type {kind!r}")
        missing = [u for u in uses if u not in answered]
        if missing:
            problems.append(
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message.")
        uses = [b["id"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"
                and isinstance(b.get("id"), str)] if role == "assistant" else []
        if role == "assistant" and last and blocks:
            final = blocks[-1]
            if isinstance(final, Mapping) and final.get("type") == "text" and str(
                    final.get("text", "")).rstrip() != final.get("text"):
                problems.append(f"{where}: final assistant content cannot end with trailing "
                                "whitespace")
    final = messages[-1]
    if isinstance(final, Mapping) and final.get("role") == "assistant":
        # Claude 4.6 and later (and any model with thinking on) take no prefill
        problems.append("This model does not support assistant message prefill. The "
                        "conversation must end with a user message.")
    if uses:
        problems.append(f"messages: `tool_use` ids without `tool_result` blocks after them: "
                        f"{', '.join(uses)}")
    if used_any and body.get("tools") is None:
        problems.append("Requests which include `tool_use` or `tool_result` blocks must define "
                        "tools.")
    return problems


def _tool_result(at: str, block: Mapping[str, Any]) -> list[str]:
    content = block.get("content")
    if content is None or isinstance(content, str):
        if block.get("is_error") and not content:
            return [f"{at}: content cannot be empty if `is_error` is true"]
        return []
    if not isinstance(content, list):
        return [f"{at}.content: expected a string or an array"]
    problems = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            problems += _text_block(f"{at}.content.{k}", part)
        elif kind not in ("image", "document", "search_result"):
            problems.append(f"{at}.content.{k}.type: {kind!r} is not allowed in a tool_result")
    if block.get("is_error") and not content:
        problems.append(f"{at}: content cannot be empty if `is_error` is true")
    return problems


# -- the server -----------------------------------------------------------------------------------


class StrictServer(ModelServer):
    """`ModelServer` that answers each request breaking the real API's rules 400, with the
    real API's error body, without taking a reply from its script; ``refused`` holds each
    such request and its problems."""

    def __init__(self, *script: Any, model: str = "test-model") -> None:
        super().__init__(*script, model=model)
        self.refused: list[tuple[Request, list[str]]] = []
        self.thoughts: dict[str, dict[str, Any]] = {}
        """The thinking blocks this server gave, by signature."""

    def reset(self) -> None:
        """Forget what earlier tests sent and left scripted: a module shares one server."""
        with self._lock:
            self.requests.clear()
            self.refused.clear()
            self.problems.clear()
            self._script.clear()

    def _next(self, request: Request) -> Any:
        if request.api == "openai":
            problems = openai_problems(request.body)
        else:
            problems = anthropic_problems(request.body, self.thoughts)
        if not problems:
            return super()._next(request)
        with self._lock:
            self.requests.append(request)
            self.refused.append((request, problems))
        message = "; ".join(problems)
        if request.api == "openai":
            error = {"error": {"message": message, "type": "invalid_request_error",
                               "param": None, "code": None}}
        else:
            error = {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": message}}
        return Raw(body=error, status=400)

    def _anthropic_message(self, turn: Turn, thinks: bool = False) -> dict[str, Any]:
        out = super()._anthropic_message(turn, thinks)
        for block in out["content"]:
            if block["type"] == "thinking":
                self.thoughts[block["signature"]] = dict(block)
        return out
