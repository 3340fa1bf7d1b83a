from __future__ import annotations

from sync_worker.errors import TransportError
from sync_worker.runtime.status import RoleTracker, StatusBoard, WorkerState


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def make_board(clock: Clock, *, pollers=("workflow", "activity")):
    board = StatusBoard("w1", "default", "q", clock)
    trackers = {}
    for role in pollers:
        trackers[role] = board.add_role(RoleTracker(role, clock, overdue_seconds=40, stall_seconds=200,
                                                    is_poller=True))
    trackers["heartbeat"] = board.add_role(RoleTracker("heartbeat", clock, overdue_seconds=40,
                                                       stall_seconds=200, is_poller=False))
    registration = RoleTracker("registration", clock, overdue_seconds=40, stall_seconds=200, is_poller=False)
    board.set_registration_tracker(registration)
    return board, trackers, registration


def start(board, trackers, registration) -> None:
    registration.request_started()
    registration.request_succeeded()
    board.registered()
    for t in trackers.values():
        t.started()
    board.set_state(WorkerState.RUNNING)
    board.tick()


def test_fresh_worker_is_neither_ready_nor_live_and_reports_none() -> None:
    clock = Clock()
    board, _, _ = make_board(clock)
    status = board.snapshot()
    assert status.state is WorkerState.STARTING
    assert (status.ready, status.live) == (False, False)
    assert status.registered_age_seconds is None
    assert status.event_loop_progress_age_seconds is None
    role = status.role("workflow")
    assert role is not None
    assert role.last_success_age_seconds is None and role.in_flight_seconds is None


def test_registering_is_live_until_the_request_stalls() -> None:
    clock = Clock()
    board, _, registration = make_board(clock)
    registration.request_started()
    assert board.snapshot().live
    clock.now += 201
    status = board.snapshot()
    assert not status.live and status.live_reason == "request_stalled:registration"


def test_running_worker_is_ready_and_live_with_idle_long_polls() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    trackers["workflow"].request_started()
    clock.now += 30
    board.tick()
    status = board.snapshot()
    assert status.ready and status.live, (status.ready_reason, status.live_reason)
    wf = status.role("workflow")
    assert wf is not None and wf.in_flight_seconds == 30 and not wf.overdue
    assert status.registered_age_seconds == 30


def test_failed_exchange_makes_unready_but_live_then_recovers() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    trackers["activity"].request_started()
    trackers["activity"].request_failed(TransportError("no"))
    status = board.snapshot()
    assert not status.ready and status.ready_reason == "last_exchange_failed:activity"
    assert status.live
    role = status.role("activity")
    assert role is not None
    assert role.consecutive_failures == 1 and role.last_failure_type == "TransportError"
    assert role.last_success_age_seconds is None
    trackers["activity"].request_started()
    trackers["activity"].request_succeeded()
    assert board.snapshot().ready


def test_overdue_request_is_unready_and_stalled_request_is_not_live() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    trackers["heartbeat"].request_started()
    clock.now += 41
    board.tick()
    status = board.snapshot()
    assert not status.ready and status.ready_reason == "request_overdue:heartbeat" and status.live
    clock.now += 160
    board.tick()
    status = board.snapshot()
    assert not status.live and status.live_reason == "request_stalled:heartbeat"
    # explicit bounds override the defaults
    assert board.snapshot(request_stall_seconds=1000, request_overdue_seconds=1000).ready


def test_stalled_supervisor_is_not_live() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    clock.now += 31
    status = board.snapshot()
    assert not status.live and status.live_reason == "event_loop_stalled"
    assert status.event_loop_progress_age_seconds == 31
    assert board.snapshot(event_loop_stall_seconds=60).live


def test_exited_poller_is_not_live_or_ready() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    trackers["workflow"].exited()
    status = board.snapshot()
    assert not status.live and status.live_reason == "poller_exited:workflow"
    assert not status.ready and status.ready_reason == "poller_not_running:workflow"


def test_draining_is_live_not_ready_stopped_and_failed_are_neither() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    board.set_state(WorkerState.DRAINING)
    trackers["workflow"].exited()  # pollers stop on purpose while draining
    status = board.snapshot()
    assert (status.ready, status.live) == (False, True)
    assert status.ready_reason == "draining"
    for state in (WorkerState.STOPPED, WorkerState.FAILED):
        board.set_state(state)
        status = board.snapshot()
        assert (status.ready, status.live) == (False, False)
        assert status.live_reason == state.value


def test_snapshot_carries_identity_only() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    trackers["activity"].request_failed(TransportError("http://user:secret@host"))
    status = board.snapshot()
    assert "secret" not in repr(status)
    assert (status.worker_id, status.namespace, status.task_queue) == ("w1", "default", "q")
