"""Namespaces, schedules and updates end to end: ``sync_worker``'s Client drives the dev server and
its Worker executes the workflows (on threads, and again under gevent in the gevent suite)."""

from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import pytest

from sync_worker import workflow
from sync_worker.client import Client
from sync_worker.errors import WorkflowNotFound

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

BIG = 9007199254740993


@workflow.defn(name="e2e.cp.echo")
class Echo:
    def run(self, ctx: Any, value: Any) -> Any:
        return {"echo": value}
        yield  # a generator workflow that completes on its first task


@workflow.defn(name="e2e.cp.collector")
class Collector:
    def __init__(self) -> None:
        self.values: List[Any] = []
        self.done = False

    @workflow.update("add")
    def add(self, value: Any) -> Any:
        self.values.append(value)
        return {"value": value, "applied": len(self.values)}

    @workflow.signal("finish")
    def finish(self) -> None:
        self.done = True

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.done, key="finish")
        return self.values


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def _kinds(client: Client, workflow_id: str) -> List[str]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    return [e["event_type"] for e in client.iter_history(workflow_id, run_id)]


def _message_events(client: Client, workflow_id: str) -> List[str]:
    """The update and cursor events (a replay after an update may re-open the run's wait meanwhile)."""
    return [k for k in _kinds(client, workflow_id) if k.startswith("Update") or k == "MessageCursorAdvanced"]


def test_a_worker_in_a_created_namespace(client: Client, dev_server_session: Any) -> None:
    name = f"e2e-ns-{uuid.uuid4().hex[:8]}"
    created = client.create_namespace(name, description="e2e", retention_days=7)
    assert (created.name, created.retention_days, created.status) == (name, 7, "active")
    scoped = Client(dev_server_session.url, namespace=name)
    try:
        queue = unique_queue("ns")
        with RunningWorker(make_worker(scoped, task_queue=queue, workflows=[Echo], poll_timeout=1.0)):
            handle = scoped.start_workflow("e2e.cp.echo", {"n": BIG}, task_queue=queue)
            assert handle.result(timeout=20) == {"echo": {"n": BIG}}
        with pytest.raises(WorkflowNotFound):
            client.describe_workflow(handle.workflow_id)  # invisible from the default namespace
        deleted = client.delete_namespace(name)
        assert deleted.status == "deleted" and (deleted.deleted or {}).get("workflow_runs") == 1
    finally:
        scoped.close()


def test_a_schedule_fires_sync_worker_workflows(client: Client) -> None:
    queue = unique_queue("sched")
    schedule_id = f"e2e-sched-{uuid.uuid4().hex[:8]}"
    with RunningWorker(make_worker(client, task_queue=queue, workflows=[Echo], poll_timeout=1.0)):
        client.create_schedule(schedule_id=schedule_id,
                               spec={"intervals": [{"every": "PT1S"}], "timezone": "UTC"},
                               action={"workflow_type": "e2e.cp.echo", "task_queue": queue, "input": [{"n": BIG}]},
                               overlap_policy="allow_all", max_runs=2)

        def exhausted() -> Any:
            page = client.get_schedule_history(schedule_id, limit=100)
            return page if "ScheduleDeleted" in [e.event_type for e in page.events] else None

        page = wait_for(exhausted, timeout=15)
        fired = [e for e in page.events if e.event_type == "ScheduleTriggered"]
        assert len(fired) == 2
        for event in fired:
            workflow_id = event.workflow_instance_id or ""
            assert client.get_result(workflow_id, timeout=20) == {"echo": {"n": BIG}}
            assert _kinds(client, workflow_id) == ["StartAccepted", "WorkflowStarted", "ScheduleTriggered",
                                                   "WorkflowCompleted"]
        manual = client.create_schedule(schedule_id=f"{schedule_id}-manual", spec={"cron_expressions": ["0 0 1 1 *"]},
                                        action={"workflow_type": "e2e.cp.echo", "task_queue": queue, "input": [1]})
        triggered = manual.trigger()
        assert triggered.outcome == "triggered" and triggered.workflow_id
        assert client.get_result(triggered.workflow_id, timeout=20) == {"echo": 1}
        manual.delete()


def test_repeated_update_request_ids_and_the_message_cursor(client: Client) -> None:
    queue = unique_queue("upd")
    with RunningWorker(make_worker(client, task_queue=queue, workflows=[Collector], poll_timeout=1.0)):
        handle = client.start_workflow("e2e.cp.collector", task_queue=queue)
        wait_for(lambda: "ConditionWaitOpened" in _kinds(client, handle.workflow_id), timeout=15)
        first = client.update_workflow(handle.workflow_id, "add", args=[{"n": BIG}], wait_for="completed",
                                       request_id="same-key")
        before = _message_events(client, handle.workflow_id)
        again = client.update_workflow(handle.workflow_id, "add", args=[{"n": "other"}], wait_for="completed",
                                       request_id="same-key")
        assert again["update_id"] == first["update_id"] and again["result"] == first["result"]
        assert _message_events(client, handle.workflow_id) == before  # nothing recorded for the repeat
        client.signal_workflow(handle.workflow_id, "finish")
        assert handle.result(timeout=20) == [{"n": BIG}]
    kinds = _kinds(client, handle.workflow_id)
    assert kinds.count("UpdateAccepted") == 1 and kinds.count("MessageCursorAdvanced") == 2
    assert kinds[kinds.index("UpdateCompleted") + 1] == "MessageCursorAdvanced"
    assert kinds[kinds.index("SignalApplied") - 1] == "MessageCursorAdvanced"


def test_schedule_refusals_are_the_sdks_typed_errors(client: Client) -> None:
    """A second create with the same id is ScheduleAlreadyExists; a refused list filter is
    ScheduleListError with the server's status and reason (the published SDK's names, issue 24)."""
    from sync_worker import ScheduleAlreadyExists, ScheduleListError

    schedule_id = f"e2e-dup-{uuid.uuid4().hex[:8]}"
    action = {"workflow_type": "e2e.cp.echo", "task_queue": "nowhere", "input": [1]}
    client.create_schedule(schedule_id=schedule_id, spec={"cron_expressions": ["0 0 1 1 *"]}, action=action)
    try:
        with pytest.raises(ScheduleAlreadyExists) as collided:
            client.create_schedule(schedule_id=schedule_id, spec={"cron_expressions": ["0 0 1 1 *"]}, action=action)
        assert (collided.value.status, collided.value.reason()) == (409, "schedule_already_exists")
        assert collided.value.schedule_id == schedule_id
        with pytest.raises(ScheduleListError) as refused:
            client.list_schedules(page_size=0)
        assert (refused.value.status, refused.value.reason()) == (422, "validation_failed")
    finally:
        client.delete_schedule(schedule_id)
