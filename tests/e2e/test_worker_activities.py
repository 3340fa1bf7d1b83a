"""The worker runtime end to end: real dev server, real sockets, activity slots on threads."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.errors import ActivityCancelled, NonRetryableError, WorkflowFailed
from sync_worker.worker import InMemoryMetrics, Worker, WorkerState

from ._worker_support import RunningWorker, unique_queue, wait_for

# -- activities -------------------------------------------------------------------------------


@activity.defn(name="e2e.greet")
def greet(name: str) -> str:
    info = activity.context().info
    return f"hello, {name} (attempt {info.attempt_number} on {info.task_queue})"


@activity.defn(name="e2e.flaky")
def flaky(value: int) -> Dict[str, Any]:
    attempt = activity.context().info.attempt_number
    if attempt == 1:
        raise ConnectionError("transient downstream failure")
    return {"value": value, "attempt": attempt}


class CardDeclined(NonRetryableError):
    pass


@activity.defn(name="e2e.declined")
def declined() -> None:
    raise CardDeclined("card declined", code=402)


CANCEL_SEEN: List[str] = []


@activity.defn(name="e2e.heartbeating")
def heartbeating(steps: int) -> str:
    ctx = activity.context()
    try:
        for step in range(steps):
            ctx.heartbeat_sync({"step": step})
            time.sleep(0.05)
    except ActivityCancelled:
        CANCEL_SEEN.append(ctx.info.task_id)
        raise
    return "finished"


@activity.defn(name="e2e.huge_failure")
def huge_failure() -> None:
    try:
        raise KeyError("k" * 100_000)
    except KeyError as cause:
        raise RuntimeError("M" * 200_000) from cause


ACTIVITIES = [greet, flaky, declined, heartbeating, huge_failure]


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def worker_env(client: Client) -> Iterator[Dict[str, Any]]:
    queue = unique_queue()
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue=queue, activities=ACTIVITIES, poll_timeout=2.0, metrics=metrics,
                    shutdown_timeout=5.0)
    with RunningWorker(worker) as running:
        yield {"queue": queue, "worker": worker, "metrics": metrics, "running": running}


def test_activity_success(client: Client, worker_env: Dict[str, Any]) -> None:
    receipt = client.start_activity("e2e.greet", "Ada", task_queue=worker_env["queue"])
    result = client.get_activity_result(receipt["activity_id"], timeout=10)
    assert result == f"hello, Ada (attempt 1 on {worker_env['queue']})"
    metrics: InMemoryMetrics = worker_env["metrics"]
    wait_for(lambda: metrics.counter("durable_workflow_worker_tasks", outcome="completed") == 1)


def test_retryable_failure_then_success(client: Client, worker_env: Dict[str, Any]) -> None:
    receipt = client.start_activity("e2e.flaky", 7, task_queue=worker_env["queue"],
                                    retry_policy={"max_attempts": 3, "backoff_seconds": [0.2]})
    assert client.get_activity_result(receipt["activity_id"], timeout=15) == {"value": 7, "attempt": 2}
    described = client.describe_activity(receipt["activity_id"])
    assert described["attempt_count"] == 2
    metrics: InMemoryMetrics = worker_env["metrics"]
    assert metrics.counter("durable_workflow_worker_tasks", outcome="failed") == 1


def test_non_retryable_failure(client: Client, worker_env: Dict[str, Any]) -> None:
    receipt = client.start_activity("e2e.declined", task_queue=worker_env["queue"],
                                    retry_policy={"max_attempts": 5, "backoff_seconds": [0.2]})
    with pytest.raises(WorkflowFailed):
        client.get_activity_result(receipt["activity_id"], timeout=10)
    described = client.describe_activity(receipt["activity_id"])
    assert described["attempt_count"] == 1
    failure = described["failure"]
    assert failure["non_retryable"] is True
    assert failure["type"] == "CardDeclined" and failure["message"] == "card declined"
    assert failure["code"] == 402
    assert failure["class"].endswith("CardDeclined")
    assert "Traceback" in failure["stack_trace"]


def test_an_activity_type_this_worker_lacks_waits_for_a_worker_that_has_it(
        client: Client, worker_env: Dict[str, Any]) -> None:
    """The server hands a task only to a worker that registered its type (as the engine's
    activity bridge filters by ``supported_activity_types``): no attempt is burnt here."""
    receipt = client.start_activity("e2e.nobody", task_queue=worker_env["queue"],
                                    retry_policy={"max_attempts": 2, "backoff_seconds": [0.2]})
    time.sleep(2.5)  # the worker polls its queue all along
    described = client.describe_activity(receipt["activity_id"])
    assert described["attempt_count"] == 0 and described["status"] not in ("failed", "completed"), described

    @activity.defn(name="e2e.nobody")
    def nobody() -> str:
        return "finally"

    other = Worker(client, task_queue=worker_env["queue"], activities=[nobody], poll_timeout=2.0, shutdown_timeout=5.0)
    with RunningWorker(other):
        assert client.get_activity_result(receipt["activity_id"], timeout=15) == "finally"
    assert client.describe_activity(receipt["activity_id"])["attempt_count"] == 1


def test_heartbeat_progress_and_cancellation(client: Client, worker_env: Dict[str, Any]) -> None:
    CANCEL_SEEN.clear()
    receipt = client.start_activity("e2e.heartbeating", 400, task_queue=worker_env["queue"],
                                    heartbeat_timeout_seconds=5)
    activity_id = receipt["activity_id"]
    wait_for(lambda: client.describe_activity(activity_id).get("last_heartbeat_at"))
    client.cancel_activity(activity_id)
    wait_for(lambda: CANCEL_SEEN)
    metrics: InMemoryMetrics = worker_env["metrics"]
    wait_for(lambda: metrics.counter("durable_workflow_worker_tasks", outcome="cancelled") == 1)
    described = client.describe_activity(activity_id)
    assert described["status"] in ("cancelled", "canceled")
    assert described["result"] is None  # "finished" was never reported


def test_huge_failure_is_reported_within_bounds(client: Client, worker_env: Dict[str, Any]) -> None:
    receipt = client.start_activity("e2e.huge_failure", task_queue=worker_env["queue"])
    with pytest.raises(WorkflowFailed):
        client.get_activity_result(receipt["activity_id"], timeout=10)
    failure = client.describe_activity(receipt["activity_id"])["failure"]
    message = failure["message"].encode("utf-8")
    stack = failure["stack_trace"].encode("utf-8")
    assert len(message) == 63_488
    assert message.startswith(b"M" * 1000)
    omitted = failure["diagnostics"]["failure_report"]["omitted_fields"]
    assert omitted["message"] == 200_000
    assert omitted["stack_trace"] > 300_000
    assert message.endswith(b"]") and b"\n[truncated {\"omitted_fields\":" in message
    assert len(stack) == 131_072 and stack.endswith(b"\n[truncated]")
    assert failure["type"] == "RuntimeError"


def test_blocked_activity_does_not_stall_polling_or_heartbeats() -> None:
    gate = threading.Event()

    @activity.defn(name="e2e.gated")
    def gated() -> str:
        gate.wait(20)
        return "opened"

    queue = unique_queue()
    # the server's advertised cadence replaces the worker's own: make it fast here
    with DevServer(port=0, db=":memory:", heartbeat_interval_seconds=1) as server:
        client = Client(server.url)
        worker = Worker(client, task_queue=queue, activities=[gated, greet], poll_timeout=2.0,
                        max_concurrent_activity_tasks=2, shutdown_timeout=10.0)
        with RunningWorker(worker) as running:
            blocked = client.start_activity("e2e.gated", task_queue=queue)
            wait_for(lambda: client.describe_activity(blocked["activity_id"])["activity_status"] == "running")
            quick = client.start_activity("e2e.greet", "Bo", task_queue=queue)
            assert client.get_activity_result(quick["activity_id"], timeout=10).startswith("hello, Bo")
            assert worker.heartbeat_interval == 1.0

            def beats() -> List[str]:
                rows = client.list_workers(task_queue=queue)["workers"]
                return [r["last_heartbeat_at"] for r in rows if r.get("last_heartbeat_at")]

            first = wait_for(beats, timeout=5)
            wait_for(lambda: beats() and beats() != first, timeout=5)  # still beating while blocked
            heartbeat = worker.status().role("heartbeat")
            assert heartbeat is not None and heartbeat.consecutive_failures == 0
            assert heartbeat.last_success_age_seconds is not None and heartbeat.last_success_age_seconds < 2
            assert worker.status().ready
            # one slot runs the blocked activity; the other is reserved by the next long poll
            assert worker.task_slots()["activity_available"] == 0

            # warm stop: polling stops at once, the blocked activity drains, heartbeats go on
            stopper = threading.Thread(target=running.stop)
            stopper.start()
            wait_for(lambda: worker.state is WorkerState.DRAINING)
            status = worker.status()
            assert status.live and not status.ready and status.ready_reason == "draining"
            during_drain = beats()
            wait_for(lambda: beats() != during_drain, timeout=5)
            assert client.list_workers(task_queue=queue)["workers"][0]["status"] == "active"
            gate.set()
            stopper.join(10)
            assert not stopper.is_alive()
            assert client.get_activity_result(blocked["activity_id"], timeout=10) == "opened"
        assert client.list_workers(task_queue=queue)["workers"][0]["status"] == "deregistered"
        client.close()
    assert worker.state is WorkerState.STOPPED
    assert running.errors == []


def test_deregistration_on_stop(client: Client) -> None:
    queue = unique_queue()
    worker = Worker(client, task_queue=queue, activities=[greet], poll_timeout=2.0)

    def record() -> Dict[str, Any]:
        rows = [w for w in client.list_workers(task_queue=queue)["workers"] if w["worker_id"] == worker.worker_id]
        return rows[0] if rows else {}

    with RunningWorker(worker) as running:
        row = wait_for(record)
        assert row["status"] == "active"
        assert row["supported_activity_types"] == ["e2e.greet"]
        assert worker.status().ready
        started = time.monotonic()
        assert running.stop() is None
        assert time.monotonic() - started < 3.0  # the long poll was interrupted, not waited out
    assert record()["status"] == "deregistered"
    status = worker.status()
    assert status.state is WorkerState.STOPPED and not status.ready and not status.live
    worker.stop()  # again: shares the finished result, sends nothing new
