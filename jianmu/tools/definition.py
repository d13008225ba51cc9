"""`ToolDefinitionMixin`: how a tool presents itself — its object schema, the definitions each
model API and MCP take, and the registration check (seed 002)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jianmu.tools._export import check_definition, to_mcp_annotations, to_strict_schema
from jianmu.tools.schema import wrap_parameters

__all__ = ("ToolDefinitionMixin",)


class ToolDefinitionMixin:
    """The schema and export methods of `jianmu.tools.Tool`, over its class attributes."""

    name: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    category: str
    permission: str
    parallel_safe: bool | None
    effect_tags: tuple[str, ...]
    timeout_seconds: float | None
    idempotent: bool | None
    max_retries: int | None
    max_result_length: int
    tags: tuple[str, ...]
    version: str
    examples: tuple[str, ...]
    deprecated: bool
    metadata: Mapping[str, Any]
    sandboxed: bool
    get_description: Callable[[], str]
    _signature_params: Callable[[], frozenset[str] | None]

    @property
    def parameters(self) -> dict[str, Any]:
        """The input schema as an object schema (non-object schemas wrapped as ``input``)."""
        cached = self.__dict__.get("_jm_params")
        if cached is not None and cached[0] is self.input_schema:
            return cached[1]  # type: ignore[no-any-return]
        params = wrap_parameters(self.input_schema)
        self.__dict__["_jm_params"] = (self.input_schema, params)
        return params

    @property
    def wraps_input(self) -> bool:
        """Whether ``input_schema`` is not an object and ``run`` takes the single value."""
        return self.input_schema.get("type") != "object"

    def to_schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` for LLM function calling."""
        return {
            "name": self.name,
            "description": self.get_description(),
            "parameters": self.parameters,
        }

    def spec(self) -> dict[str, Any]:
        """Everything known about the tool, for prompts, UIs and documentation."""
        return {
            **self.to_schema(),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "returns": self.output_schema.get("description", ""),
            "category": self.category,
            "permission": self.permission,
            "parallel_safe": self.parallel_safe,
            "effect_tags": list(self.effect_tags),
            "timeout_seconds": self.timeout_seconds,
            "idempotent": self.idempotent,
            "max_retries": self.max_retries,
            "max_result_length": self.max_result_length,
            "tags": list(self.tags),
            "version": self.version,
            "examples": list(self.examples),
            "deprecated": self.deprecated,
            "metadata": dict(self.metadata),
            "sandboxed": self.sandboxed,
        }

    def to_openai(self, *, strict: bool = False) -> dict[str, Any]:
        """The OpenAI tool definition; ``strict=True`` gives a structured-outputs schema.

        Raises:
            ToolValidationError: ``strict=True`` and a parameter is a free-form object
                (``dict[str, X]``) or ``Any``, which strict mode cannot express.
        """
        function = self.to_schema()
        if strict:
            function["parameters"] = to_strict_schema(self.parameters, tool=self.name)
            function["strict"] = True
        return {"type": "function", "function": function}

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic tool definition: ``{"name", "description", "input_schema"}``."""
        return {
            "name": self.name,
            "description": self.get_description(),
            "input_schema": self.parameters,
        }

    def to_mcp(self) -> dict[str, Any]:
        """An MCP tool definition (a plain dict); annotations follow from the category."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.get_description(),
            "inputSchema": self.parameters,
            "annotations": to_mcp_annotations(
                category=self.category,
                effect_tags=self.effect_tags,
                idempotent=bool(self.idempotent),
                title=self.name,
            ),
        }
        output = self.output_schema
        if isinstance(output, dict) and output.get("type") == "object":
            out["outputSchema"] = output  # MCP only allows object output schemas
        return out

    def check_definition(self, *, require_parameter_descriptions: bool = False) -> list[str]:
        """Check the definition; raise on problems, return parameter-description warnings.

        Raises:
            ToolValidationError: listing every problem (name, description, schema, permission).
        """
        return check_definition(
            self,
            signature_params=self._signature_params(),
            require_parameter_descriptions=require_parameter_descriptions,
        )

