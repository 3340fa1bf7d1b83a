"""Worker interceptors: nesting order, contexts, failures, refusal of async hooks.

The chain is tested directly; the task paths run a real Worker against the in-memory
fake client of fakes.py (the end-to-end tests cover the dev server).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Dict, List

import pytest

from sync_worker import activity
from sync_worker.errors import NonRetryableError
from sync_worker.interceptors import (
    ActivityHandler,
    ActivityInterceptorContext,
    PassthroughWorkerInterceptor,
    QueryTaskHandler,
    QueryTaskInterceptorContext,
    WorkflowTaskHandler,
    WorkflowTaskInterceptorContext,
)
from sync_worker.worker import Worker
from sync_worker.worker.interception import chain

from .fakes import FakeClient
from .test_worker_runtime import Running, activity_task, wait_for

# -- the chain itself -------------------------------------------------------------------------


class Recorder(PassthroughWorkerInterceptor):
    def __init__(self, name: str, log: List[str]) -> None:
        self.name = name
        self.log = log

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        self.log.append(f"{self.name}:before")
        try:
            return next(context)
        finally:
            self.log.append(f"{self.name}:after")


def _context(*args: Any) -> ActivityInterceptorContext:
    return ActivityInterceptorContext(worker_id="w", task_queue="q", task={"task_id": "t"},
                                      activity_type="a", args=tuple(args))


def test_first_interceptor_is_the_outermost() -> None:
    log: List[str] = []

    def core(context: ActivityInterceptorContext) -> Any:
        log.append("core")
        return sum(context.args)

    handler = chain([Recorder("outer", log), Recorder("inner", log)], "execute_activity", core, none_allowed=True)
    assert handler(_context(2, 3)) == 5
    assert log == ["outer:before", "inner:before", "core", "inner:after", "outer:after"]


def test_no_interceptors_is_the_core_itself() -> None:
    def core(context: ActivityInterceptorContext) -> Any:
        return context.args

    assert chain([], "execute_activity", core, none_allowed=True) is core


def test_an_interceptor_can_replace_args_and_result() -> None:
    class Doubler(PassthroughWorkerInterceptor):
        def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
            return ["wrapped", next(dataclasses.replace(context, args=tuple(a * 2 for a in context.args)))]

    handler = chain([Doubler()], "execute_activity", lambda c: list(c.args), none_allowed=True)
    assert handler(_context(1, 4)) == ["wrapped", [2, 8]]


def test_a_hook_returning_a_coroutine_or_a_forgotten_none_is_an_error() -> None:
    async def later() -> int:
        return 1

    class Sneaky(PassthroughWorkerInterceptor):
        def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
            return later()

    with pytest.raises(TypeError, match="returned a coroutine"):
        chain([Sneaky()], "execute_activity", lambda c: 1, none_allowed=True)(_context())

    class Forgetful(PassthroughWorkerInterceptor):
        def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> Any:
            next(context)

    query = QueryTaskInterceptorContext(worker_id="w", task_queue="q", task={})
    with pytest.raises(TypeError, match="returned None"):
        chain([Forgetful()], "execute_query_task", lambda c: "answer", none_allowed=False)(query)


# -- construction -------------------------------------------------------------------------------


class AsyncActivityHook(PassthroughWorkerInterceptor):
    async def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:  # type: ignore[override]
        return next(context)


class AsyncCallable:
    async def __call__(self, context: Any, next: Callable[[Any], Any]) -> Any:
        return next(context)


class AsyncCallableHook(PassthroughWorkerInterceptor):
    def __init__(self) -> None:
        self.execute_query_task = AsyncCallable()  # type: ignore[assignment]


class OnlyActivityHook:
    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        return next(context)


@pytest.mark.parametrize(("interceptors", "message"), [
    ([AsyncActivityHook()], r"AsyncActivityHook\)\.execute_activity is an 'async def'"),
    ([PassthroughWorkerInterceptor(), AsyncCallableHook()], r"#1 .*execute_query_task is an 'async def'"),
    ([PassthroughWorkerInterceptor], "is the class PassthroughWorkerInterceptor; pass an instance"),
    ([OnlyActivityHook()], "has no callable execute_workflow_task"),
    (PassthroughWorkerInterceptor(), "must be a sequence of interceptor instances"),
])
def test_unusable_interceptors_are_refused_at_construction(interceptors: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Worker(FakeClient(), task_queue="q", activities=[echo_args], interceptors=interceptors, pool="threads")


def test_valid_interceptors_are_kept_in_order() -> None:
    first, second = PassthroughWorkerInterceptor(), Recorder("r", [])
    worker = Worker(FakeClient(), task_queue="q", activities=[echo_args], interceptors=[first, second],
                    pool="threads")
    assert worker.interceptors == (first, second)


# -- activity tasks through a running worker -------------------------------------------------------


@activity.defn(name="ic.echo_args")
def echo_args(*args: Any) -> Any:
    return {"args": list(args), "task_id": activity.context().info.task_id}


class ActivitySpy(PassthroughWorkerInterceptor):
    def __init__(self) -> None:
        self.seen: List[Dict[str, Any]] = []
        self.lock = threading.Lock()

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        inside = activity.context().info  # the activity slot is already set up
        result = next(context)
        with self.lock:
            self.seen.append({"context": context, "slot_task_id": inside.task_id, "result": result})
        return result


class Refuser(PassthroughWorkerInterceptor):
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.calls = 0

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        self.calls += 1
        raise self.error


def test_activity_contexts_carry_ids_and_args_and_results_flow_back() -> None:
    client = FakeClient()
    spy = ActivitySpy()
    worker = Worker(client, task_queue="q-ic", activities=[echo_args], interceptors=[spy], pool="threads")
    with Running(worker):
        client.activity_tasks.put(activity_task("t1", "ic.echo_args", 1, "two"))
        wait_for(lambda: len(client.find("complete_activity")) == 1)
        worker.stop()
    assert client.find("complete_activity") == [("complete_activity", "t1", {"args": [1, "two"], "task_id": "t1"})]
    (seen,) = spy.seen
    context: ActivityInterceptorContext = seen["context"]
    assert (context.worker_id, context.task_queue, context.namespace) == (worker.worker_id, "q-ic", "default")
    assert context.activity_type == "ic.echo_args" and context.args == (1, "two")
    assert context.task["task_id"] == "t1" and context.task["activity_attempt_id"] == "t1-a1"
    assert seen["slot_task_id"] == "t1"
    assert seen["result"] == {"args": [1, "two"], "task_id": "t1"}


def test_interceptor_exceptions_fail_the_activity_like_activity_exceptions() -> None:
    client = FakeClient()
    fatal = Refuser(NonRetryableError("tenant suspended", code=403))
    worker = Worker(client, task_queue="q", activities=[echo_args], interceptors=[fatal], pool="threads")
    with Running(worker):
        client.activity_tasks.put(activity_task("fatal", "ic.echo_args"))
        wait_for(lambda: len(client.find("fail_activity")) == 1)
        fatal.error = ConnectionError("database went away")
        client.activity_tasks.put(activity_task("retry", "ic.echo_args"))
        wait_for(lambda: len(client.find("fail_activity")) == 2)
        worker.stop()
    assert client.find("complete_activity") == []
    fails = {c[1]: c[2] for c in client.find("fail_activity")}
    assert fails["fatal"]["non_retryable"] is True and fails["fatal"]["code"] == 403
    assert fails["fatal"]["type"] == "NonRetryableError" and fails["fatal"]["message"] == "tenant suspended"
    assert fails["retry"]["type"] == "ConnectionError" and "non_retryable" not in fails["retry"]
    assert "in execute_activity" in fails["retry"]["stack_trace"]  # raised by the interceptor's hook
    assert fatal.calls == 2


# -- workflow and query tasks ------------------------------------------------------------------------


class Outcome:
    def __init__(self, commands: List[Dict[str, Any]], failure: Any = None, value: Any = None) -> None:
        self.commands = commands
        self.failure = failure
        self.value = value


class WorkflowStub:
    __workflow_name__ = "wf.stub"


class TaskSpy(PassthroughWorkerInterceptor):
    def __init__(self, log: List[Any]) -> None:
        self.log = log

    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler) -> Any:
        if context.task["task_id"] == "explode":
            raise RuntimeError("tracing backend unavailable")
        if context.task["task_id"] == "forgot":
            next(context)
            return None
        outcome = next(context)
        self.log.append(("workflow", context.task["task_id"], context.worker_id, context.task_queue,
                         context.namespace, outcome.commands))
        return outcome

    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> Any:
        if context.task["query_name"] == "explode":
            raise PermissionError("query not allowed here")
        outcome = next(context)
        self.log.append(("query", context.task["query_task_id"], context.task_queue, outcome.value))
        return outcome


def test_workflow_task_interceptor_sees_the_outcome_and_its_errors_fail_the_task() -> None:
    client = FakeClient()
    log: List[Any] = []

    def executor(registry: Any, task: Dict[str, Any], events: List[Dict[str, Any]], *, task_queue: str) -> Any:
        log.append(("executor", task["task_id"]))
        return Outcome([{"type": "complete_workflow"}])

    worker = Worker(client, task_queue="q-wf", workflows=[WorkflowStub], interceptors=[TaskSpy(log)],
                    pool="threads")
    worker.workflows._registry = object()
    worker.dispatcher.workflow_executor = executor

    def wf_task(task_id: str) -> Dict[str, Any]:
        return {"task_id": task_id, "workflow_task_attempt": 1, "workflow_type": "wf.stub",
                "history_events": [{"event_type": "first"}], "next_history_page_token": None}

    with Running(worker):
        client.workflow_tasks.put(wf_task("ok"))
        wait_for(lambda: len(client.find("complete_workflow")) == 1)
        client.workflow_tasks.put(wf_task("explode"))
        client.workflow_tasks.put(wf_task("forgot"))
        wait_for(lambda: len(client.find("fail_workflow")) == 2)
        assert worker.status().role("workflow").consecutive_failures == 0  # the poller kept going
        worker.stop()
    assert ("workflow", "ok", worker.worker_id, "q-wf", "default", [{"type": "complete_workflow"}]) in log
    assert ("executor", "explode") not in log  # the interceptor raised before next()
    fails = {c[1]: c[2] for c in client.find("fail_workflow")}
    assert fails["explode"]["type"] == "RuntimeError"
    assert "tracing backend unavailable" in fails["explode"]["message"]
    assert fails["forgot"]["type"] == "TypeError" and "returned None" in fails["forgot"]["message"]
    assert [c[1] for c in client.find("complete_workflow")] == ["ok"]


def test_query_task_interceptor_errors_become_query_rejected_failures() -> None:
    client = FakeClient(query_tasks=True)
    log: List[Any] = []

    def query_executor(registry: Any, task: Dict[str, Any]) -> Any:
        return Outcome([], value={"count": 3})

    worker = Worker(client, task_queue="q-query", workflows=[WorkflowStub], interceptors=[TaskSpy(log)],
                    pool="threads")
    worker.workflows._registry = object()
    worker.dispatcher.query_executor = query_executor
    with Running(worker):
        client.query_tasks_queue.put({"query_task_id": "q1", "query_task_attempt": 1, "query_name": "count"})
        client.query_tasks_queue.put({"query_task_id": "q2", "query_task_attempt": 1, "query_name": "explode"})
        wait_for(lambda: len(client.find("complete_query")) + len(client.find("fail_query")) == 2)
        worker.stop()
    assert client.find("complete_query") == [("complete_query", "q1", {"count": 3})]
    assert log == [("query", "q1", "q-query", {"count": 3})]
    failure = client.find("fail_query")[0][2]
    assert failure["reason"] == "query_rejected" and failure["type"] == "PermissionError"
    assert failure["message"] == "query not allowed here"

