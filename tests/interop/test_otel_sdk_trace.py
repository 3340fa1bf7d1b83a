"""One trace across sync_worker and the published SDK (2.12), over the dev server keeping trace context:

* a run started by the SDK's client (with its ``ExecutionTelemetry``) inside a caller's span runs on
  our instrumented worker: our spans continue the caller's trace;
* a run started by our instrumented client runs on the SDK's worker (``ExecutionTelemetry``
  interceptor): the SDK's ``durable.workflow.task`` and activity spans are children of our
  ``StartWorkflow`` span.

So the carrier we send and read is the one the SDK sends and reads.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Iterator, List

import pytest
from durable_workflow import Client as SdkClient
from durable_workflow import Worker as SdkWorker
from durable_workflow.telemetry import ExecutionTelemetry
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sync_worker.client import Client
from sync_worker.contrib.opentelemetry import SyncWorkerInstrumentor
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests.e2e._worker_support import RunningWorker
from tests.interop import _sdk_authored_workflows as sdk_module
from tests.interop._sdk import run
from tests.interop.test_import_swap import load_swapped_module


@pytest.fixture
def traced() -> Iterator[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SyncWorkerInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider, exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def _in_trace(spans: List[ReadableSpan], trace_id: int) -> List[ReadableSpan]:
    return [s for s in spans if s.context.trace_id == trace_id]


def test_a_run_started_by_the_sdk_client_continues_its_trace_on_our_worker(traced: Any) -> None:
    provider, exporter = traced
    ours = load_swapped_module()
    queue = f"otel-sdk-{uuid.uuid4().hex[:8]}"
    with DevServer(trace_context=True) as server, Client(server.url) as client:
        worker = Worker(client, task_queue=queue, workflows=[ours.Child], activities=[ours.double], poll_timeout=1.0)
        with RunningWorker(worker):
            async def drive() -> Any:
                sdk = SdkClient(server.url, telemetry=ExecutionTelemetry(tracer_provider=provider))
                try:
                    await sdk.get_cluster_info()  # the SDK sends its carrier once it saw the capability
                    with provider.get_tracer("caller").start_as_current_span("sdk caller") as caller:
                        handle = await sdk.start_workflow(workflow_type="interop.swap.child", task_queue=queue,
                                                          workflow_id=f"otel-sdk-{uuid.uuid4().hex[:8]}",
                                                          input=[21])
                    return caller, await sdk.get_result(handle, timeout=30)
                finally:
                    await sdk.aclose()

            caller, result = run(drive())
    assert result == {"child_of": 21, "doubled": 42}
    trace_id = caller.get_span_context().trace_id
    spans = _in_trace(list(exporter.get_finished_spans()), trace_id)
    names = [s.name for s in spans]
    assert "RunWorkflow:interop.swap.child" in names and "RunActivity:interop.swap.double" in names, names
    run_span = next(s for s in spans if s.name == "RunWorkflow:interop.swap.child")
    assert run_span.parent is not None and run_span.parent.span_id == caller.get_span_context().span_id


def test_a_run_started_by_our_client_continues_its_trace_on_the_sdk_worker(traced: Any) -> None:
    provider, exporter = traced
    queue = f"otel-sdk-w-{uuid.uuid4().hex[:8]}"
    with DevServer(trace_context=True) as server, Client(server.url) as client:
        async def serve_and_drive() -> Any:
            sdk = SdkClient(server.url)
            worker = SdkWorker(sdk, task_queue=queue, workflows=[sdk_module.Child], activities=[sdk_module.double],
                               poll_timeout=1.0, shutdown_timeout=10.0,
                               interceptors=[ExecutionTelemetry(tracer_provider=provider)])
            runner = asyncio.create_task(worker.run())
            try:
                def ours() -> Any:
                    handle = client.start_workflow("interop.swap.child", 5, task_queue=queue)
                    return handle.result(timeout=30, poll_interval=0.1)

                return await asyncio.to_thread(ours)
            finally:
                await worker.stop()
                await asyncio.wait_for(runner, timeout=15)
                await sdk.aclose()

        result = run(serve_and_drive())
    assert result == {"child_of": 5, "doubled": 10}
    spans = list(exporter.get_finished_spans())
    start = next(s for s in spans if s.name == "StartWorkflow:interop.swap.child")
    theirs = [s for s in spans if s.name.startswith("durable.")]
    assert theirs, [s.name for s in spans]
    assert {s.context.trace_id for s in theirs} == {start.context.trace_id}
    tasks = [s for s in theirs if s.name == "durable.workflow.task"]
    assert tasks and all(s.parent is not None and s.parent.span_id == start.context.span_id for s in tasks)
