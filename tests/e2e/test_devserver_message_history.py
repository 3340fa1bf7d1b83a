"""The dev server records what the real server records for message-driven runs (issue 21).

* every signal of each racing shape gets exactly one ``SignalApplied``, in the order received;
* an update applied while a condition wait stays open does not record that wait as opened again;
* tasks go only to workers that registered their type: two workers on one queue with different
  activity (or workflow) types each run their own, and nobody fails a task for "no activity
  registered"; an activity type no worker registered waits for a worker that has it;
* pausing a paused schedule and resuming an active one succeed idempotently (2xx, not 409).

Real workers (threads, then gevent in the second run of the suite) against the real dev server,
over real sockets.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sync_worker import activity, errors, workflow
from sync_worker.client import Client
from sync_worker.runtime.metrics import TASKS
from sync_worker.worker import InMemoryMetrics, Worker

from . import _message_shapes as shapes
from ._message_shapes import BATCH_DRAIN, STOP_FIRST, TaskGate, history, kinds, running_workers, stranded
from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


# -- one SignalApplied per signal, in order ------------------------------------------------------


def _signal_ids(events: List[Dict[str, Any]], kind: str) -> List[str]:
    return [str((event.get("payload") or {}).get("signal_id")) for event in events if event.get("event_type") == kind]


def _check_signals_applied(events: List[Dict[str, Any]], *, complete: bool) -> None:
    """No signal applied twice or before it was received; applied in the order received; all of
    them once the run completed."""
    received, applied = _signal_ids(events, "SignalReceived"), _signal_ids(events, "SignalApplied")
    twice = sorted({signal for signal in applied if applied.count(signal) > 1})
    assert not twice, f"signals applied more than once: {twice}; {kinds(events)}"
    assert applied == received[:len(applied)], f"SignalApplied order {applied} != SignalReceived order {received}"
    seen = set()
    for event in events:
        signal = str((event.get("payload") or {}).get("signal_id"))
        if event.get("event_type") == "SignalReceived":
            seen.add(signal)
        elif event.get("event_type") == "SignalApplied":
            assert signal in seen, f"signal {signal} applied before it was received: {kinds(events)}"
    if complete:
        assert applied == received, f"completed run: SignalApplied {applied} != SignalReceived {received}"


def _race(client: Client, gate: TaskGate, workflow_id: str, first: Tuple[Any, ...],
          *meanwhile: Tuple[Any, ...]) -> None:
    hold = gate.arm(workflow_id)
    _send(client, workflow_id, first)
    hold.wait_held()
    try:
        for message in meanwhile:
            _send(client, workflow_id, message)
    finally:
        hold.release()


def _send(client: Client, workflow_id: str, message: Tuple[Any, ...]) -> None:
    if message[0] == "add":
        client.update_workflow(workflow_id, "add", args=list(message[1:]), wait_for="accepted")
    else:
        client.signal_workflow(workflow_id, message[0], args=list(message[1:]))


def _end(client: Client, workflow_id: str, timeout: float = 20.0) -> bool:
    """Wait until the run completes (True) or strands on a replay error (False: the worker's bug,
    not the server's -- the history so far is still checked)."""
    wait_for(lambda: client.describe_workflow(workflow_id).is_terminal or stranded(client, workflow_id),
             timeout=timeout)
    return client.describe_workflow(workflow_id).is_terminal


SCENARIOS = ["batch_drain", "stop_first", "wait_true_first", "update_race"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_signal_is_applied_exactly_once_in_order(client: Client, scenario: str) -> None:
    gate, queue = TaskGate(), unique_queue(f"hist-{scenario}")
    shape = STOP_FIRST if scenario == "stop_first" else BATCH_DRAIN
    workflow_id = shapes.start(client, shape, queue, prefix="hist")
    if scenario == "wait_true_first":
        client.signal_workflow(workflow_id, "push", args=[1])
    with running_workers(client, queue, [{"sticky_cache_capacity": 0}], gate):
        shapes.wait_quiescent(client, workflow_id)
        if scenario == "batch_drain":
            _race(client, gate, workflow_id, ("push", 1), ("push", 2))
        elif scenario == "stop_first":
            _race(client, gate, workflow_id, ("push", 1), ("push", 2), ("stop",))
        elif scenario == "wait_true_first":
            _race(client, gate, workflow_id, ("push", 2), ("stop",))
        else:
            _race(client, gate, workflow_id, ("push", 1), ("add", 2), ("push", 3))
        if scenario in ("batch_drain", "update_race"):
            wait_for(lambda: shapes.quiescent(client, workflow_id) or stranded(client, workflow_id), timeout=20)
            if not stranded(client, workflow_id):
                client.signal_workflow(workflow_id, "stop")
        complete = _end(client, workflow_id)
    _check_signals_applied(history(client, workflow_id), complete=complete)


# -- an update does not re-open a still-open wait ------------------------------------------------


def _reopens_after_update(events: List[Dict[str, Any]]) -> List[int]:
    """Positions of a ConditionWaitOpened that follows an UpdateCompleted (only bookkeeping in
    between) and re-opens the very wait that was open when the update was applied."""
    found = []
    open_wait: Optional[Dict[str, Any]] = None
    after_update = False
    for index, event in enumerate(events):
        kind, payload = event.get("event_type"), event.get("payload") or {}
        if kind == "ConditionWaitOpened":
            same = open_wait is not None and all(
                payload.get(key) == open_wait.get(key) for key in ("condition_key", "condition_definition_fingerprint"))
            if after_update and same:
                found.append(index)
            open_wait, after_update = payload, False
        elif kind in ("ConditionWaitSatisfied", "ConditionWaitTimedOut"):
            open_wait, after_update = None, False
        elif kind == "UpdateCompleted":
            after_update = True
        elif kind not in ("MessageCursorAdvanced", "UpdateApplied", "WorkflowTaskScheduled", "WorkflowTaskStarted",
                          "WorkflowTaskCompleted"):
            after_update = False
    return found


def _task_count(workers: List[Worker]) -> float:
    return sum(worker.metrics.counter(TASKS, task_kind="workflow") for worker in workers
               if isinstance(worker.metrics, InMemoryMetrics))


def _tasks_settle(workers: List[Worker], before: float, quiet: float = 0.6, timeout: float = 15.0) -> None:
    """Wait until the workers ran more workflow tasks than ``before`` and then ran none for ``quiet`` s."""
    deadline = time.monotonic() + timeout
    last, since = _task_count(workers), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = _task_count(workers)
        if now != last:
            last, since = now, time.monotonic()
        elif now > before and time.monotonic() - since >= quiet:
            return
    raise AssertionError("the workers' workflow tasks did not settle")


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed-with-timeout"])
@pytest.mark.parametrize("sticky", [0, 16], ids=["cold", "sticky"])
def test_an_update_applied_during_an_open_wait_does_not_reopen_it(client: Client, keyed: bool, sticky: int) -> None:
    shape = {**BATCH_DRAIN, "keyed": keyed}
    queue = unique_queue("hist-peek")
    with running_workers(client, queue, [{"sticky_cache_capacity": sticky}]) as workers:
        workflow_id = shapes.start(client, shape, queue, prefix="peek")
        shapes.wait_quiescent(client, workflow_id)
        for round_ in range(2):
            before = _task_count(workers)
            answer = client.update_workflow(workflow_id, "peek", wait_for="completed", wait_timeout_seconds=15)
            assert answer.get("result") == 0, answer
            _tasks_settle(workers, before)
            events = history(client, workflow_id)
            assert not _reopens_after_update(events), (
                f"round {round_}: the open wait was recorded as opened again after the update: {kinds(events)}")
        client.signal_workflow(workflow_id, "push", args=["x"])
        shapes.wait_quiescent(client, workflow_id)
        client.signal_workflow(workflow_id, "stop")
        assert shapes.settle(client, workflow_id) == ["x"]
    events = history(client, workflow_id)
    assert not _reopens_after_update(events), kinds(events)
    opened = kinds(events).count("ConditionWaitOpened")
    assert opened == 2, f"expected one open before and one after the push, got {opened}: {kinds(events)}"
    shapes.check_cold_replay(client, workflow_id, shape, ["x"])


# -- routing by registered type -------------------------------------------------------------------

_RAN: Dict[str, List[Tuple[str, str]]] = {}
_RAN_LOCK = threading.Lock()


def _note(kind: str, value: Any) -> Any:
    info = activity.context().info
    with _RAN_LOCK:
        _RAN.setdefault(info.workflow_id or "", []).append((kind, info.worker_id))
    return value


@activity.defn(name="e2e.route.left")
def left(value: int) -> str:
    return _note("left", f"L{value}")


@activity.defn(name="e2e.route.right")
def right(value: int) -> str:
    return _note("right", f"R{value}")


@activity.defn(name="e2e.route.rare")
def rare(value: int) -> str:
    return _note("rare", f"rare{value}")


@workflow.defn(name="e2e.route.pairs")
class Pairs:
    def run(self, ctx: Any, rounds: int) -> Any:
        out = []
        for step in range(rounds):
            out.append((yield [ctx.schedule_activity("e2e.route.left", [step]),
                               ctx.schedule_activity("e2e.route.right", [step])]))
        return out


@workflow.defn(name="e2e.route.rare_once")
class RareOnce:
    def run(self, ctx: Any) -> Any:
        return (yield ctx.schedule_activity("e2e.route.rare", [1]))


@workflow.defn(name="e2e.route.only_left")
class OnlyLeft:
    def run(self, ctx: Any, n: int) -> Any:
        return f"left-{n}"


@workflow.defn(name="e2e.route.only_right")
class OnlyRight:
    def run(self, ctx: Any, n: int) -> Any:
        return f"right-{n}"


def _router_worker(client: Client, queue: str, **kwargs: Any) -> Worker:
    return make_worker(client, task_queue=queue, poll_timeout=2.0, metrics=InMemoryMetrics(), **kwargs)


def _no_handler(worker: Worker) -> float:
    metrics = worker.metrics
    assert isinstance(metrics, InMemoryMetrics)
    return metrics.counter(TASKS, outcome="no_handler")


def _unregistered_failures(events: List[Dict[str, Any]]) -> List[str]:
    return [str(event.get("event_type")) for event in events
            if "no activity registered" in repr(event.get("payload")) or event.get("event_type") == "ActivityFailed"]


def _no_unregistered_logs(caplog: pytest.LogCaptureFixture) -> None:
    logged = [record.getMessage() for record in caplog.records if "no activity registered" in record.getMessage()]
    assert not logged, f"a worker logged an activity it does not have: {logged[:3]}"


def test_each_activity_runs_on_the_worker_that_registered_its_type(client: Client,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # Two workers on one queue, each with one of the two activity types. The one with "right"
    # starts first and polls alone for a while: the "left" activities must wait for their worker.
    queue = unique_queue("route-act")
    righty = _router_worker(client, queue, workflows=[Pairs], activities=[right],
                            worker_id=f"righty-{uuid.uuid4().hex[:6]}")
    lefty = _router_worker(client, queue, workflows=[Pairs], activities=[left],
                           worker_id=f"lefty-{uuid.uuid4().hex[:6]}")
    rounds = 4
    with RunningWorker(righty):
        handles = [client.start_workflow("e2e.route.pairs", rounds, task_queue=queue) for _ in range(3)]
        for handle in handles:
            wait_for(lambda handle=handle: kinds(history(client, handle.workflow_id)).count("ActivityScheduled") >= 2,
                     timeout=15)
        time.sleep(1.0)  # righty polls alone
        with RunningWorker(lefty):
            results = []
            for handle in handles:
                try:
                    results.append(handle.result(timeout=30))
                except errors.WorkflowFailed as error:
                    pytest.fail(f"{handle.workflow_id} failed: {error}")
    assert results == [[[f"L{step}", f"R{step}"] for step in range(rounds)]] * 3
    for handle in handles:
        ran = _RAN[handle.workflow_id]
        assert {worker for kind, worker in ran if kind == "left"} == {lefty.worker_id}, ran
        assert {worker for kind, worker in ran if kind == "right"} == {righty.worker_id}, ran
        events = history(client, handle.workflow_id)
        assert not _unregistered_failures(events), _unregistered_failures(events)
        attempts = [event["payload"].get("attempt_number") for event in events
                    if event["event_type"] == "ActivityStarted"]
        assert attempts == [1] * (2 * rounds), f"activities were retried: {attempts}"
    assert _no_handler(lefty) == 0 and _no_handler(righty) == 0, (
        f"a worker was handed an activity it does not have: lefty {_no_handler(lefty)}, righty {_no_handler(righty)}")
    _no_unregistered_logs(caplog)


def test_an_activity_no_worker_registered_waits_for_one_that_has_it(client: Client,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    queue = unique_queue("route-rare")
    common = _router_worker(client, queue, workflows=[RareOnce], activities=[left])
    with RunningWorker(common):
        handle = client.start_workflow("e2e.route.rare_once", task_queue=queue)
        wait_for(lambda: "ActivityScheduled" in kinds(history(client, handle.workflow_id)), timeout=15)
        time.sleep(1.5)  # several polls of the worker that lacks the type
        events = history(client, handle.workflow_id)
        assert "ActivityStarted" not in kinds(events), f"the activity went to a worker without it: {kinds(events)}"
        assert _no_handler(common) == 0, "a worker was handed an activity type it did not register"
        specialist = _router_worker(client, queue, activities=[rare])
        with RunningWorker(specialist):
            assert handle.result(timeout=20) == "rare1"
    assert [worker for _, worker in _RAN[handle.workflow_id]] == [specialist.worker_id]
    assert not _unregistered_failures(history(client, handle.workflow_id))
    _no_unregistered_logs(caplog)


def test_each_workflow_task_goes_to_a_worker_that_registered_its_type(client: Client) -> None:
    # The worker with only "only_right" polls alone first: "only_left" runs must wait for theirs.
    queue = unique_queue("route-wf")
    lefty = _router_worker(client, queue, workflows=[OnlyLeft])
    righty = _router_worker(client, queue, workflows=[OnlyRight])
    with RunningWorker(righty):
        handles = [(client.start_workflow(f"e2e.route.only_{side}", n, task_queue=queue), f"{side}-{n}")
                   for n in range(3) for side in ("left", "right")]
        time.sleep(1.0)
        with RunningWorker(lefty):
            for handle, expected in handles:
                assert handle.result(timeout=30) == expected
    for handle, _ in handles:
        raw = client.describe_workflow(handle.workflow_id).raw or {}
        assert not raw.get("last_task_failure"), f"{handle.workflow_id}: {raw.get('last_task_failure')}"
    for worker in (lefty, righty):
        metrics = worker.metrics
        assert isinstance(metrics, InMemoryMetrics)
        assert metrics.counter(TASKS, task_kind="workflow", outcome="failed") == 0, (
            f"{worker.worker_id} failed workflow tasks of a type it did not register")


# -- schedules: pause and resume are idempotent ---------------------------------------------------


def test_pausing_a_paused_schedule_and_resuming_an_active_one_succeed(client: Client) -> None:
    schedule_id = f"hist-sched-{uuid.uuid4().hex[:10]}"
    handle = client.create_schedule(schedule_id=schedule_id, spec={"cron_expressions": ["0 0 1 1 *"]},
                                    action={"workflow_type": "e2e.route.only_left", "task_queue": "nowhere",
                                            "input": [1]})

    def act(name: str) -> None:
        try:
            getattr(client, f"{name}_schedule")(schedule_id)
        except errors.ServerError as error:
            pytest.fail(f"{name} answered {error.status} {error.reason()!r}; expected an idempotent 2xx")

    try:
        act("resume")  # already active
        assert client.describe_schedule(schedule_id).status == "active"
        act("pause")
        act("pause")  # already paused
        assert client.describe_schedule(schedule_id).status == "paused"
        act("resume")
        act("resume")
        assert client.describe_schedule(schedule_id).status == "active"
    finally:
        handle.delete()
