"""``sync_worker.host.WorkerGroup`` over fake runtimes: run/stop as one, failures, cold, errors."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import pytest

from sync_worker.host import WorkerGroup, combined_error
from sync_worker.worker import ShutdownIncomplete, WorkerState

from .fakes import FakeRuntime

WATCHDOG = 10.0


class Running:
    """``group.run()`` on a thread, with what it raised."""

    def __init__(self, group: WorkerGroup[Any]) -> None:
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(group,), daemon=True)
        self.thread.start()

    def _run(self, group: WorkerGroup[Any]) -> None:
        try:
            group.run()
        except BaseException as error:
            self.error = error

    def join(self) -> Optional[BaseException]:
        self.thread.join(WATCHDOG)
        assert not self.thread.is_alive(), "group.run() did not return"
        return self.error


def started(*runtimes: FakeRuntime) -> None:
    for runtime in runtimes:
        assert runtime.started.wait(WATCHDOG)
    deadline = time.monotonic() + WATCHDOG
    while any(r.state is WorkerState.STARTING for r in runtimes):
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_run_until_stop_then_every_member_stopped_warm() -> None:
    a, b = FakeRuntime("a"), FakeRuntime("b")
    group = WorkerGroup([a, b])
    assert group.workers == [a, b] and group.runtimes == [a, b] and group.pool == "threads"
    running = Running(group)
    started(a, b)
    assert group.alive() and not group.stopping
    group.stop()
    assert running.join() is None
    assert (a.stops, b.stops) == ([False], [False])
    assert not group.alive() and group.stopping and group.errors == []
    assert [s.state for s in group.status()] == [WorkerState.STOPPED, WorkerState.STOPPED]


def test_one_failure_stops_the_others_and_is_raised() -> None:
    a, b, c = FakeRuntime("a"), FakeRuntime("b", fail_after=0.2), FakeRuntime("c")
    running = Running(WorkerGroup([a, b, c]))
    error = running.join()
    assert isinstance(error, RuntimeError) and "b: the poller died" in str(error)
    assert (a.stops, c.stops) == ([False], [False])  # warm: the others drain their work
    assert b.state is WorkerState.FAILED


def test_the_first_hard_error_wins_over_unfinished_drains() -> None:
    a = FakeRuntime("a", running=["act-1"], drain_seconds=0.05)
    b = FakeRuntime("b", stop_error=RuntimeError("deregistration failed"))
    group = WorkerGroup([a, b])
    running = Running(group)
    started(a, b)
    with pytest.raises(RuntimeError, match="deregistration failed"):
        group.stop()
    assert isinstance(running.join(), RuntimeError)


def test_unfinished_drains_are_one_shutdown_incomplete_naming_every_running_task() -> None:
    a = FakeRuntime("a", running=["act-1"], drain_seconds=0.05)
    b = FakeRuntime("b", running=["act-2", "wf-3"], drain_seconds=0.05)
    c = FakeRuntime("c")
    group = WorkerGroup([a, b, c])
    running = Running(group)
    started(a, b, c)
    with pytest.raises(ShutdownIncomplete) as raised:
        group.stop()
    assert raised.value.running == ["act-1", "act-2", "wf-3"]
    assert "a: shutdown deadline reached" in str(raised.value) and "b: shutdown deadline" in str(raised.value)
    error = running.join()
    assert isinstance(error, ShutdownIncomplete) and error.running == ["act-1", "act-2", "wf-3"]


def test_cold_stop_reaches_every_member_and_turns_a_warm_stop_cold() -> None:
    a = FakeRuntime("a", running=["act-1"], drain_seconds=WATCHDOG * 2)  # would drain far too long
    b = FakeRuntime("b", drain_seconds=WATCHDOG * 2)
    group = WorkerGroup([a, b])
    running = Running(group)
    started(a, b)
    group.request_stop()  # warm: returns at once
    assert not group.wait_stopped(0.1)
    began = time.monotonic()
    group.request_stop(cold=True)
    assert group.wait_stopped(WATCHDOG)
    assert time.monotonic() - began < WATCHDOG / 2
    assert (a.stops, b.stops) == ([False, True], [False, True])
    error = running.join()
    assert isinstance(error, ShutdownIncomplete) and error.running == ["act-1"]
    group.request_stop(cold=True)  # nothing more to do
    assert (a.stops, b.stops) == ([False, True], [False, True])


def test_stop_cold_at_once() -> None:
    a, b = FakeRuntime("a", running=["x"]), FakeRuntime("b")
    group = WorkerGroup([a, b])
    running = Running(group)
    started(a, b)
    with pytest.raises(ShutdownIncomplete):
        group.stop(cold=True)
    assert (a.stops, b.stops) == ([True], [True])
    running.join()


def test_a_failure_handler_keeps_the_others_running_and_a_member_can_be_replaced() -> None:
    failed: List[Any] = []
    stop_errors: List[Any] = []
    a, b = FakeRuntime("a"), FakeRuntime("b", fail_after=0.05)
    group = WorkerGroup([a, b], on_failure=lambda runtime, error: failed.append((runtime, error)),
                        on_stop_error=lambda runtime, error: stop_errors.append(runtime))
    group.start()
    deadline = time.monotonic() + WATCHDOG
    while not failed:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert failed[0][0] is b and isinstance(failed[0][1], RuntimeError)
    assert a.stops == [] and not group.stopping  # the others keep running
    fresh = FakeRuntime("b2", task_queue="b", stop_error=RuntimeError("stuck"))
    assert group.add(fresh, replaces=b)
    assert group.runtimes == [a, fresh]
    started(fresh)
    with pytest.raises(RuntimeError, match="stuck"):
        group.stop()
    assert stop_errors == [fresh]
    assert group.add(FakeRuntime("late")) is False  # not after a stop was asked for


def test_members_can_start_one_at_a_time() -> None:
    a = FakeRuntime("a", start_seconds=0.3)
    b = FakeRuntime("b")
    group = WorkerGroup([a, b], start_one_at_a_time=True)
    starter = threading.Thread(target=group.start, daemon=True)
    starter.start()
    assert a.started.wait(WATCHDOG)
    time.sleep(0.1)
    assert not b.ran  # a is still STARTING
    starter.join(WATCHDOG)
    assert b.started.wait(WATCHDOG)
    group.stop()
    assert group.join(WATCHDOG)


def test_a_group_stopped_before_it_ran_runs_nothing() -> None:
    a = FakeRuntime("a")
    group = WorkerGroup([a])
    group.stop()
    assert Running(group).join() is None
    assert not a.ran and a.stops == [False]


def test_a_group_needs_members_on_one_pool() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerGroup([])
    with pytest.raises(ValueError, match="one pool"):
        WorkerGroup([FakeRuntime("a"), FakeRuntime("b", pool="gevent")])
    group = WorkerGroup([FakeRuntime("a")])
    with pytest.raises(ValueError, match="one pool"):
        group.add(FakeRuntime("b", pool="gevent"))


def test_combined_error() -> None:
    assert combined_error([]) is None
    hard = ValueError("x")
    one = ShutdownIncomplete("one", ["a"])
    assert combined_error([one, hard]) is hard
    merged = combined_error([one, ShutdownIncomplete("two", ["b", "c"])])
    assert isinstance(merged, ShutdownIncomplete) and merged.running == ["a", "b", "c"] and str(merged) == "one; two"


def test_the_django_and_celery_groups_are_the_host_group() -> None:
    from sync_worker_celery.worker import WorkerGroup as CeleryGroup
    from sync_worker_django.runner import WorkerGroup as DjangoGroup

    assert DjangoGroup is WorkerGroup
    assert issubclass(CeleryGroup, WorkerGroup)
