"""A workflow's code changes under a run in flight, end to end on the dev server.

v1 runs ``authorize`` then waits for a ``release`` signal, then ``ship``s. The worker stops while the run
waits. A worker with v2 (which schedules ``charge`` where v1 scheduled ``authorize``) picks up the run's
next task: replay raises ``NonDeterministicReplayError``, reported as a workflow-TASK failure (the server
records the message, the run stays open, no ``WorkflowFailed``). Deploying v1 again completes the run.

Note: the dev server re-offers a task that failed with a non-determinism error only after a deliberate
10 s backoff (``devserver/tasks.py::retry_later``), so this test takes about 11 s.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.worker import InMemoryMetrics, Worker

from ._worker_support import RunningWorker, unique_queue, wait_for

WORKFLOW_TYPE = "e2e.nd.order"
POLL_TIMEOUT = 1.0


@activity.defn(name="e2e.nd.authorize")
def authorize(order: str) -> str:
    return f"authorized {order}"


@activity.defn(name="e2e.nd.charge")
def charge(order: str) -> str:
    return f"charged {order}"


@activity.defn(name="e2e.nd.ship")
def ship(order: str) -> str:
    return f"shipped {order}"


ACTIVITIES = [authorize, charge, ship]


@workflow.defn(name=WORKFLOW_TYPE)
class OrderV1:
    def __init__(self) -> None:
        self.released = False

    @workflow.signal("release")
    def release(self) -> None:
        self.released = True

    def run(self, ctx: Any, order: str) -> Any:
        first = yield ctx.schedule_activity("e2e.nd.authorize", [order])
        yield ctx.wait_condition(lambda: self.released, key="release")
        second = yield ctx.schedule_activity("e2e.nd.ship", [order])
        return {"steps": [first, second], "build": "v1"}


@workflow.defn(name=WORKFLOW_TYPE)
class OrderV2:
    """The incompatible change: a different activity type at the same step (workflow sequence 1)."""

    def __init__(self) -> None:
        self.released = False

    @workflow.signal("release")
    def release(self) -> None:
        self.released = True

    def run(self, ctx: Any, order: str) -> Any:
        first = yield ctx.schedule_activity("e2e.nd.charge", [order])
        yield ctx.wait_condition(lambda: self.released, key="release")
        second = yield ctx.schedule_activity("e2e.nd.ship", [order])
        return {"steps": [first, second], "build": "v2"}


@pytest.fixture
def client(dev_server: Any) -> Iterator[Client]:
    c = Client(dev_server.url)
    try:
        yield c
    finally:
        c.close()


def _types(client: Client, workflow_id: str) -> List[str]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    return [str(e["event_type"]) for e in client.iter_history(workflow_id, run_id)]


def _worker(client: Client, queue: str, cls: type, build: str, metrics: InMemoryMetrics,
            poll_timeout: float = POLL_TIMEOUT) -> Worker:
    return Worker(client, task_queue=queue, workflows=[cls], activities=ACTIVITIES, poll_timeout=poll_timeout,
                  shutdown_timeout=10.0, worker_id=f"nd-{build}-{uuid.uuid4().hex[:6]}", build_id=build,
                  metrics=metrics)


def test_incompatible_deploy_fails_the_task_not_the_run_and_old_code_recovers(
        client: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sync_worker")
    queue = unique_queue("nd")
    v1_metrics, v2_metrics, again_metrics = InMemoryMetrics(), InMemoryMetrics(), InMemoryMetrics()

    # 1. v1 starts the run and parks it on the signal wait, then its worker goes away
    with RunningWorker(_worker(client, queue, OrderV1, "v1", v1_metrics)) as running:
        handle = client.start_workflow(WORKFLOW_TYPE, "o-7", task_queue=queue, workflow_id=f"nd-{uuid.uuid4().hex}")
        wait_for(lambda: "ConditionWaitOpened" in _types(client, handle.workflow_id), timeout=15)
        assert running.stop() is None
    parked = _types(client, handle.workflow_id)
    assert parked == ["StartAccepted", "WorkflowStarted", "ActivityScheduled", "ActivityStarted",
                      "ActivityCompleted", "ConditionWaitOpened"]

    # 2. v2 gets the run's next task (woken by the signal) and cannot replay it
    with RunningWorker(_worker(client, queue, OrderV2, "v2", v2_metrics)) as running:
        handle.signal("release")
        failure: Dict[str, Any] = wait_for(
            lambda: client.describe_workflow(handle.workflow_id).raw.get("last_task_failure"), timeout=15)
        assert running.stop() is None

    assert failure["type"] == "NonDeterministicReplayError"
    message = failure["message"]
    assert "workflow sequence 1" in message, message
    assert str(parked[2:5]) in message, message                                 # the recorded event types
    assert "activity:e2e.nd.charge" in message, message                         # the yielded shape
    assert "'e2e.nd.authorize'" in message, message
    logged = [r.getMessage() for r in caplog.records if "replay failed" in r.getMessage()]
    assert logged and message in logged[0], logged                             # the worker's log says it too
    assert v2_metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="failed") >= 1
    assert v2_metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed") == 0
    assert v2_metrics.counter("durable_workflow_worker_tasks", task_kind="activity", outcome="completed") == 0
    description = client.describe_workflow(handle.workflow_id)
    assert not description.is_terminal and description.status != "failed", description.status
    after_v2 = _types(client, handle.workflow_id)
    assert "WorkflowFailed" not in after_v2
    assert [t for t in after_v2 if t not in ("SignalReceived",)] == parked  # v2 appended no command

    # 3. v1 again: the same run resumes from its history and completes
    with RunningWorker(_worker(client, queue, OrderV1, "v1", again_metrics)) as running:
        result = handle.result(timeout=30, poll_interval=0.1)
        assert running.stop() is None
    assert result == {"steps": ["authorized o-7", "shipped o-7"], "build": "v1"}
    final = _types(client, handle.workflow_id)
    assert final[:len(parked)] == parked
    assert final[-1] == "WorkflowCompleted" and "WorkflowFailed" not in final
    assert final.count("ActivityCompleted") == 2 and "ConditionWaitSatisfied" in final
    assert again_metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed") >= 2
    assert client.describe_workflow(handle.workflow_id).status == "completed"


def test_stopped_worker_is_never_leased_a_task(client: Client) -> None:
    """A run woken right after a worker's warm stop goes to the worker that is still polling.

    Regression guard: the stopped worker's aborted long poll stays parked server-side until its timeout;
    it must not lease the next workflow task to that (deregistered) worker, or the run stalls for the
    whole workflow-task lease (30 s in the ``dev_server`` fixture). Seen failing on this tree at 10:21
    UTC; ``devserver/routes.py`` now checks ``client_connected()`` and ``workers.may_lease`` first.
    """
    queue = unique_queue("nd-stop")
    # a long poll timeout keeps the stopped worker's aborted poll parked on the server when the signal lands
    with RunningWorker(_worker(client, queue, OrderV1, "v1", InMemoryMetrics(), poll_timeout=8.0)) as running:
        handle = client.start_workflow(WORKFLOW_TYPE, "o-8", task_queue=queue, workflow_id=f"nd-{uuid.uuid4().hex}")
        wait_for(lambda: "ConditionWaitOpened" in _types(client, handle.workflow_id), timeout=15)
        assert running.stop() is None
    handle.signal("release")  # while the stopped worker's poll is still parked on the server
    with RunningWorker(_worker(client, queue, OrderV1, "v1b", InMemoryMetrics())) as running:
        try:
            result = handle.result(timeout=10, poll_interval=0.1)
        except TimeoutError:
            pytest.fail(f"the woken run was not offered to the live worker; leased to the stopped one? "
                        f"history={_types(client, handle.workflow_id)}")
        assert running.stop() is None
    assert result == {"steps": ["authorized o-8", "shipped o-8"], "build": "v1"}
