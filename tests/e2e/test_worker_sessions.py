"""Worker sessions end to end: real dev server, real sockets, two workers on one task queue.

Runs on threads and again under gevent (tests/gevent_suite.py). The kill -9 test (a real
worker process) is in ``test_worker_sessions_kill.py``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import WorkerSessionOptions, activity, payloads, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.errors import ActivityFailed
from sync_worker.workflow import replay
from tests._sticky_equivalence import every_cut

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

STEPS = 6


@activity.defn(name="e2e.session.where")
def where(step: int) -> Dict[str, Any]:
    time.sleep(0.02)  # long enough that the other worker's poller is waiting when the next step is queued
    return {"step": step, "worker": activity.context().info.worker_id}


@workflow.defn(name="e2e.session.pinned")
class PinnedSteps:
    def run(self, ctx: Any, session_id: str, steps: int) -> Any:
        session = WorkerSessionOptions(session_id=session_id, lease_seconds=30)
        seen: List[Dict[str, Any]] = []
        for step in range(steps):
            seen.append((yield ctx.schedule_activity("e2e.session.where", [step], worker_session=session)))
        free = yield ctx.schedule_activity("e2e.session.where", [99])
        return {"pinned": seen, "free": free}


@workflow.defn(name="e2e.session.lost")
class LostSession:
    """Runs one step in a session that may not be reacquired; a later step finds it gone."""

    def run(self, ctx: Any, session_id: str) -> Any:
        session = WorkerSessionOptions(session_id=session_id, lease_seconds=30, allow_reacquire_after_failure=False)
        first = yield ctx.schedule_activity("e2e.session.where", [0], worker_session=session)
        yield ctx.sleep(2)  # the test closes the session meanwhile
        try:
            yield ctx.schedule_activity("e2e.session.where", [1], worker_session=session)
        except ActivityFailed as error:
            return {"first": first, "lost": error.code, "type": error.exception_type}
        return {"first": first, "lost": None}


@workflow.defn(name="e2e.session.sleepy")
class SleepySession:
    """Two session steps two (virtual) days apart: far longer than the session's lease."""

    def run(self, ctx: Any, session_id: str, reacquire: bool, ttl: int) -> Any:
        session = WorkerSessionOptions(session_id=session_id, lease_seconds=30, ttl_seconds=ttl,
                                       allow_reacquire_after_failure=reacquire)
        first = yield ctx.schedule_activity("e2e.session.where", [0], worker_session=session)
        yield ctx.sleep(2 * 86_400)
        try:
            second = yield ctx.schedule_activity("e2e.session.where", [1], worker_session=session)
        except ActivityFailed as error:
            return {"lost": error.code}
        return {"lost": None, "same_worker": first["worker"] == second["worker"]}


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30) as srv:
        yield srv


@pytest.fixture
def client(server: DevServer) -> Iterator[Client]:
    c = Client(server.url)
    try:
        yield c
    finally:
        c.close()


def _worker(client: Client, queue: str, name: str) -> Any:
    return make_worker(client, task_queue=queue, worker_id=f"{name}-{uuid.uuid4().hex[:6]}",
                       workflows=[PinnedSteps, LostSession], activities=[where], poll_timeout=2.0,
                       shutdown_timeout=5.0, max_concurrent_activity_task_polls=2)


def test_two_workers_one_queue_a_sessions_activities_all_run_on_its_holder(client: Client) -> None:
    queue = unique_queue("sess")
    w1, w2 = _worker(client, queue, "one"), _worker(client, queue, "two")
    with RunningWorker(w1) as r1, RunningWorker(w2) as r2:
        handles = [client.start_workflow("e2e.session.pinned", f"s-{i}-{uuid.uuid4().hex[:6]}", STEPS,
                                         task_queue=queue) for i in range(4)]
        results = [h.result(timeout=30) for h in handles]
        holders = set()
        for result in results:
            workers_seen = {step["worker"] for step in result["pinned"]}
            assert len(workers_seen) == 1, result  # every step of one session on one worker
            holders |= workers_seen
        # free (unpinned) activities and the sessions between them are spread over both workers:
        # without pinning, 4 x 6 steps on two polling workers would not all line up by chance
        assert holders <= {w1.worker_id, w2.worker_id}
        # the worker tracked the sessions it was handed and counts them against its slots
        tracked = {s.session_id for w in (w1, w2) for s in w.sessions.sessions()}
        assert len(tracked) == 4
        for w in (w1, w2):
            assert w.task_slots()["session_available"] == 10 - len(w.sessions.active())
        r1.stop(), r2.stop()
    # the graceful stop closed every session before deregistering
    for w in (w1, w2):
        assert all(not s.active for s in w.sessions.sessions())


def test_pinned_steps_alternate_without_a_session_but_not_with_one(client: Client, server: DevServer) -> None:
    """The control: the same two workers do share unpinned work (so the pinning above is real)."""
    queue = unique_queue("sess")
    w1, w2 = _worker(client, queue, "one"), _worker(client, queue, "two")
    with RunningWorker(w1), RunningWorker(w2):
        seen = set()
        for _ in range(20):
            handle = client.start_workflow("e2e.session.pinned", f"c-{uuid.uuid4().hex[:6]}", 1, task_queue=queue)
            seen.add(handle.result(timeout=30)["free"]["worker"])
            if len(seen) == 2:
                break
        assert seen == {w1.worker_id, w2.worker_id}


def test_closed_session_fails_pending_activities_with_the_session_error(client: Client) -> None:
    queue = unique_queue("sess")
    w1 = _worker(client, queue, "one")
    session_id = f"lost-{uuid.uuid4().hex[:6]}"
    with RunningWorker(w1):
        handle = client.start_workflow("e2e.session.lost", session_id, task_queue=queue)
        wait_for(lambda: any(s.active for s in w1.sessions.sessions()), timeout=10)
        w1.sessions.handle(WorkerSessionOptions(session_id=session_id, lease_seconds=30,
                                                allow_reacquire_after_failure=False)).close("test")
        result = handle.result(timeout=20)
    assert result["first"]["worker"] == w1.worker_id
    assert result["lost"] == "session_closed"
    assert result["type"] == "WorkerSessionLost"
    failed = [e for e in _history(client, handle.workflow_id) if e["event_type"] == "ActivityFailed"]
    assert failed and failed[-1]["payload"]["code"] == "session_closed"
    assert failed[-1]["payload"]["failure_category"] == "internal"


def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    return list(client.iter_history(workflow_id, run_id))


def test_replay_of_a_session_workflow_reaches_the_same_decisions(client: Client) -> None:
    queue = unique_queue("sess")
    w1, w2 = _worker(client, queue, "one"), _worker(client, queue, "two")
    session_id = f"r-{uuid.uuid4().hex[:6]}"
    with RunningWorker(w1), RunningWorker(w2):
        handle = client.start_workflow("e2e.session.pinned", session_id, 3, task_queue=queue)
        result = handle.result(timeout=30)
    history = _history(client, handle.workflow_id)
    scheduled = [e for e in history if e["event_type"] == "ActivityScheduled"]
    assert [(e["payload"].get("worker_session") or {}).get("session_id") for e in scheduled] == \
        [session_id] * 3 + [None]
    # cold: the whole history gives the same result, and the commands carry the same session
    commands = replay(PinnedSteps, history, [session_id, 3], workflow_id=handle.workflow_id).commands
    assert payloads.decode_envelope(commands[-1].to_wire("q")["result"]) == result
    # at each task boundary before an ActivityScheduled, replay decides that very schedule, session and all
    for index, event in enumerate(history):
        if event["event_type"] != "ActivityScheduled":
            continue
        decided = replay(PinnedSteps, history[:index], [session_id, 3], workflow_id=handle.workflow_id).commands
        wire = decided[-1].to_wire(queue)
        assert wire["type"] == "schedule_activity"
        assert wire.get("worker_session") == event["payload"].get("worker_session")
    # sticky: resuming at every cut equals the cold replay there
    every_cut(PinnedSteps, [session_id, 3], history)


@pytest.mark.parametrize("reacquire, ttl, lost", [
    (True, 10 * 86_400, None),  # the lapsed lease is taken over by the (only) worker that polls next
    (False, 10 * 86_400, "session_reacquire_disallowed"),
    (True, 1800, "session_closed"),  # past the session's TTL: terminal whatever the reacquire option
])
def test_a_time_skip_past_the_lease_ends_the_session_as_docs_sessions_md_says(
        durable_env: Any, reacquire: bool, ttl: int, lost: Any) -> None:
    with durable_env.worker(workflows=[SleepySession], activities=[where]):
        before = durable_env.time()
        handle = durable_env.client.start_workflow(
            "e2e.session.sleepy", f"ts-{uuid.uuid4().hex[:6]}", reacquire, ttl, task_queue=durable_env.task_queue,
            execution_timeout_seconds=10 * 86_400, run_timeout_seconds=10 * 86_400)
        result = handle.result(timeout=30)
        assert durable_env.time() - before >= 2 * 86_400
    assert result == ({"lost": None, "same_worker": True} if lost is None else {"lost": lost})
