"""Workflow and query tasks through the real replayer and the dev server."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterator, List

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.errors import WorkerShutdown
from sync_worker.worker import InMemoryMetrics, Worker, WorkerState

from ._worker_support import RunningWorker, unique_queue, wait_for


@activity.defn(name="e2e.wf.shout")
def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="e2e.wf.greeter")
class Greeter:
    def run(self, ctx: Any, name: str) -> Any:
        first = yield ctx.schedule_activity("e2e.wf.shout", [f"hello {name}"])
        second = yield ctx.schedule_activity("e2e.wf.shout", [f"bye {name}"])
        return [first, second]


@workflow.defn(name="e2e.wf.approval")
class Approval:
    def __init__(self) -> None:
        self.approved_by: List[str] = []

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approved_by.append(who)

    @workflow.query("approvals")
    def approvals(self) -> List[str]:
        return list(self.approved_by)

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: len(self.approved_by) >= 2, key="two-approvals")
        return self.approved_by


def _history_outline(client: Client, workflow_id: str) -> List[Any]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    events = list(client.iter_history(workflow_id, run_id))
    return [(e.get("event_type"), {k: v for k, v in (e.get("payload") or {}).items()
                                   if k in ("sequence", "workflow_sequence", "signal_name", "condition_key")})
            for e in events]


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def test_run_until_a_workflow_with_activities_completes(client: Client) -> None:
    queue = unique_queue("wf")
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue=queue, workflows=[Greeter], activities=[shout], poll_timeout=2.0,
                    metrics=metrics)
    handle = client.start_workflow("e2e.wf.greeter", "ada", task_queue=queue)
    description = worker.run_until(workflow_id=handle.workflow_id, timeout=20)
    assert description.status == "completed"
    assert handle.result(timeout=5) == ["HELLO ADA", "BYE ADA"]
    assert metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed") >= 3
    assert metrics.counter("durable_workflow_worker_tasks", task_kind="activity", outcome="completed") == 2
    assert worker.state is WorkerState.STOPPED
    rows = {w["worker_id"]: w for w in client.list_workers(task_queue=queue)["workers"]}
    assert rows[worker.worker_id]["status"] == "deregistered"
    assert rows[worker.worker_id]["supported_workflow_types"] == ["e2e.wf.greeter"]


def test_queries_and_signals_on_a_waiting_workflow(client: Client) -> None:
    queue = unique_queue("wf")
    worker = Worker(client, task_queue=queue, workflows=[Approval], poll_timeout=2.0)
    with RunningWorker(worker) as running:
        handle = client.start_workflow("e2e.wf.approval", task_queue=queue, workflow_id=f"appr-{uuid.uuid4().hex}")
        # signal only once the first task has opened the wait (see the report: a signal that
        # arrives before the first workflow task can replay differently on the dev server)
        wait_for(lambda: client.query_workflow(handle.workflow_id, "approvals")["result"] == [], timeout=15)
        handle.signal("approve", ["ann"])
        wait_for(lambda: client.query_workflow(handle.workflow_id, "approvals")["result"] == ["ann"], timeout=15)
        query_role = worker.status().role("query")
        assert query_role is not None and query_role.running
        handle.signal("approve", ["bob"])
        try:
            result = handle.result(timeout=15)
        except TimeoutError:
            pytest.fail(f"workflow stuck; history: {_history_outline(client, handle.workflow_id)}")
        assert result == ["ann", "bob"]
        assert running.stop() is None


def test_run_until_times_out_without_cancelling_the_run(client: Client) -> None:
    queue = unique_queue("wf")
    worker = Worker(client, task_queue=queue, workflows=[Approval], poll_timeout=1.0)
    handle = client.start_workflow("e2e.wf.approval", task_queue=queue)
    with pytest.raises(TimeoutError, match="not terminal"):
        worker.run_until(workflow_id=handle.workflow_id, timeout=2)
    assert client.describe_workflow(handle.workflow_id).status not in ("completed", "failed", "cancelled")
    assert worker.state is WorkerState.STOPPED


def test_external_stop_interrupts_run_until(client: Client) -> None:
    queue = unique_queue("wf")
    worker = Worker(client, task_queue=queue, workflows=[Approval], poll_timeout=2.0)
    handle = client.start_workflow("e2e.wf.approval", task_queue=queue)
    threading.Timer(1.0, worker.stop).start()
    with pytest.raises(WorkerShutdown):
        worker.run_until(workflow_id=handle.workflow_id, timeout=30)
    assert worker.state is WorkerState.STOPPED
