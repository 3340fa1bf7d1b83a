"""A forgotten ``yield``, end to end on the dev server (issue 27).

Before: a plain-function ``run`` that called ``ctx.schedule_activity`` completed without ever running the
activity, and a generator that returned the command stayed ``running`` behind an opaque encode error.
Now the worker fails the workflow TASK with "did you forget `yield`", logs it, appends nothing to the
run, and the corrected code completes the same run.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker

from ._worker_support import RunningWorker, unique_queue, wait_for

WORKFLOW_TYPE = "e2e.fy.ship"


@activity.defn(name="e2e.fy.ship")
def ship(order: str) -> str:
    return f"shipped {order}"


@workflow.defn(name=WORKFLOW_TYPE)
class Forgot:
    def run(self, ctx: Any, order: str) -> Any:
        ctx.schedule_activity("e2e.fy.ship", [order])
        return "done"


@workflow.defn(name=WORKFLOW_TYPE)
class ReturnsTheCommand:
    def run(self, ctx: Any, order: str) -> Any:
        yield ctx.sleep(0)
        return ctx.schedule_activity("e2e.fy.ship", [order])


@workflow.defn(name=WORKFLOW_TYPE)
class Fixed:
    def run(self, ctx: Any, order: str) -> Any:
        yield ctx.sleep(0)
        shipped = yield ctx.schedule_activity("e2e.fy.ship", [order])
        return shipped


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


def _worker(client: Client, queue: str, cls: type) -> Worker:
    return Worker(client, task_queue=queue, workflows=[cls], activities=[ship], poll_timeout=1.0,
                  shutdown_timeout=10.0, worker_id=f"fy-{uuid.uuid4().hex[:6]}")


@pytest.mark.parametrize("broken, expected", [
    (Forgot, "never yielded ctx.schedule_activity(...)"),
    (ReturnsTheCommand, "returned a ScheduleActivity"),
])
def test_the_task_fails_with_the_hint_and_the_fixed_code_completes_the_run(
        client: Client, caplog: pytest.LogCaptureFixture, broken: type, expected: str) -> None:
    caplog.set_level(logging.WARNING, logger="sync_worker")
    queue = unique_queue("fy")
    with RunningWorker(_worker(client, queue, broken)) as running:
        handle = client.start_workflow(WORKFLOW_TYPE, "o-1", task_queue=queue, workflow_id=f"fy-{uuid.uuid4().hex}")
        failure: Dict[str, Any] = wait_for(
            lambda: client.describe_workflow(handle.workflow_id).raw.get("last_task_failure"), timeout=15)
        assert running.stop() is None
    assert failure["type"] == "InvalidWorkflowDefinition", failure
    assert expected in failure["message"] and "did you forget `yield`" in failure["message"], failure
    assert any("did you forget `yield`" in r.getMessage() for r in caplog.records)
    description = client.describe_workflow(handle.workflow_id)
    assert description.status == "running", description.status
    history = _types(client, handle.workflow_id)
    assert "ActivityScheduled" not in history and "WorkflowCompleted" not in history, history

    with RunningWorker(_worker(client, queue, Fixed)) as running:
        assert handle.result(timeout=30, poll_interval=0.1) == "shipped o-1"
        assert running.stop() is None
    assert _types(client, handle.workflow_id).count("ActivityCompleted") == 1
