"""The run span, from a tracer provider that is passed in (never the global one)."""

from __future__ import annotations

import py_trees
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import ReactiveRunner
from jianmu.runtime.events import GEN_AI_AGENT_NAME, GEN_AI_OPERATION_NAME

pytestmark = pytest.mark.anyio


async def test_run_opens_invoke_workflow_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tree = py_trees.behaviours.Success("Tree")
    result = await ReactiveRunner(tree, tracer_provider=provider).run()
    (span,) = exporter.get_finished_spans()
    assert span.name == "invoke_workflow Tree"
    assert span.attributes[GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert span.attributes[GEN_AI_AGENT_NAME] == "Tree"
    assert span.attributes["jianmu.run.status"] == result.status.value
