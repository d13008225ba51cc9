"""Red team, MCP client: a server lists tools whose input schemas no model could call by.

A real server over stdio (tests/security/servers/given_shapes_server.py). Parameters named at
the schema's root (xLAM's shape) or beside ``properties`` were unknown keywords to JSON
Schema: the tool was offered to the model with no parameters and any call reached the server.
Each is refused now when listed, by the check every given schema passes
(`jianmu.tools._schema_shape.check_given_schema`), with a warning naming the tool and the
problem, as are ``properties: null``, a Python type name and a ``$ref`` loop; the server's
other tools stay. Arguments named ``__proto__``, ``constructor`` or ``self`` reach the server
as sent, and tools whose names meet once made safe (``get.item``, ``get_item``) each keep a
name of their own, calling their own tool.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest

from jianmu.errors import ToolUnavailableWarning
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "servers" / "given_shapes_server.py"


async def test_a_listing_s_uncallable_schemas_are_refused_by_name_and_the_rest_stay() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    provider = MCPToolProvider("given", command=sys.executable, args=[str(SERVER)],
                               trust="read_only", timeout=60, connect_timeout=60)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        said = {str(w.message).split("'")[1]: str(w.message) for w in caught
                if w.category is ToolUnavailableWarning}
        assert set(said) == {"given__root_params", "given__stray_param",
                             "given__null_properties", "given__python_types",
                             "given__ref_cycle"}, said
        assert "'query', 'limit' at the schema's root" in said["given__root_params"]
        assert "'limit' at the schema's root" in said["given__stray_param"]
        assert "at properties: None is not of type 'object'" in said["given__null_properties"]
        assert "'str' is not a JSON Schema type; write 'string'" in said["given__python_types"]
        assert "refers to itself" in said["given__ref_cycle"]
        # get_item needs no change to its name, so it keeps it though get.item comes first
        assert tools.names() == ["given__js_names", "given__get_item_6a292df8",
                                 "given__get_item", "given__GET-item", "given__echo"]
        sent = {"__proto__": "a", "constructor": "b", "self": "c"}
        done = await tools.execute("given__js_names", sent)
        assert done.ok and done.output == "js_names got " + json.dumps(sent, sort_keys=True)
        missing = await tools.execute("given__js_names", {"self": "c"})
        assert not missing.ok and "missing required argument '__proto__'" in str(missing.error)
        for name, remote in (("given__get_item_6a292df8", "get.item"),
                             ("given__get_item", "get_item"),
                             ("given__GET-item", "GET-item!")):
            called = await tools.execute(name, {})
            assert called.ok and called.output == f"{remote} got {{}}"
        assert (await tools.execute("given__echo", {"text": "hi"})).ok
    finally:
        await provider.close()
