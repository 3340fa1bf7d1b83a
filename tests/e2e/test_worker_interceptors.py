"""Worker interceptors end to end: our Client, our Worker, the dev server."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterator, List, Tuple

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.errors import NonRetryableError, QueryFailed, WorkflowFailed
from sync_worker.interceptors import (
    ActivityHandler,
    ActivityInterceptorContext,
    PassthroughWorkerInterceptor,
    QueryTaskHandler,
    QueryTaskInterceptorContext,
    WorkflowTaskHandler,
    WorkflowTaskInterceptorContext,
)

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@activity.defn(name="e2e.ic.double")
def double(value: int) -> int:
    return value * 2


@workflow.defn(name="e2e.ic.doubler")
class Doubler:
    def __init__(self) -> None:
        self.doubled: List[int] = []
        self.done = False

    @workflow.signal("finish")
    def finish(self) -> None:
        self.done = True

    @workflow.query("doubled")
    def current(self) -> List[int]:
        return list(self.doubled)

    def run(self, ctx: Any, value: int) -> Any:
        result = yield ctx.schedule_activity("e2e.ic.double", [value])
        self.doubled.append(result)
        yield ctx.wait_condition(lambda: self.done, key="finish")
        return self.doubled


class Journal(PassthroughWorkerInterceptor):
    """Records every hook call (what a metrics or tracing interceptor would see)."""

    def __init__(self, name: str, log: List[Tuple[Any, ...]]) -> None:
        self.name = name
        self.log = log
        self.lock = threading.Lock()

    def _note(self, *entry: Any) -> None:
        with self.lock:
            self.log.append((self.name, *entry))

    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler) -> Any:
        self._note("workflow:before", context.task.get("workflow_id"))
        outcome = next(context)
        self._note("workflow:after", context.task.get("workflow_id"), len(outcome.commands))
        return outcome

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        slot = activity.context().info  # activity.context() works inside the interceptor
        self._note("activity:before", context.activity_type, context.args, slot.task_id == context.task["task_id"])
        result = next(context)
        self._note("activity:after", context.activity_type, result)
        return result

    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> Any:
        if context.task.get("query_name") == "doubled" and context.task.get("workflow_id", "").startswith("hidden-"):
            raise PermissionError("queries on hidden workflows are refused")
        outcome = next(context)
        self._note("query", context.task.get("query_name"), context.task_queue, outcome.value)
        return outcome


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def test_interceptors_wrap_real_activity_workflow_and_query_tasks(client: Client) -> None:
    queue = unique_queue("ic")
    log: List[Tuple[Any, ...]] = []
    worker = make_worker(client, task_queue=queue, workflows=[Doubler], activities=[double], poll_timeout=2.0,
                         interceptors=[Journal("outer", log), Journal("inner", log)])
    workflow_id = f"ic-{uuid.uuid4().hex}"
    with RunningWorker(worker) as running:
        handle = client.start_workflow("e2e.ic.doubler", 21, task_queue=queue, workflow_id=workflow_id)
        wait_for(lambda: client.query_workflow(workflow_id, "doubled")["result"] == [42], timeout=15)
        handle.signal("finish")
        assert handle.result(timeout=15) == [42]

        hidden = client.start_workflow("e2e.ic.doubler", 1, task_queue=queue, workflow_id=f"hidden-{workflow_id}")
        wait_for(lambda: any(e[1] == "activity:after" and e[3] == 2 for e in list(log)), timeout=15)
        with pytest.raises(QueryFailed) as refused:
            client.query_workflow(hidden.workflow_id, "doubled")
        assert "queries on hidden workflows are refused" in str(refused.value)
        hidden.signal("finish")
        assert hidden.result(timeout=15) == [2]
        assert running.stop() is None

    entries = list(log)  # the worker has stopped: no more writers
    activity_calls = [e for e in entries if e[1].startswith("activity")]
    assert activity_calls[:4] == [
        ("outer", "activity:before", "e2e.ic.double", (21,), True),
        ("inner", "activity:before", "e2e.ic.double", (21,), True),
        ("inner", "activity:after", "e2e.ic.double", 42),
        ("outer", "activity:after", "e2e.ic.double", 42),
    ]
    first_task = [e for e in entries if e[1].startswith("workflow") and e[2] == workflow_id][:4]
    assert [e[:2] for e in first_task] == [("outer", "workflow:before"), ("inner", "workflow:before"),
                                           ("inner", "workflow:after"), ("outer", "workflow:after")]
    assert first_task[2][3] >= 1  # the first task schedules the activity: at least one command
    answered = [e for e in entries if e[1] == "query" and e[4] == [42]]
    assert {e[0] for e in answered} == {"outer", "inner"}
    assert all(e[3] == queue for e in answered)
    assert not any(e[1] == "query" and e[4] == [2] for e in entries)  # the hidden query never reached next()


class TenantGate(PassthroughWorkerInterceptor):
    """Refuses every activity of a suspended tenant before it runs (no retries)."""

    def __init__(self) -> None:
        self.refused: List[str] = []

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        if context.args and context.args[0] < 0:
            self.refused.append(str(context.task["task_id"]))
            raise NonRetryableError("tenant suspended")
        return next(context)


def test_an_interceptor_raising_non_retryable_fails_the_activity_without_retry(client: Client) -> None:
    queue = unique_queue("ic")
    gate = TenantGate()
    worker = make_worker(client, task_queue=queue, activities=[double], poll_timeout=2.0, interceptors=[gate])
    with RunningWorker(worker):
        allowed = client.start_activity("e2e.ic.double", 5, task_queue=queue)
        assert client.get_activity_result(allowed["activity_id"], timeout=10) == 10
        receipt = client.start_activity("e2e.ic.double", -1, task_queue=queue,
                                        retry_policy={"max_attempts": 5, "backoff_seconds": [0.2]})
        with pytest.raises(WorkflowFailed):
            client.get_activity_result(receipt["activity_id"], timeout=10)
    described = client.describe_activity(receipt["activity_id"])
    assert described["attempt_count"] == 1
    assert described["failure"]["non_retryable"] is True
    assert described["failure"]["message"] == "tenant suspended"
    assert described["failure"]["type"] == "NonRetryableError"
    assert len(gate.refused) == 1
