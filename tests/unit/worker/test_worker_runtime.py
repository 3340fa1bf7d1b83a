"""Worker logic against an in-memory fake client (see fakes.py for why a fake here)."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest

from sync_worker import activity, payloads
from sync_worker.errors import InvalidArgument, ServerError, ServerUnavailable
from sync_worker.worker import InMemoryMetrics, ShutdownIncomplete, Worker, WorkerState
from sync_worker.worker.workflow_tasks import WAITING_FOR_HISTORY_FAILURE

from .fakes import TOKEN, FakeClient, in_thread


def activity_task(task_id: str, activity_type: str, *args: Any) -> Dict[str, Any]:
    return {"task_id": task_id, "activity_attempt_id": f"{task_id}-a1", "activity_type": activity_type,
            "attempt_number": 1, "payload_codec": "avro", "arguments": payloads.envelope(list(args))}


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


class Running:
    """Runs worker.run() in a thread; joins it on exit."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: List[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as error:
            self.error.append(error)

    def __enter__(self) -> Running:
        self.thread.start()
        wait_for(lambda: self.worker.state is not WorkerState.STARTING)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.worker.stop(cold=True)
        except BaseException:
            pass
        self.thread.join(10)
        assert not self.thread.is_alive()


@activity.defn(name="rt.echo")
def echo(value: Any) -> Any:
    return value


@activity.defn(name="rt.boom")
def boom() -> None:
    raise ValueError("exploded")


release_block = threading.Event()


@activity.defn(name="rt.block")
def block() -> str:
    release_block.wait(10)
    return "late"


def test_activity_success_failure_unknown_type_and_metrics() -> None:
    client = FakeClient()
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue="q", activities=[echo, boom], metrics=metrics, heartbeat_interval=0.05)
    with Running(worker):
        client.activity_tasks.put(activity_task("t1", "rt.echo", {"k": [1, 2]}))
        client.activity_tasks.put(activity_task("t2", "rt.boom"))
        client.activity_tasks.put(activity_task("t3", "rt.missing"))
        wait_for(lambda: len(client.find("complete_activity")) + len(client.find("fail_activity")) == 3)
        wait_for(lambda: len(client.find("heartbeat")) >= 2)
        worker.stop()
    assert client.find("complete_activity") == [("complete_activity", "t1", {"k": [1, 2]})]
    fails = {c[1]: c[2] for c in client.find("fail_activity")}
    assert fails["t2"]["type"] == "ValueError" and fails["t2"]["message"] == "exploded"
    assert "non_retryable" not in fails["t2"]
    assert fails["t3"] == {"message": "no activity registered for 'rt.missing'"}
    assert metrics.counter("durable_workflow_worker_tasks", outcome="completed") == 1
    assert metrics.counter("durable_workflow_worker_tasks", outcome="failed") == 1
    assert metrics.counter("durable_workflow_worker_tasks", outcome="no_handler") == 1
    assert metrics.counter("durable_workflow_worker_polls", outcome="task") == 3
    heartbeat = client.find("heartbeat")[0][1]
    assert heartbeat["worker_id"] == worker.worker_id
    assert set(heartbeat["task_slots"]) == {"workflow_available", "activity_available", "session_available"}
    assert "process_id" in heartbeat["process_metrics"]
    assert client.find("deregister_fenced") == [("deregister_fenced", worker.worker_id, TOKEN)]
    assert worker.state is WorkerState.STOPPED


def test_blocked_activity_does_not_stall_other_slots_and_deadline_abandons_it() -> None:
    release_block.clear()
    client = FakeClient()
    worker = Worker(client, task_queue="q", activities=[echo, block], shutdown_timeout=0.5,
                    max_concurrent_activity_tasks=2)
    with Running(worker):
        client.activity_tasks.put(activity_task("slow", "rt.block"))
        wait_for(lambda: worker.task_slots()["activity_available"] == 1)
        client.activity_tasks.put(activity_task("fast", "rt.echo", 5))
        wait_for(lambda: len(client.find("complete_activity")) == 1)
        started = time.monotonic()
        with pytest.raises(ShutdownIncomplete) as first:
            worker.stop()
        assert 0.4 < time.monotonic() - started < 3.0
        with pytest.raises(ShutdownIncomplete) as second:
            worker.stop()
        assert second.value is first.value  # one shared shutdown result
        assert first.value.running == ["activity:slow"]
        assert worker.state is WorkerState.FAILED
        release_block.set()
        time.sleep(0.2)
    assert client.find("complete_activity") == [("complete_activity", "fast", 5)]  # never "late"
    assert client.find("deregister_fenced") == []  # registration kept


def test_registration_failure_sends_no_deregistration() -> None:
    client = FakeClient()
    client.register_error = InvalidArgument(422, {"reason": "validation_failed"})
    worker = Worker(client, task_queue="q", activities=[echo])
    with pytest.raises(InvalidArgument):
        worker.run()
    worker.stop()  # nothing to undo; does not raise
    assert "deregister_fenced" not in client.names() and "poll" not in client.names()
    assert worker.state is WorkerState.FAILED
    assert not worker.status().live and not worker.status().ready


class PollerCrash(BaseException):
    pass


def test_loop_error_keeps_the_deregistration_error_as_cause() -> None:
    client = FakeClient(fenced=False)
    client.poll_errors.append(PollerCrash())
    worker = Worker(client, task_queue="q", activities=[echo])
    dereg_error = ServerError(500, {"reason": "boom"})
    client.deregister_legacy_error = dereg_error

    def failing_legacy(worker_id: str, *, timeout: float) -> Dict[str, Any]:
        raise dereg_error

    client.deregister_worker_legacy = failing_legacy  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="activity poller exited") as caught:
        worker.run()
    assert caught.value.__cause__ is dereg_error
    assert worker.state is WorkerState.FAILED


def test_a_poller_that_dies_fails_the_worker_at_once_not_at_the_next_supervisor_tick() -> None:
    client = FakeClient(fenced=False)
    worker = Worker(client, task_queue="q", activities=[echo])
    runner, outcome = in_thread(worker.run)
    wait_for(lambda: worker.state is WorkerState.RUNNING and client.find("poll"))
    client.poll_errors.append(PollerCrash())  # the poller's next poll dies with it
    crashed = time.monotonic()
    client.activity_tasks.put(activity_task("t1", "rt.echo", 1))  # ends the poll in flight
    runner.join(10)
    assert not runner.is_alive()
    assert outcome and isinstance(outcome[0], RuntimeError) and "activity poller exited" in str(outcome[0])
    # the supervisor's periodic tick is 5 s; a poller's exit wakes it without waiting for that
    assert time.monotonic() - crashed < 4.0
    assert worker.state is WorkerState.FAILED


def test_poll_errors_back_off_and_recover() -> None:
    client = FakeClient()
    client.poll_errors.extend([ServerUnavailable(503, {}), ServerUnavailable(503, {})])
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue="q", activities=[echo], metrics=metrics)
    with Running(worker):
        wait_for(lambda: metrics.counter("durable_workflow_worker_polls", outcome="error") == 2)
        client.activity_tasks.put(activity_task("t1", "rt.echo", 1))
        wait_for(lambda: len(client.find("complete_activity")) == 1, timeout=6)
        assert worker.status().ready
        worker.stop()
    errors = [e for e in metrics.polls("activity") if e.outcome == "error"]
    gap = errors[1].at - errors[0].at
    assert 0.5 <= gap <= 1.5  # first delay is drawn from [0.5, 1.0]


class FakeRegistry:
    pass


def test_workflow_task_paths_with_a_fake_registry() -> None:
    client = FakeClient()
    calls: List[Any] = []

    class Outcome:
        def __init__(self, commands: List[Dict[str, Any]], failure: Any = None) -> None:
            self.commands = commands
            self.failure = failure

    def executor(registry: Any, task: Dict[str, Any], events: List[Dict[str, Any]], *, task_queue: str) -> Any:
        calls.append((registry, task["task_id"], [e["event_type"] for e in events], task_queue))
        return {
            "ok": Outcome([{"type": "complete_workflow"}]),
            "empty": Outcome([]),
            "bad": Outcome([], {"message": "replay failed", "type": "NonDeterministicReplayError"}),
            "retry": Outcome([{"type": "complete_workflow"}]),
            "refused": Outcome([{"type": "complete_workflow"}]),
            "fenced": Outcome([{"type": "complete_workflow"}]),
        }[task["task_id"]]

    class WorkflowStub:
        __workflow_name__ = "wf.stub"

    registry = FakeRegistry()
    worker = Worker(client, task_queue="q", workflows=[WorkflowStub])
    worker.workflows._registry = registry
    worker.dispatcher.workflow_executor = executor

    def wf_task(task_id: str, token: Any = None) -> Dict[str, Any]:
        return {"task_id": task_id, "workflow_task_attempt": 2, "workflow_type": "wf.stub",
                "history_events": [{"event_type": "first"}], "next_history_page_token": token}

    with Running(worker):
        client.workflow_tasks.put(wf_task("ok", token="p2"))
        wait_for(lambda: len(client.find("complete_workflow")) == 1)
        client.workflow_tasks.put(wf_task("empty"))
        client.workflow_tasks.put(wf_task("bad"))
        wait_for(lambda: len(client.find("fail_workflow")) == 2)
        client.complete_errors.extend([ServerUnavailable(503, {}), ServerUnavailable(503, {})])
        client.workflow_tasks.put(wf_task("retry"))
        wait_for(lambda: len([c for c in client.find("complete_workflow") if c[1] == "retry"]) == 3)
        client.complete_errors.append(InvalidArgument(422, {"reason": "invalid_command"}))
        client.workflow_tasks.put(wf_task("refused"))
        wait_for(lambda: len(client.find("fail_workflow")) == 3)
        client.complete_errors.append(ServerError(409, {"reason": "lease_expired"}))
        client.workflow_tasks.put(wf_task("fenced"))
        wait_for(lambda: len([c for c in client.find("complete_workflow") if c[1] == "fenced"]) == 1)
        time.sleep(0.2)
        client.workflow_tasks.put(wf_task("loop", token="loop"))
        wait_for(lambda: len(client.find("fail_workflow")) == 4)
        worker.stop()
    assert calls[0] == (registry, "ok", ["first", "page-p2"], "q")
    fails = {c[1]: c[2] for c in client.find("fail_workflow")}
    assert fails["empty"] == WAITING_FOR_HISTORY_FAILURE
    assert fails["bad"]["type"] == "NonDeterministicReplayError"
    assert fails["refused"]["message"].startswith("workflow task completion failed after commands were produced")
    assert "fenced" not in fails
    assert "workflow history paging did not advance" in fails["loop"]["message"]
    register = client.find("register")[0][1]
    assert register["supported_workflow_types"] == ["wf.stub"]


def test_query_tasks_run_on_their_own_poller() -> None:
    client = FakeClient(query_tasks=True)

    class Answer:
        def __init__(self, value: Any = None, failure: Any = None) -> None:
            self.value = value
            self.failure = failure

    def query_executor(registry: Any, task: Dict[str, Any]) -> Any:
        if task["query_name"] == "bad":
            return Answer(failure={"message": "no", "reason": "rejected_unknown_query"})
        return Answer(value={"count": 3})

    class WorkflowStub:
        __workflow_name__ = "wf.stub"

    worker = Worker(client, task_queue="q", workflows=[WorkflowStub])
    worker.workflows._registry = FakeRegistry()
    worker.dispatcher.query_executor = query_executor
    with Running(worker):
        client.query_tasks_queue.put({"query_task_id": "q1", "query_task_attempt": 1, "query_name": "count"})
        client.query_tasks_queue.put({"query_task_id": "q2", "query_task_attempt": 1, "query_name": "bad"})
        wait_for(lambda: len(client.find("complete_query")) + len(client.find("fail_query")) == 2)
        assert {r.role for r in worker.status().roles} >= {"workflow", "query", "heartbeat"}
        worker.stop()
    assert client.find("complete_query") == [("complete_query", "q1", {"count": 3})]
    assert client.find("fail_query")[0][2]["reason"] == "rejected_unknown_query"
    assert "query_tasks" in client.find("register")[0][1]["capabilities"]


def test_typed_capacity_backpressure_waits_the_server_delay_without_backoff() -> None:
    client = FakeClient()
    refusal = ServerError(429, {"reason": "long_poll_capacity_exhausted", "poll_status": "long_poll_capacity_exhausted",
                                "task": None, "task_kind": "activity_task", "task_queue": "q", "retryable": True,
                                "retry_after_seconds": 1})
    client.poll_errors.extend([ServerUnavailable(503, {}), refusal])
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue="q", activities=[echo], metrics=metrics)
    with Running(worker):
        wait_for(lambda: metrics.counter("durable_workflow_worker_polls", outcome="backpressure") == 1, timeout=5)
        poller = worker.source.pollers[0]
        # the 503 doubled the ceiling to 2 s; the 429 neither advanced nor reset it
        assert poller.backoff.ceiling == 2.0 and poller.backoff.consecutive_failures == 1
        wait_for(lambda: len(client.find("poll")) >= 3, timeout=5)
        worker.stop()
    starts = [c[2] for c in client.find("poll") if c[1] == "activity"]
    # poll 1 failed (503) -> back-off in [0.5, 1]; poll 2 refused (429) -> exactly 1 s
    assert 0.45 <= starts[1] - starts[0] <= 1.3
    assert 0.95 <= starts[2] - starts[1] <= 1.3


def test_a_worker_with_update_validators_refuses_a_server_that_cannot_validate() -> None:
    from sync_worker import workflow

    @workflow.defn(name="unit.runtime.validated")
    class Validated:
        @workflow.update("set")
        def set(self, value: int) -> int:
            return value

        @set.validator
        def check(self, value: int) -> None:
            pass

        def run(self, ctx: Any) -> Any:
            return None

    client = FakeClient()  # advertises no synchronous update validation
    worker = Worker(client, task_queue="q", workflows=[Validated])
    with pytest.raises(RuntimeError, match="this worker declares update validators, but the server does not "
                                           "advertise synchronous pre-accept update validation"):
        worker.run()
    assert "register" not in client.names() and worker.state is WorkerState.FAILED
