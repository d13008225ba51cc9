"""An MCP server (official SDK, `MCPServer`) whose tools' schemas use what pydantic writes for
real signatures: ``$defs``/``$ref`` (nested and recursive models, arrays of them), ``anyOf``
with ``null``, enums (an `Enum`, a `Literal`), ``additionalProperties`` (a dict), ``format``
(``date-time``, ``date``, ``uri``), bounds, a ``pattern``, a discriminated union and defaults.

Run: ``python schemas_server.py stdio``. Every tool answers, as JSON, the arguments it got as
pydantic read them, so a test sees what reached the server.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import AnyUrl, BaseModel, Field

server = MCPServer("schemas", log_level="WARNING")
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Priority(enum.Enum):
    low = "low"
    normal = "normal"
    high = "high"


class Address(BaseModel):
    street: str
    city: str
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]
    country: str = "US"


class Item(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1, le=100)] = 1


class Order(BaseModel):
    items: Annotated[list[Item], Field(min_length=1)]
    ship_to: Address
    bill_to: Address | None = None


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Circle(BaseModel):
    kind: Literal["circle"] = "circle"
    radius: float


class Square(BaseModel):
    kind: Literal["square"] = "square"
    side: float


def _answer(**values: Any) -> str:
    return json.dumps({k: v.model_dump(mode="json") if isinstance(v, BaseModel) else (
        [x.model_dump(mode="json") if isinstance(x, BaseModel) else x for x in v]
        if isinstance(v, list) else v.value if isinstance(v, enum.Enum) else
        v.isoformat() if isinstance(v, (dt.date, dt.datetime)) else
        str(v) if isinstance(v, AnyUrl) else v) for k, v in values.items()}, sort_keys=True)


@server.tool(annotations=READ, structured_output=False)
def place_order(order: Order, priority: Priority = Priority.normal, note: str | None = None,
                tags: list[str] | None = None) -> str:
    """Place an order (nested models through $ref, an array of objects, an enum, nulls)."""
    return _answer(order=order, priority=priority, note=note, tags=tags or [])


@server.tool(annotations=READ, structured_output=False)
def set_limits(limits: dict[str, int], ratio: Annotated[float, Field(gt=0, le=1)] = 0.5) -> str:
    """Set named limits (an object of additionalProperties)."""
    return _answer(limits=limits, ratio=ratio)


@server.tool(annotations=READ, structured_output=False)
def schedule(when: dt.datetime, day: dt.date, site: AnyUrl,
             mode: Literal["once", "daily"] = "once") -> str:
    """Schedule a visit (formats date-time, date, uri; a Literal's enum)."""
    return _answer(when=when, day=day, site=site, mode=mode)


@server.tool(annotations=READ, structured_output=False)
def grow(tree: Node) -> str:
    """Count a tree's nodes (a recursive $ref)."""

    def count(node: Node) -> int:
        return 1 + sum(count(c) for c in node.children)

    return _answer(tree=tree, nodes=count(tree))


@server.tool(annotations=READ, structured_output=False)
def area(shape: Annotated[Circle | Square, Field(discriminator="kind")]) -> str:
    """The area of a shape (a discriminated union: oneOf of refs)."""
    value = 3.14159 * shape.radius ** 2 if isinstance(shape, Circle) else shape.side ** 2
    return _answer(shape=shape, area=round(value, 3))


@server.tool(annotations=READ, structured_output=False)
def ping() -> str:
    """No arguments at all."""
    return "pong"


if __name__ == "__main__":
    server.run("stdio")
