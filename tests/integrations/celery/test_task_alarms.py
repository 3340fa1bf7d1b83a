"""The running tasks' deadlines (heartbeat watch, thread-mode time limits) share one timer entry:
a task that starts and ends does not wake the process's timer task, and each deadline still fires
at its own time."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

import pytest
from sync_worker_celery.alarms import Alarms
from sync_worker_celery.execution import _Watch
from sync_worker_celery.timelimits import TimeLimits, task_alarms, task_timers

from sync_worker.client.deadlines import DeadlineWatchdog


class _Ctx:
    def heartbeat_sync(self) -> None:
        pass


class _App:
    client = None


def _counting(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    pushed: List[float] = []
    schedule = task_timers.schedule

    def counted(seconds: float, callback: Callable[[], None]) -> Any:
        pushed.append(seconds)
        return schedule(seconds, callback)

    monkeypatch.setattr(task_timers, "schedule", counted)
    return pushed


def test_tasks_that_end_early_push_about_one_timer_entry_not_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    pushed = _counting(monkeypatch)
    for _ in range(300):
        with _Watch(_Ctx(), _App(), None, 30.0), TimeLimits(hard=60.0, soft=45.0):
            pass
    # the first watch arms the timer; later (equal or later) deadlines ride on it
    assert len(pushed) <= 3, len(pushed)
    assert task_alarms.pending() == 0


def test_each_deadline_fires_at_its_own_time_in_order_and_a_disarmed_one_never() -> None:
    alarms = Alarms(DeadlineWatchdog())
    fired: List[Any] = []
    began = time.monotonic()
    alarms.arm(0.30, lambda: fired.append(("late", time.monotonic() - began)))
    dropped = alarms.arm(0.05, lambda: fired.append(("dropped", 0.0)))
    alarms.arm(0.10, lambda: fired.append(("early", time.monotonic() - began)))  # earlier than the armed entry
    alarms.disarm(dropped)
    deadline = time.monotonic() + 3
    while len(fired) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert [name for name, _ in fired] == ["early", "late"]
    assert 0.09 <= fired[0][1] < 0.25 and 0.29 <= fired[1][1] < 0.6, fired
    assert alarms.pending() == 0


def test_deadlines_armed_from_many_threads_all_fire() -> None:
    alarms = Alarms(DeadlineWatchdog())
    fired: List[int] = []
    lock = threading.Lock()

    def arm(n: int) -> None:
        for i in range(50):
            def record(i: int = n * 100 + i) -> None:
                with lock:
                    fired.append(i)
            alarms.arm(0.01 * (i % 7), record)

    threads = [threading.Thread(target=arm, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 3
    while len(fired) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(fired) == sorted(n * 100 + i for n in range(4) for i in range(50))


def test_gevent_patching_is_looked_up_until_seen_then_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from sync_worker_celery import timelimits

    asked: List[str] = []
    fake = types.ModuleType("gevent.monkey")
    fake.is_module_patched = lambda name: asked.append(name) or True  # type: ignore[attr-defined]
    monkeypatch.setattr(timelimits, "_patched", False)
    monkeypatch.delitem(sys.modules, "gevent.monkey", raising=False)
    assert timelimits.gevent_active() is False and asked == []
    monkeypatch.setitem(sys.modules, "gevent.monkey", fake)
    assert [timelimits.gevent_active() for _ in range(3)] == [True, True, True]
    assert asked == ["threading"]
