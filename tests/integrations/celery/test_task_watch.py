"""The task watch (heartbeats, ``revoke(terminate=True)``) and thread-mode time limits run on the
process's one task timer: a task that ends early starts no thread; a long one is still watched."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Type

import pytest
from sync_worker_celery.exceptions import SoftTimeLimitExceeded, TaskRevokedError
from sync_worker_celery.execution import _Watch
from sync_worker_celery.timelimits import TimeLimits, task_timers

from sync_worker.errors import ActivityCancelled


class _Ctx:
    def __init__(self, cancel_after: int = 0) -> None:
        self.beats: List[float] = []
        self.cancel_after = cancel_after

    def heartbeat_sync(self) -> None:
        self.beats.append(time.monotonic())
        if self.cancel_after and len(self.beats) >= self.cancel_after:
            raise ActivityCancelled("cancelled")


class _Client:
    def describe_activity(self, activity_id: str) -> Any:
        return {"closed_reason": "terminated by revoke"}


class _App:
    client = _Client()


def _watch_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "celery-task-watch"]


def test_a_task_that_ends_within_the_interval_starts_no_thread_and_sends_no_heartbeat() -> None:
    ctx = _Ctx()
    before = {t.ident for t in threading.enumerate()}
    for _ in range(200):
        with _Watch(ctx, _App(), None, 0.2):
            pass
    time.sleep(0.35)  # past every watch's interval: cancelled timers never fire
    started = [t for t in threading.enumerate() if t.ident not in before and t.name != "sync-worker-http-deadlines"]
    assert [t.name for t in started if t.name == "celery-task-watch"] == []
    assert ctx.beats == []


def test_a_long_task_is_heartbeaten_every_interval_until_it_ends() -> None:
    ctx = _Ctx()
    began = time.monotonic()
    with _Watch(ctx, _App(), None, 0.1):
        time.sleep(0.45)
    ended = time.monotonic()
    beats = list(ctx.beats)
    assert 3 <= len(beats) <= 5, beats
    assert beats[0] - began >= 0.09  # the first heartbeat one interval in, as before
    time.sleep(0.25)
    assert ctx.beats == beats  # nothing after the task ended
    assert all(b <= ended + 0.05 for b in beats)
    deadline = time.monotonic() + 2
    while _watch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _watch_threads() == []


def test_a_cancelled_heartbeat_with_terminate_interrupts_the_task() -> None:
    ctx = _Ctx(cancel_after=1)
    raised: List[Type[BaseException]] = []
    watch = _Watch(ctx, _App(), "act-1", 0.05)
    watch.interrupt = raised.append
    with watch:
        deadline = time.monotonic() + 2
        while not raised and time.monotonic() < deadline:
            time.sleep(0.01)
    assert raised == [TaskRevokedError]
    assert watch.revoked


def test_thread_mode_time_limits_fire_from_the_task_timer_without_a_thread_each() -> None:
    task_timers.schedule(0, lambda: None)  # the timer task exists before counting threads
    time.sleep(0.05)
    count = threading.active_count()
    for _ in range(50):
        with TimeLimits(hard=5.0, soft=4.0):
            assert threading.active_count() == count
    with pytest.raises(SoftTimeLimitExceeded), TimeLimits(hard=None, soft=0.05):
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            time.sleep(0.005)
    assert threading.active_count() == count
