"""The worker's session book and ``WorkerSessionOptions`` (pure units; the wire is tested e2e)."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker import WorkerSession, WorkerSessionOptions
from sync_worker.errors import ServerError, TransportError
from sync_worker.worker.sessions import SessionBook
from sync_worker.workflow.commands import ScheduleActivity


class FakeClient:
    def __init__(self) -> None:
        self.calls: List[Tuple[str, str, Any]] = []
        self.renew_error: Any = None

    def create_worker_session(self, worker_id: str, options: WorkerSessionOptions) -> Dict[str, Any]:
        self.calls.append(("create", options.session_id, worker_id))
        return {"admitted": True, "outcome": "created", "session": {"session_id": options.session_id}}

    def renew_worker_session(self, worker_id: str, session_id: str, lease_seconds: int) -> Dict[str, Any]:
        self.calls.append(("renew", session_id, lease_seconds))
        if self.renew_error is not None:
            raise self.renew_error
        return {"admitted": True, "outcome": "heartbeat_recorded"}

    def close_worker_session(self, worker_id: str, session_id: str, reason: str) -> Dict[str, Any]:
        self.calls.append(("close", session_id, reason))
        return {"admitted": True, "outcome": "closed"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _book(capacity: int = 10) -> Tuple[SessionBook, FakeClient, Clock, List[int]]:
    client, clock, wakes = FakeClient(), Clock(), []
    book = SessionBook(client, "w1", capacity, clock=clock, lock_factory=threading.Lock,
                       wake=lambda: wakes.append(1))
    return book, client, clock, wakes


def test_options_validate_and_round_trip_the_wire() -> None:
    options = WorkerSessionOptions(" gpu-1 ", queue="q", requirements=("gpu:l4", " gpu:l4", "fs:/m"),
                                   lease_seconds=30)
    assert options.session_id == "gpu-1" and options.requirements == ("gpu:l4", "fs:/m")
    wire = options.to_wire()
    assert wire == {"session_id": "gpu-1", "requirements": ["gpu:l4", "fs:/m"], "lease_seconds": 30,
                    "ttl_seconds": 1800, "max_concurrent_activities": 1, "create_if_missing": True,
                    "allow_reacquire_after_failure": True, "queue": "q"}
    assert WorkerSessionOptions.from_wire({**wire, "status": "active", "lease_owner": "w"}) == options
    assert "queue" not in WorkerSessionOptions("s").to_wire()
    for bad in ({"session_id": ""}, {"session_id": "s", "queue": " "}, {"session_id": "s", "lease_seconds": 0},
                {"session_id": "s", "ttl_seconds": True}, {"session_id": "s", "requirements": ("",)},
                {"session_id": "s", "requirements": "gpu"}, {"session_id": "s", "create_if_missing": 1},
                {"session_id": "x" * 256}):
        with pytest.raises(ValueError):
            WorkerSessionOptions(**bad)


def test_schedule_activity_carries_the_session_on_the_wire() -> None:
    options = WorkerSessionOptions("s1", lease_seconds=5)
    wire = ScheduleActivity("a", [1], worker_session=options).to_wire("q")
    assert wire["worker_session"] == options.to_wire()
    assert "worker_session" not in ScheduleActivity("a", [1]).to_wire("q")
    with pytest.raises(TypeError):
        ScheduleActivity("a", [1], worker_session={"session_id": "s1"}).to_wire("q")  # type: ignore[arg-type]


def test_handles_are_one_per_id_and_refuse_other_options() -> None:
    book, client, _, wakes = _book()
    first = book.handle(WorkerSessionOptions("s1"))
    assert book.handle(WorkerSessionOptions("s1")) is first
    with pytest.raises(ValueError, match="different options"):
        book.handle(WorkerSessionOptions("s1", lease_seconds=5))
    assert not first.active and book.available == 10
    assert first.create()["outcome"] == "created"
    assert first.active and book.available == 9 and wakes  # the heartbeat is woken for the renewals
    assert first.close()["outcome"] == "closed"
    assert first.close()["outcome"] == "closed" and [c[0] for c in client.calls] == ["create", "close"]
    with pytest.raises(RuntimeError, match="cannot be renewed"):
        first.renew()
    assert first.rebuild_required_after_holder_loss() is True
    assert first.activity_options() == {"worker_session": WorkerSessionOptions("s1").to_wire()}


def test_tasks_are_tracked_and_bad_metadata_is_ignored() -> None:
    book, _, _, _ = _book(capacity=2)
    session = book.track({"task_id": "t", "worker_session": {**WorkerSessionOptions("s9").to_wire(),
                                                               "status": "active"}})
    assert isinstance(session, WorkerSession) and session.active and book.available == 1
    assert book.track({"task_id": "t"}) is None
    assert book.track({"worker_session": {"session_id": "s", "lease_seconds": -1}}) is None
    assert book.track({"worker_session": "s"}) is None


def test_renewal_rides_the_heartbeat_at_a_third_of_the_lease() -> None:
    book, client, clock, _ = _book()
    assert book.heartbeat_interval(60.0) == 60.0  # no session: the normal cadence
    book.handle(WorkerSessionOptions("s1", lease_seconds=30)).create()
    book.handle(WorkerSessionOptions("s2", lease_seconds=120)).create()
    assert book.heartbeat_interval(60.0) == 10.0
    book.handle(WorkerSessionOptions("s3", lease_seconds=1)).create()
    assert book.heartbeat_interval(60.0) == 1.0  # never more often than once a second
    book.handle(WorkerSessionOptions("s3", lease_seconds=1)).close()
    client.calls.clear()
    book.renew_due()
    assert sorted(c[1] for c in client.calls if c[0] == "renew") == ["s1", "s2"]
    client.calls.clear()
    clock.now += 11  # a third of s1's 30 s, not of s2's 120 s
    book.renew_due()
    assert [(c[1], c[2]) for c in client.calls] == [("s1", 30)]


def test_a_refused_renewal_drops_the_session_a_transport_failure_does_not() -> None:
    book, client, clock, _ = _book()
    session = book.handle(WorkerSessionOptions("s1", lease_seconds=3))
    session.create()
    client.renew_error = TransportError("connection reset")
    book.renew_due()
    assert session.active
    client.renew_error = ServerError(409, {"reason": "session_not_active"})
    clock.now += 2
    book.renew_due()
    assert not session.active and book.available == 10


def test_close_all_closes_active_sessions_within_the_deadline() -> None:
    book, client, clock, _ = _book()
    for sid in ("a", "b"):
        book.handle(WorkerSessionOptions(sid)).create()
    book.handle(WorkerSessionOptions("idle"))  # never created: nothing to close
    assert book.close_all(deadline=clock.now + 5) == 2
    assert sorted(c[1] for c in client.calls if c[0] == "close") == ["a", "b"]
    book.handle(WorkerSessionOptions("late")).create()
    assert book.close_all(deadline=clock.now - 1) == 0  # past the deadline: left to the server's lease


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SessionBook(FakeClient(), "w", 0, clock=Clock(), lock_factory=threading.Lock)
