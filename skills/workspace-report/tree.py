"""The workspace-report tree: glob → file_info per file → grep → Markdown → write_file."""

from __future__ import annotations

import re
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu.runtime import AsyncNode
from jianmu.skills import BTSkillContext, GuardedToolNode
from jianmu.tools import Tool

_MATCH_LINE = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+):(?P<text>.*)$")


class SetState(AsyncNode):
    """Write fixed values (the tools' arguments) into the skill's namespace."""

    def __init__(self, name: str, values: dict[str, Any]) -> None:
        super().__init__(name)
        self.values = values

    async def update_async(self) -> Status:
        self.state.update(self.values)
        return Status.SUCCESS


def _listed(text: Any) -> list[str]:
    """The paths of a glob_search listing (its 'No files match' note is not a path)."""
    if not isinstance(text, str) or text.startswith("No files match"):
        return []
    return [line for line in text.splitlines() if line.strip()]


class DescribeFiles(GuardedToolNode):
    """Run file_info (through the guard) for each listed file; collect the facts."""

    def __init__(self, tool: Tool, limit: int) -> None:
        super().__init__("describe_files", tool, input_key="info_args", output_key="info_out")
        self.limit = limit

    async def update_async(self) -> Status:
        facts = []
        for path in _listed(self.state.get("listing"))[: self.limit]:
            self.state.write_port("info_args", {"path": path})
            status = await super().update_async()
            if status is not Status.SUCCESS:
                return status
            facts.append(self.state.get("info_out"))
        self.state.write_port("facts", facts)
        return Status.SUCCESS


class RenderReport(AsyncNode):
    """Turn the listing, the facts and the matches into Markdown and the write's arguments."""

    def __init__(self, inputs: dict[str, Any]) -> None:
        super().__init__("render_report")
        self.inputs = inputs

    async def update_async(self) -> Status:
        files = _listed(self.state.get("listing"))
        facts = [f for f in self.state.get("facts") or [] if isinstance(f, dict)]
        matches = [m for m in (self.state.get("matches_out") or "").splitlines()
                   if _MATCH_LINE.match(m)]
        total_bytes = sum(int(f.get("size") or 0) for f in facts)
        total_lines = sum(int(f.get("lines") or 0) for f in facts)
        out = [
            f"# Workspace report: `{self.inputs['folder']}`",
            "",
            f"- files matching `{self.inputs['include']}`: {len(files)}",
            f"- described: {len(facts)} ({total_bytes} bytes, {total_lines} lines)",
            f"- lines matching `{self.inputs['pattern']}`: {len(matches)}",
            "",
            "## Files",
            "",
            "| path | bytes | lines | encoding |",
            "| --- | ---: | ---: | --- |",
        ]
        out += [
            f"| {f.get('path')} | {f.get('size', '')} | {f.get('lines', '')} | "
            f"{f.get('encoding', '')} |"
            for f in facts
        ]
        out += ["", f"## Matches of `{self.inputs['pattern']}`", ""]
        out += [f"- `{m}`" for m in matches] or ["None."]
        self.state.update({
            "report_args": {"path": self.inputs["report"], "content": "\n".join(out) + "\n"},
            "stats": {"files": len(files), "matches": len(matches),
                      "total_bytes": total_bytes, "total_lines": total_lines},
        })
        return Status.SUCCESS


class Finish(AsyncNode):
    """Write the skill's structured result."""

    def __init__(self, report: str, result_key: str) -> None:
        super().__init__("finish")
        self.report = report
        self.result_key = result_key

    async def update_async(self) -> Status:
        self.state.write_port(self.result_key, {"report": self.report, **self.state.get("stats")})
        return Status.SUCCESS


def build_tree(ctx: BTSkillContext) -> py_trees.behaviour.Behaviour:
    """The skill's tree for the resolved inputs."""
    inputs = ctx.inputs
    root = py_trees.composites.Sequence("workspace-report", memory=True)
    root.add_children([
        SetState("arguments", {
            "glob_args": {"pattern": inputs["include"], "root": inputs["folder"]},
            "grep_args": {"pattern": inputs["pattern"], "path": inputs["folder"],
                          "max_matches": 1000},
        }),
        ctx.tool_node("glob_search", name="list_files", input_key="glob_args",
                      output_key="listing"),
        DescribeFiles(ctx.tool("file_info"), inputs["max_files"]),
        ctx.tool_node("grep_search", name="find_matches", input_key="grep_args",
                      output_key="matches_out"),
        RenderReport(inputs),
        ctx.tool_node("write_file", name="write_report", input_key="report_args",
                      output_key="written", confirm=True),
        Finish(inputs["report"], ctx.skill_result_key),
    ])
    return root
