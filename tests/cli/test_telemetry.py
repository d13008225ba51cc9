"""``telemetry.exporter``: the CLI's runs send their spans to the console or over OTLP/HTTP, with
``service.name`` from ``telemetry.service_name``, flushed however the command ends."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import (
    REPO,
    SHIPPED_SKILLS,
    Project,
    assert_clean_error,
    make_config,
    pending_of,
)
from tests.cli.test_bad_input import interrupted_blocking_run, run_id_of
from tests.cli.test_run import AGENT_SCRIPT

APPROVAL_FLOW = str(REPO / "examples" / "approval_flow.py")


def _configure(project: Project, telemetry: str) -> None:
    project.config = make_config(project.root, f"telemetry:\n{telemetry}")


def console_spans(text: str) -> list[dict[str, Any]]:
    """The spans the console exporter wrote into ``text`` (one JSON object each)."""
    decoder = json.JSONDecoder()
    spans, at = [], 0
    while (start := text.find("{\n", at)) != -1:
        try:
            value, at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at = start + 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
    return spans


def test_console_exporter_writes_the_runs_spans_with_the_service_name(project: Project) -> None:
    _configure(project, "  exporter: console\n  service_name: billing-bot\n")
    project.write("agent.py", AGENT_SCRIPT)
    done = project.jianmu("run", "agent.py", "--input", "question=What is 17 * 23?")
    assert done.code == 0, done.text
    assert "result: 17 * 23 = 391" in done.out
    spans = console_spans(done.err)  # standard error: standard output is the command's
    assert console_spans(done.out) == []
    names = [s["name"] for s in spans]
    assert names.count("chat scripted") == 2, names
    assert {"invoke_workflow ReAct", "invoke_agent ReAct", "execute_tool calculator"} <= set(names)
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"billing-bot"}
    by_name = {s["name"]: s for s in spans}
    workflow, agent = by_name["invoke_workflow ReAct"], by_name["invoke_agent ReAct"]
    assert workflow["parent_id"] is None
    assert agent["parent_id"] == workflow["context"]["span_id"]
    assert by_name["execute_tool calculator"]["parent_id"] == agent["context"]["span_id"]
    assert by_name["execute_tool calculator"]["attributes"]["gen_ai.tool.name"] == "calculator"
    assert len({s["context"]["trace_id"] for s in spans}) == 1


def test_no_exporter_by_default_writes_no_span(project: Project) -> None:
    project.write("agent.py", AGENT_SCRIPT)
    done = project.jianmu("run", "agent.py", "--input", "question=What is 17 * 23?")
    assert done.code == 0, done.text
    assert console_spans(done.text) == []


def test_a_suspended_run_and_its_resume_each_flush_their_spans(project: Project) -> None:
    _configure(project, "  exporter: console\n")
    first = project.jianmu("run", APPROVAL_FLOW, "--input", "note=traced", "--non-interactive")
    run_id, (call,) = pending_of(first.out)
    suspended = [s for s in console_spans(first.err) if s["name"].startswith("invoke_workflow")]
    assert [s["attributes"]["jianmu.run.status"] for s in suspended] == ["suspended"], first.err
    done = project.jianmu("resume", run_id, "--approve", call)
    assert done.code == 0, done.text
    resumed = [s for s in console_spans(done.err) if s["name"].startswith("invoke_workflow")]
    assert [s["attributes"]["jianmu.run.status"] for s in resumed] == ["success"], done.err
    assert resumed[0]["attributes"]["jianmu.run.id"] == run_id
    # in another process, the resumed run links to the run that suspended (its checkpoint's)
    (link,) = resumed[0]["links"]
    assert link["context"]["span_id"] == suspended[0]["context"]["span_id"]
    assert link["context"]["trace_id"] == suspended[0]["context"]["trace_id"]


def test_ctrl_c_still_flushes_the_spans_of_the_stopped_run(project: Project) -> None:
    _configure(project, "  exporter: console\n")
    code, seen, rest, err = interrupted_blocking_run(project)
    assert code == 4 and "interrupted" in rest, seen + rest + err
    runs = [s for s in console_spans(err) if s["name"] == "invoke_workflow blocking"]
    assert len(runs) == 1, err
    assert runs[0]["attributes"]["jianmu.run.id"] == run_id_of(seen)


def test_an_applications_own_global_provider_is_kept(project: Project) -> None:
    """A script that set the global provider gets the run's spans; Jianmu builds none."""
    _configure(project, "  exporter: console\n  service_name: from-jianmu\n")
    project.write("own.py", '''
import sys
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "the-apps-own"}))
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
trace.set_tracer_provider(provider)
''' + AGENT_SCRIPT)
    done = project.jianmu("run", "own.py", "--input", "question=What is 17 * 23?")
    assert done.code == 0, done.text
    spans = console_spans(done.err)
    assert "invoke_workflow ReAct" in [s["name"] for s in spans]
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"the-apps-own"}


def test_otlp_without_its_extra_says_which_to_install(project: Project) -> None:
    _configure(project, "  exporter: otlp\n")
    project.write("agent.py", AGENT_SCRIPT)
    done = project.jianmu("run", "agent.py", "--input", "question=x",
                          without=["opentelemetry.exporter.otlp.proto.http"])
    assert_clean_error(done, 1, "opentelemetry-exporter-otlp-proto-http",
                       "pip install 'jianmu[otlp]'")
    assert "run " not in done.out  # nothing ran, nothing was saved
    assert not (project.root / ".jianmu" / "runs.sqlite").exists()


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    """An OTLP/HTTP receiver on 127.0.0.1: its URL, and every request it got (path, headers,
    body)."""
    got: list[tuple[str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_otlp_exporter_sends_the_spans_over_http(
    project: Project, receiver: tuple[str, list[tuple[str, dict[str, str], bytes]]],
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    url, got = receiver
    _configure(project, "  exporter: otlp\n  service_name: over-the-wire\n")
    project.write("agent.py", AGENT_SCRIPT)
    done = project.jianmu("run", "agent.py", "--input", "question=What is 17 * 23?", env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,  # the standard variables: /v1/traces added
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=agents",
    })
    assert done.code == 0, done.text
    assert got, "no OTLP request reached the receiver"  # sent before the command ended
    names, services = [], set()
    for path, headers, body in got:
        assert path == "/v1/traces"
        assert headers["content-type"] == "application/x-protobuf"
        assert headers["x-team"] == "agents"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes
                         if a.key == "service.name"}
            names += [s.name for scope in resource_spans.scope_spans for s in scope.spans]
    assert services == {"over-the-wire"}
    assert {"invoke_workflow ReAct", "invoke_agent ReAct", "chat scripted",
            "execute_tool calculator"} <= set(names)


@pytest.mark.anyio
async def test_mcp_serve_over_stdio_sends_a_skills_spans_to_stderr_not_the_channel(
    project: Project, tmp_path: Path,
) -> None:
    """Standard output is the MCP channel: the console's spans go to standard error, and the
    server still speaks MCP; the spans of a BT skill run are written by the time it stops."""
    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import stdio_client

    _configure(project, "  exporter: console\n  service_name: mcp-side\n"
                        "guard:\n  tool_policy:\n    write_file: allow\n")
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "jianmu.cli", "mcp", "serve", "--skills-dir", str(SHIPPED_SKILLS),
              "--config", str(project.config)],
        env={"PYTHONPATH": str(REPO)}, cwd=str(project.root),
    )
    errors = tmp_path / "server-stderr.txt"
    with errors.open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                mcp.ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(
                "run_bt_skill", {"skill": "workspace-report", "inputs": {"folder": "src"}})
            assert not result.is_error, result
    spans = console_spans(errors.read_text(encoding="utf-8"))
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"mcp-side"}
    by_name = {s["name"]: s for s in spans}
    call = by_name["execute_tool run_bt_skill"]  # the host's call, the skill's work inside it
    assert call["parent_id"] is None
    assert "gen_ai.tool.call.arguments" not in call["attributes"]  # capture_content is off
    assert by_name["execute_tool write_file"]["context"]["trace_id"] == \
        call["context"]["trace_id"]
