"""Signal- and update-driven workflow shapes, a task gate and the checks of the message-race tests.

Issue 21: a message that arrives while a workflow task runs must be applied where the history
says the run applied it -- not at the wait the task had already passed. The tests built on this
module make that race deterministic with :class:`TaskGate`, a worker interceptor that holds a
workflow task *after* its outcome was computed and *before* it is reported, until the test has
sent what should arrive "meanwhile". Signals sent while a task is held are recorded on the
server after that task's claim (so the task did not apply them), exactly as under ordinary
timing -- only now every run takes that path.

:class:`MessageShape` is one workflow whose authoring shape is chosen by its start argument (a
small grammar: drain in batches or item by item, check the stop flag first or last, an optional
timer between batches, an optional keyed wait with a timeout that is never hit). It returns what
its activities returned, so a lost or duplicated item shows in the result.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from sync_worker import activity, payloads, workflow
from sync_worker.client import Client
from sync_worker.interceptors import PassthroughWorkerInterceptor, WorkflowTaskInterceptorContext
from sync_worker.worker import InMemoryMetrics, Worker
from sync_worker.workflow import CompleteWorkflow, replay

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

# -- shapes ------------------------------------------------------------------------------------

#: Drain the whole queue into one ``echo`` call; return once stopped with nothing queued.
BATCH_DRAIN: Dict[str, Any] = {"drain": "batch", "stop": "last"}
#: Branch on the stop flag right after the wait (stop: flush the rest through ``flush``).
STOP_FIRST: Dict[str, Any] = {"drain": "batch", "stop": "first"}

#: Activity calls per workflow id, in the order they ran: ``(activity type, argument)``.
CALLS: Dict[str, List[Tuple[str, Any]]] = {}
_CALLS_LOCK = threading.Lock()
#: Upper bound (seconds) of a random pause inside each activity; the randomized test sets it.
ACTIVITY_JITTER = [0.0]


def _record(kind: str, value: Any) -> Any:
    workflow_id = activity.context().info.workflow_id or ""
    with _CALLS_LOCK:
        CALLS.setdefault(workflow_id, []).append((kind, value))
    if ACTIVITY_JITTER[0] > 0:
        time.sleep(random.uniform(0, ACTIVITY_JITTER[0]))
    return value


@activity.defn(name="e2e.race.echo")
def echo(batch: List[Any]) -> List[Any]:
    return list(_record("echo", batch))


@activity.defn(name="e2e.race.flush")
def flush(batch: List[Any]) -> List[Any]:
    return list(_record("flush", batch))


@activity.defn(name="e2e.race.one")
def one(item: Any) -> Any:
    return _record("one", item)


ACTIVITIES = [echo, flush, one]


@workflow.defn(name="e2e.race.shape")
class MessageShape:
    """Items arrive by the ``push`` signal or the ``add`` update; ``stop`` ends the run.

    ``shape`` keys: ``drain`` ("batch": one ``echo(queue)`` per wake-up; "each": one ``one(item)``
    per item), ``stop`` ("first": right after the wait, a raised stop flag flushes whatever is
    queued through one ``flush`` call and returns; "last": drain first, return once stopped with
    nothing queued), ``timer`` (a zero-second timer after each drain), ``keyed`` (the wait has a
    key and a one-hour timeout, never hit). The result is everything the activities returned.
    """

    def __init__(self) -> None:
        self.queue: List[Any] = []
        self.stopped = False

    @workflow.signal("push")
    def push(self, item: Any) -> None:
        self.queue.append(item)

    @workflow.signal("stop")
    def stop(self) -> None:
        self.stopped = True

    @workflow.update("add")
    def add(self, item: Any) -> int:
        self.queue.append(item)
        return len(self.queue)

    @workflow.update("peek")
    def peek(self) -> int:
        """An update that changes nothing (so it cannot satisfy the wait)."""
        return len(self.queue)

    @workflow.query("queue")
    def queued(self) -> List[Any]:
        return list(self.queue)

    def take(self) -> List[Any]:
        batch, self.queue = self.queue, []
        return batch

    def run(self, ctx: Any, shape: Dict[str, Any]) -> Any:
        sent: List[Any] = []
        while True:
            if shape.get("keyed"):
                yield ctx.wait_condition(lambda: bool(self.queue) or self.stopped, key="inbox", timeout=3600)
            else:
                yield ctx.wait_condition(lambda: bool(self.queue) or self.stopped)
            if shape.get("stop") == "first" and self.stopped:
                flushed = yield ctx.schedule_activity("e2e.race.flush", [self.take()])
                return sent + list(flushed)
            drained = bool(self.queue)
            if shape.get("drain") == "each":
                while self.queue:
                    sent.append((yield ctx.schedule_activity("e2e.race.one", [self.queue.pop(0)])))
            elif self.queue:
                sent.extend((yield ctx.schedule_activity("e2e.race.echo", [self.take()])))
            if drained and shape.get("timer"):
                yield ctx.start_timer(0)
            if self.stopped and not self.queue:
                return sent


def batches(workflow_id: str, kind: Optional[str] = None) -> List[Any]:
    """The arguments of the activity calls of ``workflow_id`` (of one type, if given)."""
    with _CALLS_LOCK:
        return [value for call, value in CALLS.get(workflow_id, []) if kind is None or call == kind]


# -- holding a workflow task while messages arrive -----------------------------------------------


class Hold:
    """One armed hold: ``held`` is set once a task is held, ``release()`` lets it report."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        self.held = threading.Event()
        self._release = threading.Event()
        self.task_id: Optional[str] = None
        self.worker_id: Optional[str] = None

    def wait_held(self, timeout: float = 15.0) -> None:
        assert self.held.wait(timeout), f"no workflow task of {self.workflow_id} was leased within {timeout}s"

    def release(self) -> None:
        self._release.set()

    def hold(self, timeout: float) -> None:
        self.held.set()
        self._release.wait(timeout)


class TaskGate(PassthroughWorkerInterceptor):
    """Holds the next (non-update) workflow task of an armed workflow id after its outcome was
    computed and before it is reported, so messages sent meanwhile race a running task.

    The server fixed what that task applies when it leased it; what arrives during the hold is
    recorded after the claim, as when a task is slow. The hold gives up after ``max_hold``
    seconds (well inside the 30 s lease), so a forgotten release cannot wedge a worker.
    """

    def __init__(self, max_hold: float = 20.0) -> None:
        self._lock = threading.Lock()
        self._armed: Dict[str, Hold] = {}
        self.max_hold = max_hold

    def arm(self, workflow_id: str) -> Hold:
        hold = Hold(workflow_id)
        with self._lock:
            self._armed[workflow_id] = hold
        return hold

    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: Any) -> Any:
        outcome = next(context)
        task = context.task
        if task.get("workflow_update_id"):
            return outcome
        with self._lock:
            hold = self._armed.pop(str(task.get("workflow_id") or ""), None)
        if hold is not None:
            hold.task_id, hold.worker_id = str(task.get("task_id")), context.worker_id
            hold.hold(self.max_hold)
        return outcome


# -- worker set-ups ------------------------------------------------------------------------------

#: The replay paths each deterministic test runs on.
MODES = ("cold", "sticky", "two_workers", "updates")


def worker_configs(mode: str) -> List[Dict[str, Any]]:
    """Worker keyword arguments for a mode ("updates": a sticky worker; the test adds update tasks)."""
    if mode == "cold":
        return [{"sticky_cache_capacity": 0}]
    if mode in ("sticky", "updates"):
        return [{"sticky_cache_capacity": 16}]
    if mode == "two_workers":
        return [{"sticky_cache_capacity": 16}, {"sticky_cache_capacity": 0}]
    raise ValueError(mode)


@contextlib.contextmanager
def running_workers(client: Client, queue: str, configs: Sequence[Dict[str, Any]],
                    gate: Optional[TaskGate] = None) -> Iterator[List[Worker]]:
    """Workers of :class:`MessageShape` on ``queue`` (threads or gevent, as the suite runs)."""
    workers = [make_worker(client, task_queue=queue, workflows=[MessageShape], activities=ACTIVITIES,
                           poll_timeout=2.0, interceptors=[gate] if gate is not None else [],
                           metrics=InMemoryMetrics(), **config) for config in configs]
    with contextlib.ExitStack() as stack:
        for worker in workers:
            stack.enter_context(RunningWorker(worker))
        yield workers


def start(client: Client, shape: Dict[str, Any], queue: str, prefix: str = "race") -> str:
    workflow_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client.start_workflow("e2e.race.shape", dict(shape), task_queue=queue, workflow_id=workflow_id)
    return workflow_id


# -- reading runs --------------------------------------------------------------------------------

_BOOKKEEPING = frozenset({"WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
                          "WorkflowTaskFailed", "MessageCursorAdvanced", "ActivityHeartbeatRecorded"})


def history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    return list(client.iter_history(workflow_id, run_id))


def kinds(events: List[Dict[str, Any]]) -> List[str]:
    return [str(event.get("event_type")) for event in events]


def count(client: Client, workflow_id: str, kind: str) -> int:
    return kinds(history(client, workflow_id)).count(kind)


def decoded(payload: Dict[str, Any], key: str) -> Any:
    """An event payload's Avro value (an envelope, or a bare blob with the payload's codec)."""
    raw = payload.get(key)
    if raw is None:
        return None
    if isinstance(raw, dict):
        return payloads.decode_envelope(raw)
    return payloads.decode_envelope(raw, codec=payload.get("payload_codec") or "avro")


def quiescent(client: Client, workflow_id: str) -> bool:
    """The run's last task left it waiting on a condition, with every signal it received applied
    and every update it accepted completed (nothing can wake it)."""
    events = history(client, workflow_id)
    if not events or events[-1].get("event_type") != "ConditionWaitOpened":
        return False
    ids = {kind: {str((e.get("payload") or {}).get(key)) for e in events if e.get("event_type") == kind}
           for kind, key in (("SignalReceived", "signal_id"), ("SignalApplied", "signal_id"),
                             ("UpdateAccepted", "update_id"), ("UpdateCompleted", "update_id"))}
    return ids["SignalReceived"] <= ids["SignalApplied"] and ids["UpdateAccepted"] <= ids["UpdateCompleted"]


def wait_quiescent(client: Client, workflow_id: str, timeout: float = 20.0) -> None:
    try:
        wait_for(lambda: quiescent(client, workflow_id) or stranded(client, workflow_id), timeout=timeout)
    except AssertionError:
        raise AssertionError(f"{workflow_id} never came to rest on a condition wait; history: "
                             f"{kinds(history(client, workflow_id))}") from None
    note = stranded(client, workflow_id)
    if note:
        pytest.fail(f"{workflow_id} stranded: {note}")


def stranded(client: Client, workflow_id: str) -> str:
    """Why the run's tasks fail by non-determinism ("" while they do not)."""
    raw = client.describe_workflow(workflow_id).raw or {}
    failure = raw.get("last_task_failure")
    if isinstance(failure, dict) and failure.get("type") == "NonDeterministicReplayError":
        return f"NonDeterministicReplayError: {str(failure.get('message') or '').splitlines()[0][:400]}"
    return ""


def settle(client: Client, workflow_id: str, timeout: float = 30.0) -> Any:
    """The run's result; fails at once when its tasks fail by non-determinism (the run strands)."""
    deadline = time.monotonic() + timeout
    while True:
        execution = client.describe_workflow(workflow_id)
        if execution.is_terminal:
            return client.get_result(workflow_id, timeout=5)
        note = stranded(client, workflow_id)
        if note:
            pytest.fail(f"{workflow_id} stranded ({execution.status}): {note}")
        if time.monotonic() >= deadline:
            pytest.fail(f"{workflow_id} did not complete within {timeout}s (status {execution.status}); "
                        f"history: {kinds(history(client, workflow_id))}")
        time.sleep(0.05)


def applied_items(events: List[Dict[str, Any]]) -> List[Any]:
    """The ``push``/``add`` items in the order the server recorded them applied."""
    received: Dict[str, Any] = {}
    out: List[Any] = []
    for event in events:
        kind, payload = event.get("event_type"), event.get("payload") or {}
        if kind == "SignalReceived" and payload.get("signal_name") == "push":
            received[str(payload.get("signal_id"))] = (decoded(payload, "arguments") or [None])[0]
        elif kind == "SignalApplied" and str(payload.get("signal_id")) in received:
            out.append(received[str(payload.get("signal_id"))])
        elif kind == "UpdateApplied" and payload.get("update_name") == "add":
            out.append((decoded(payload, "arguments") or [None])[0])
    return out


def check_cold_replay(client: Client, workflow_id: str, shape: Dict[str, Any], result: Any) -> List[Dict[str, Any]]:
    """A cold replay of the run's final history completes it with the same result."""
    events = history(client, workflow_id)
    cut = [event for event in events if event.get("event_type") != "WorkflowCompleted"]
    commands = replay(MessageShape, cut, [shape], workflow_id=workflow_id).commands
    assert commands and isinstance(commands[-1], CompleteWorkflow), (
        f"a cold replay of {workflow_id}'s history does not complete it: {commands}")
    assert commands[-1].result == result, (
        f"a cold replay of {workflow_id}'s history completes with {commands[-1].result!r}, the run with {result!r}")
    return events


def new_queue(prefix: str) -> str:
    return unique_queue(prefix)
