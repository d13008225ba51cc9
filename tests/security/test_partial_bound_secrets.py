"""What an author binds with `functools.partial` (an API key, a client, an environment) stays
out of the tool's schema, so it is never sent to the model's provider, and the model cannot
replace it: a bound keyword is not a parameter the model may pass."""

from __future__ import annotations

import asyncio
import functools
import json

from jianmu.tools import ToolSet, tool

KEY = "sk-live-B0und-K3y-0123456789"


def fetch(url: str, api_key: str = "") -> str:
    """Fetch a page with the service's key.

    Args:
        url: The page.
        api_key: The key the service needs.
    """
    return f"{url} fetched with {'the key' if api_key == KEY else 'another key'}"


def test_a_bound_key_is_neither_shown_to_the_model_nor_replaceable_by_it() -> None:
    made = tool(functools.partial(fetch, api_key=KEY))
    shown = json.dumps([made.parameters, made.description,
                        ToolSet.from_tools([made]).to_openai(),
                        ToolSet.from_tools([made]).to_anthropic()])
    assert KEY not in shown and "api_key" not in shown
    tools = ToolSet.from_tools([made])
    assert asyncio.run(tools.execute("fetch", {"url": "u"})).output == "u fetched with the key"
    forged = asyncio.run(tools.execute("fetch", {"url": "u", "api_key": "sk-attacker"}))
    assert not forged.ok and "unknown argument 'api_key'" in str(forged.error)
