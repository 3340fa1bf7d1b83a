"""Sentry end to end: a plain worker against the dev server, events caught by a capturing transport.

One event per failed activity (not per retry) with its tags, the task's breadcrumbs and no leak
between tasks; ``capture_every_attempt`` for one per attempt; a workflow-task failure once; a
cancelled activity is not an error. Threads, and again under gevent (tests/gevent_suite.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.contrib.sentry import SyncWorkerIntegration
from sync_worker.errors import NonRetryableError, WorkflowFailed
from sync_worker.workflow import ActivityRetryPolicy

from ._sentry_support import sentry_capturing
from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

log = logging.getLogger("e2e.sentry.billing")
log.setLevel(logging.INFO)  # what the activity logs at INFO becomes a breadcrumb (Sentry's logging integration)


@activity.defn(name="e2e.sentry.charge")
def charge(card: str) -> str:
    log.info("charging card %s", card)
    if card == "expired":
        raise ValueError(f"card {card} was declined")
    if card == "stolen":
        raise NonRetryableError("card reported stolen")
    return "charged"


@workflow.defn(name="e2e.sentry.checkout")
class Checkout:
    def run(self, ctx: Any, card: str, attempts: int) -> Any:
        policy = ActivityRetryPolicy(max_attempts=attempts, backoff_seconds=[0] * max(0, attempts - 1))
        result = yield ctx.schedule_activity("e2e.sentry.charge", [card], retry_policy=policy)
        return result


@workflow.defn(name="e2e.sentry.broken")
class Broken:
    def run(self, ctx: Any) -> Any:
        result = yield ctx.schedule_activity("e2e.sentry.charge", [object()])  # cannot be encoded: a task failure
        return result


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def _checkout(client: Client, queue: str, card: str, attempts: int) -> Any:
    handle = client.start_workflow("e2e.sentry.checkout", card, attempts, task_queue=queue,
                                   workflow_id=f"checkout-{card}-{uuid.uuid4().hex[:8]}")
    try:
        return handle.workflow_id, handle.result(timeout=30)
    except WorkflowFailed as failed:
        return handle.workflow_id, failed


def _for(events: List[Dict[str, Any]], workflow_id: str) -> List[Dict[str, Any]]:
    return [e for e in events if (e.get("tags") or {}).get("workflow.id") == workflow_id]


def test_one_event_per_failed_activity_with_its_tags_not_one_per_retry(client: Client) -> None:
    queue = unique_queue("sentry")
    with sentry_capturing(integrations=[SyncWorkerIntegration()]) as transport:
        worker = make_worker(client, task_queue=queue, workflows=[Checkout], activities=[charge], poll_timeout=1.0)
        with RunningWorker(worker):
            declined, outcome = _checkout(client, queue, "expired", 3)
            assert isinstance(outcome, WorkflowFailed)
            stolen, outcome = _checkout(client, queue, "stolen", 3)
            assert isinstance(outcome, WorkflowFailed)
            fine, outcome = _checkout(client, queue, "valid", 3)
            assert outcome == "charged"
        events = list(transport.events)

    [event] = _for(events, declined)  # three attempts, one event: on the last
    tags = event["tags"]
    assert tags["activity.type"] == "e2e.sentry.charge" and tags["activity.attempt"] == "3"
    assert tags["task_queue"] == queue and tags["namespace"] == "default"
    assert "workflow.type" not in tags  # an activity task does not name its workflow's type (the real server's)
    assert tags["workflow.run_id"].startswith("run")
    [exception] = event["exception"]["values"]
    assert exception["type"] == "ValueError" and "declined" in exception["value"]
    crumbs = [c.get("message") for c in event["breadcrumbs"]["values"]]
    received = [m for m in crumbs if m and m.startswith("Task e2e.sentry.charge[") and m.endswith("] received")]
    assert len(received) == 1
    assert "charging card expired" in crumbs
    assert not any(m and "stolen" in m for m in crumbs)  # no leak from another task
    assert event["contexts"]["sync_worker"]["attempt"] == 3

    [event] = _for(events, stolen)  # non-retryable: the first attempt is the last
    assert event["tags"]["activity.attempt"] == "1"
    assert event["exception"]["values"][0]["type"] == "NonRetryableError"
    assert _for(events, fine) == []


def test_capture_every_attempt_when_asked(client: Client) -> None:
    queue = unique_queue("sentry-every")
    with sentry_capturing(integrations=[SyncWorkerIntegration(capture_every_attempt=True)]) as transport:
        worker = make_worker(client, task_queue=queue, workflows=[Checkout], activities=[charge], poll_timeout=1.0)
        with RunningWorker(worker):
            declined, _ = _checkout(client, queue, "expired", 3)
        events = _for(list(transport.events), declined)
    assert sorted(e["tags"]["activity.attempt"] for e in events) == ["1", "2", "3"]


def test_a_workflow_task_failure_is_captured_once(client: Client) -> None:
    queue = unique_queue("sentry-wft")
    with sentry_capturing(integrations=[SyncWorkerIntegration()]) as transport:
        worker = make_worker(client, task_queue=queue, workflows=[Broken], activities=[charge], poll_timeout=1.0)
        with RunningWorker(worker):
            handle = client.start_workflow("e2e.sentry.broken", task_queue=queue)
            wait_for(lambda: _for(list(transport.events), handle.workflow_id), timeout=20)
            # the server retries the failed task; the retries are not new events
            time.sleep(2.5)
            client.terminate_workflow(handle.workflow_id)
        events = _for(list(transport.events), handle.workflow_id)
    assert len(events) == 1
    assert events[0]["tags"]["workflow.type"] == "e2e.sentry.broken"
    assert events[0]["tags"]["workflow_task.attempt"] == "1"
    assert "workflow task failed" in events[0]["message"]


def test_without_the_integration_nothing_is_captured(client: Client) -> None:
    queue = unique_queue("sentry-off")
    with sentry_capturing() as transport:
        worker = make_worker(client, task_queue=queue, workflows=[Checkout], activities=[charge], poll_timeout=1.0)
        with RunningWorker(worker):
            declined, _ = _checkout(client, queue, "expired", 1)
        assert _for(list(transport.events), declined) == []


def test_the_event_is_linked_to_the_trace_of_the_caller() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from sync_worker.contrib.opentelemetry import SyncWorkerInstrumentor
    from sync_worker.devserver import DevServer

    provider = TracerProvider()
    instrumentor = SyncWorkerInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with DevServer(trace_context=True) as server, Client(server.url) as client, \
                sentry_capturing(integrations=[SyncWorkerIntegration()]) as transport:
            queue = unique_queue("sentry-trace")
            worker = make_worker(client, task_queue=queue, workflows=[Checkout], activities=[charge],
                                 poll_timeout=1.0)
            with RunningWorker(worker):
                with provider.get_tracer("view").start_as_current_span("POST /pay") as view:
                    handle = client.start_workflow("e2e.sentry.checkout", "stolen", 1, task_queue=queue)
                with pytest.raises(WorkflowFailed):
                    handle.result(timeout=30)
            [event] = _for(list(transport.events), handle.workflow_id)
    finally:
        instrumentor.uninstrument()
    assert event["contexts"]["trace"]["trace_id"] == f"{view.get_span_context().trace_id:032x}"
