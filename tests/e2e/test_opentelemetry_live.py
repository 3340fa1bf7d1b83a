"""OpenTelemetry end to end: our Client and Worker against the dev server keeping trace context,
spans caught by the OpenTelemetry SDK's in-memory exporter. Runs on threads and again under gevent
(``tests/gevent_suite.py``).

What is proved: a caller's span, the start, the run's tasks, its activities and its child run are
one trace; a signal's caller is a link; replay (cold, sticky, another worker, a query) adds no span
beyond one per task the server handed out; an incoming ``traceparent`` is the start's parent.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Dict, Iterator, List

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.contrib.opentelemetry import SyncWorkerInstrumentor
from sync_worker.devserver import DevServer
from sync_worker.interceptors import PassthroughWorkerInterceptor

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@activity.defn(name="e2e.otel.double")
def double(value: int) -> int:
    return value * 2


@workflow.defn(name="e2e.otel.child")
class Child:
    def run(self, ctx: Any, value: int) -> Any:
        result = yield ctx.schedule_activity("e2e.otel.double", [value])
        return result


@workflow.defn(name="e2e.otel.parent")
class Parent:
    def __init__(self) -> None:
        self.done = False
        self.seen: List[int] = []

    @workflow.signal("finish")
    def finish(self) -> None:
        self.done = True

    @workflow.query("seen")
    def current(self) -> List[int]:
        return list(self.seen)

    def run(self, ctx: Any, value: int, with_child: bool = True) -> Any:
        self.seen.append((yield ctx.schedule_activity("e2e.otel.double", [value])))
        if with_child:
            self.seen.append((yield ctx.start_child_workflow("e2e.otel.child", [value + 1])))
        yield ctx.wait_condition(lambda: self.done, key="finish")
        return self.seen


class TaskCount(PassthroughWorkerInterceptor):
    """How many workflow tasks each run really executed (what the spans must match)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: Dict[str, int] = {}

    def execute_workflow_task(self, context: Any, next: Any) -> Any:
        with self.lock:
            run_id = str(context.task.get("run_id"))
            self.runs[run_id] = self.runs.get(run_id, 0) + 1
        return next(context)


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer(trace_context=True, workflow_task_lease_seconds=10) as dev:
        yield dev


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SyncWorkerInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


@pytest.fixture
def client(server: DevServer) -> Iterator[Client]:
    c = Client(server.url)
    try:
        yield c
    finally:
        c.close()


def _named(finished: List[ReadableSpan], prefix: str, **attrs: Any) -> List[ReadableSpan]:
    return [s for s in finished if s.name.startswith(prefix)
            and all((s.attributes or {}).get(k) == v for k, v in attrs.items())]


def _one(finished: List[ReadableSpan], prefix: str, **attrs: Any) -> ReadableSpan:
    found = _named(finished, prefix, **attrs)
    assert len(found) == 1, (prefix, attrs, [s.name for s in finished])
    return found[0]


def _parent_id(span: ReadableSpan) -> int:
    assert span.parent is not None, span.name
    return span.parent.span_id


def test_a_view_the_start_the_run_its_activities_and_its_child_are_one_trace(
        client: Client, spans: InMemorySpanExporter) -> None:
    queue = unique_queue("otel")
    tracer = TracerProvider().get_tracer("test")  # any span context will do as the "view"
    worker = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double], poll_timeout=2.0)
    workflow_id = f"otel-{uuid.uuid4().hex}"
    with RunningWorker(worker):
        with tracer.start_as_current_span("GET /orders/42") as view:
            handle = client.start_workflow("e2e.otel.parent", 20, task_queue=queue, workflow_id=workflow_id)
        wait_for(lambda: client.query_workflow(workflow_id, "seen")["result"] == [40, 42], timeout=20)
        with tracer.start_as_current_span("POST /orders/42/finish"):
            handle.signal("finish")
        assert handle.result(timeout=20) == [40, 42]

    finished = list(spans.get_finished_spans())
    trace_id = view.get_span_context().trace_id
    start = _one(finished, "StartWorkflow:e2e.otel.parent")
    assert start.kind is SpanKind.CLIENT and _parent_id(start) == view.get_span_context().span_id
    assert start.context.trace_id == trace_id

    run = _one(finished, "RunWorkflow:e2e.otel.parent")
    assert _parent_id(run) == start.context.span_id
    attributes = run.attributes or {}
    assert attributes["workflow_instance_id"] == workflow_id and attributes["task_queue"] == queue
    run_id = attributes["workflow_run_id"]
    assert run_id == handle.run_id

    tasks = _named(finished, "WorkflowTask:e2e.otel.parent", workflow_run_id=run_id)
    assert tasks and all(s.context.trace_id == trace_id for s in tasks)
    assert sum(1 for s in tasks if _parent_id(s) == run.context.span_id) == 1  # the first task, inside the run
    assert all(_parent_id(s) == start.context.span_id for s in tasks if _parent_id(s) != run.context.span_id)

    activities = _named(finished, "RunActivity:e2e.otel.double", workflow_run_id=run_id)
    assert len(activities) == 1
    act = activities[0]
    assert act.context.trace_id == trace_id and _parent_id(act) == start.context.span_id
    assert (act.attributes or {})["activity_type"] == "e2e.otel.double"
    assert (act.attributes or {})["activity_attempt_number"] == 1

    signal = _one(finished, "SignalWorkflow:finish")
    linked = [s for s in tasks if any(link.context.span_id == signal.context.span_id for link in s.links)]
    assert len(linked) == 1  # the task that applied the signal links its caller

    child_tasks = _named(finished, "WorkflowTask:e2e.otel.child")
    assert child_tasks and all(s.context.trace_id == trace_id for s in child_tasks)
    parent_task_ids = {s.context.span_id for s in tasks}
    child_run = _one(finished, "RunWorkflow:e2e.otel.child")
    assert _parent_id(child_run) in parent_task_ids  # the task that started the child
    child_acts = _named(finished, "RunActivity:e2e.otel.double", workflow_run_id=(child_run.attributes or {})[
        "workflow_run_id"])
    assert len(child_acts) == 1 and child_acts[0].context.trace_id == trace_id

    query_spans = _named(finished, "HandleQuery:seen")
    assert query_spans and all(s.context.trace_id == trace_id for s in query_spans)


@pytest.mark.parametrize("sticky", [0, 16], ids=["cold", "sticky"])
def test_replay_adds_no_spans_beyond_one_per_task(client: Client, spans: InMemorySpanExporter, sticky: int) -> None:
    queue = unique_queue("otel-replay")
    count = TaskCount()
    first = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double], poll_timeout=1.0,
                        interceptors=[count], sticky_cache_capacity=sticky)
    workflow_id = f"otel-replay-{uuid.uuid4().hex}"
    with RunningWorker(first) as running:
        handle = client.start_workflow("e2e.otel.parent", 5, False, task_queue=queue, workflow_id=workflow_id)
        wait_for(lambda: client.query_workflow(workflow_id, "seen")["result"] == [10], timeout=20)
        for _ in range(3):  # each query replays the whole run: a query span, nothing else
            assert client.query_workflow(workflow_id, "seen")["result"] == [10]
        assert running.stop() is None
    # another worker picks the run up cold and replays it from the start
    second = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double], poll_timeout=1.0,
                         interceptors=[count], sticky_cache_capacity=sticky)
    with RunningWorker(second):
        handle.signal("finish")
        assert handle.result(timeout=20) == [10]

    finished = list(spans.get_finished_spans())
    run_id = handle.run_id
    assert len(_named(finished, "RunWorkflow:", workflow_run_id=run_id)) == 1
    assert len(_named(finished, "WorkflowTask:", workflow_run_id=run_id)) == count.runs[run_id]
    assert len(_named(finished, "RunActivity:", workflow_run_id=run_id)) == 1
    assert len(_named(finished, "HandleQuery:", workflow_run_id=run_id)) >= 4
    trace_ids = {s.context.trace_id for s in finished  # the worker's spans (a signal's caller is its own trace)
                 if (s.attributes or {}).get("workflow_run_id") == run_id and s.kind is not SpanKind.CLIENT}
    assert trace_ids == {_one(finished, "StartWorkflow:", workflow_instance_id=workflow_id).context.trace_id}


def test_an_incoming_traceparent_is_the_parent_of_the_start(client: Client, spans: InMemorySpanExporter) -> None:
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    remote = TraceContextTextMapPropagator().extract({"traceparent": incoming})
    from opentelemetry import context as otel_context

    token = otel_context.attach(remote)  # what a web framework's instrumentation does for a request
    try:
        handle = client.start_workflow("e2e.otel.parent", 1, task_queue=unique_queue("otel-in"),
                                       workflow_id=f"otel-in-{uuid.uuid4().hex}")
    finally:
        otel_context.detach(token)
    start = _one(list(spans.get_finished_spans()), "StartWorkflow:", workflow_instance_id=handle.workflow_id)
    assert start.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert _parent_id(start) == 0xB7AD6B7169203331 and start.parent is not None and start.parent.is_remote
    client.terminate_workflow(handle.workflow_id)


def test_without_server_trace_context_nothing_is_sent_and_tasks_start_their_own_traces(
        spans: InMemorySpanExporter) -> None:
    with DevServer() as plain, Client(plain.url) as client:
        queue = unique_queue("otel-plain")
        worker = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double],
                             poll_timeout=1.0)
        with RunningWorker(worker):
            handle = client.start_workflow("e2e.otel.parent", 3, False, task_queue=queue)
            wait_for(lambda: client.query_workflow(handle.workflow_id, "seen")["result"] == [6], timeout=20)
            handle.signal("finish")
            assert handle.result(timeout=20) == [6]
        run = plain.engine.current_run("default", handle.workflow_id)
        assert run is not None and run.get("observability_context") is None
    finished = list(spans.get_finished_spans())
    start = _one(finished, "StartWorkflow:", workflow_instance_id=handle.workflow_id)
    ours = [s for s in finished if (s.attributes or {}).get("workflow_run_id") == handle.run_id
            and s.kind is not SpanKind.CLIENT]
    assert ours and all(s.context.trace_id != start.context.trace_id for s in ours)
    assert len({s.context.trace_id for s in ours}) == len(ours) - 1  # each task its own (RunWorkflow: its first)
    assert len(_named(ours, "RunWorkflow:")) == 1 and len(_named(ours, "RunActivity:")) == 1


def test_the_worker_metrics_through_an_opentelemetry_meter_keep_the_prometheus_names(client: Client) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from sync_worker.contrib.opentelemetry import OpenTelemetryMetrics
    from sync_worker.runtime.metrics import TASK_DURATION, TASKS, InMemoryMetrics

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    also = InMemoryMetrics()
    queue = unique_queue("otel-metrics")
    worker = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double], poll_timeout=1.0,
                         metrics=OpenTelemetryMetrics(provider, also=also))
    with RunningWorker(worker):
        handle = client.start_workflow("e2e.otel.parent", 2, False, task_queue=queue)
        wait_for(lambda: client.query_workflow(handle.workflow_id, "seen")["result"] == [4], timeout=20)
        handle.signal("finish")
        assert handle.result(timeout=20) == [4]
    data = reader.get_metrics_data()
    points: Dict[str, List[Any]] = {}
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    kinds = {(p.attributes["task_kind"], p.attributes["outcome"]) for p in points[TASKS]}
    assert {("workflow", "completed"), ("activity", "completed"), ("query", "completed")} <= kinds
    activity_done = sum(p.value for p in points[TASKS] if p.attributes["task_kind"] == "activity")
    assert activity_done == 1
    assert all(p.attributes["task_queue"] == queue for p in points[TASK_DURATION])
    provider.shutdown()


@pytest.fixture
def run_traced() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SyncWorkerInstrumentor()
    instrumentor.instrument(tracer_provider=provider, trace_runs=True)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def test_trace_runs_keeps_a_run_in_one_trace_where_the_server_keeps_no_context(
        run_traced: InMemorySpanExporter) -> None:
    from sync_worker.contrib.opentelemetry import run_span_context

    with DevServer() as plain, Client(plain.url) as client:  # as the real server: no trace context
        queue = unique_queue("otel-runs")
        first = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double],
                            poll_timeout=1.0)
        with RunningWorker(first) as running:
            handle = client.start_workflow("e2e.otel.parent", 4, False, task_queue=queue)
            wait_for(lambda: client.query_workflow(handle.workflow_id, "seen")["result"] == [8], timeout=20)
            assert running.stop() is None
        second = make_worker(client, task_queue=queue, workflows=[Parent, Child], activities=[double],
                             poll_timeout=1.0)
        with RunningWorker(second):  # another worker, later: the same trace
            handle.signal("finish")
            assert handle.result(timeout=20) == [8]
    finished = list(run_traced.get_finished_spans())
    expected = run_span_context(str(handle.run_id))
    ours = [s for s in finished if (s.attributes or {}).get("workflow_run_id") == handle.run_id
            and s.kind is not SpanKind.CLIENT]
    assert {s.name.split(":")[0] for s in ours} >= {"RunWorkflow", "WorkflowTask", "RunActivity", "HandleQuery"}
    assert {s.context.trace_id for s in ours} == {expected.trace_id}
    start = _one(finished, "StartWorkflow:", workflow_instance_id=handle.workflow_id)
    assert start.context.trace_id != expected.trace_id
    assert [link.context.trace_id for link in start.links] == [expected.trace_id]
