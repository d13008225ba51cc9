"""A person's edit of an MCP tool's call is checked as the tool checks its arguments."""

from __future__ import annotations

import pytest

from jianmu.errors import ApprovalEditError, ToolInputError
from jianmu.guard.checkers import ConfirmChecker
from jianmu.guard.enforcer import Decision
from jianmu.mcp.data import MCPToolInfo
from jianmu.mcp.provider import MCPTool
from jianmu.nodes.tool_executor import input_schema_of
from jianmu.runtime import Interaction
from jianmu.tools.calls import ToolCall


def test_an_edit_with_an_argument_the_mcp_tool_refuses_is_refused_when_approved() -> None:
    """Fixed here: an MCP tool takes only the properties its schema names (Jianmu's own
    dialect), while the kept schema, read as JSON Schema, took any: the edit was approved and
    the call then failed."""
    info = MCPToolInfo(name="send", input_schema={
        "type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]})
    tool = MCPTool(None, info, server="mail", name="mail_send", timeout=5)  # type: ignore[arg-type]
    with pytest.raises(ToolInputError, match="unknown argument 'bcc'"):
        tool.validate_args({"to": "ann", "bcc": "eve"})
    call = ToolCall(id="c", name="mail_send", arguments={"to": "ann"})
    interaction = Interaction()
    interaction.suspend(ConfirmChecker.request_for(
        call, Decision.pending("confirm"), parameters=input_schema_of(tool)))

    with pytest.raises(ApprovalEditError, match="'bcc' was unexpected"):
        interaction.approve("c", arguments={"to": "bob", "bcc": "eve"})
    interaction.approve("c", arguments={"to": "bob"})
    assert interaction.decision("c").arguments == {"to": "bob"}  # type: ignore[union-attr]
