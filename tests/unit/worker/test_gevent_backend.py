"""The gevent pool from an unpatched process: selection, refusal, late-patch report, hub liveness.

Greenlet behaviour of a running worker is covered by ``tests/e2e/gevent_only`` (run by
``tests/gevent_suite.py`` in a process patched first).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
from typing import Any, List, Tuple

import click
import gevent
import pytest
from gevent import monkey

from sync_worker.runtime import gevent_backend as gb
from sync_worker.runtime.backend import (
    ThreadBackend,
    backend_for_pool,
    check_pool,
    default_pool,
    normalize_pool,
)
from sync_worker.runtime.status import StatusBoard, WorkerState
from sync_worker.worker import Worker
from sync_worker.worker.cli import load_worker

from .fakes import FakeClient
from .test_status import Clock, make_board, start

T = "tests.unit.worker._cli_targets"


def test_pool_names_and_the_default_pool() -> None:
    assert normalize_pool("threads") == normalize_pool("thread") == normalize_pool(" Threading ") == "threads"
    assert normalize_pool("GEVENT") == "gevent"
    with pytest.raises(ValueError, match="unknown worker pool 'eventlet'"):
        normalize_pool("eventlet")
    assert not gb.fully_patched()  # this test process is not monkey-patched
    assert default_pool({}) == "threads"
    assert default_pool({"SYNC_WORKER_POOL": "gevent"}) == "gevent"
    assert default_pool({"SYNC_WORKER_POOL": "thread"}) == "threads"
    assert check_pool("threading") == "threads"


def test_gevent_in_an_unpatched_process_is_refused_with_the_fix() -> None:
    for attempt in (lambda: check_pool("gevent"), lambda: backend_for_pool("gevent"),
                    lambda: Worker(FakeClient(), task_queue="q", pool="gevent")):
        with pytest.raises(gb.GeventNotPatched) as caught:
            attempt()
        message = str(caught.value)
        assert "unpatched: socket, threading, time, select, ssl" in message
        assert "sync-worker run -P gevent" in message and "SYNC_WORKER_POOL=gevent" in message
        assert "monkey.patch_all()" in message
    assert isinstance(caught.value, RuntimeError)


def test_the_worker_default_pool_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNC_WORKER_POOL", raising=False)
    assert Worker(FakeClient(), task_queue="q").backend.name == "threads"
    monkeypatch.setenv("SYNC_WORKER_POOL", "gevent")
    with pytest.raises(gb.GeventNotPatched):
        Worker(FakeClient(), task_queue="q")
    assert Worker(FakeClient(), task_queue="q", pool="threads").pool == "threads"


def test_thread_backend_cannot_kill_and_has_no_scheduler_to_watch() -> None:
    backend = ThreadBackend()
    release = threading.Event()
    handle = backend.spawn("t", lambda: release.wait(5) and None)
    try:
        assert backend.kill(handle) is False
        assert handle.is_alive()
    finally:
        release.set()
        assert handle.join(5)
    assert backend.scheduler_monitor() is None
    lock = backend.native_lock()
    assert lock.acquire(False) and not lock.acquire(False)
    lock.release()


def test_late_patch_report_names_modules_holding_replaced_originals(monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    def blocking_sleep(seconds: float) -> None:
        raise AssertionError("never called")

    early = types.ModuleType("early_user_app")
    early.sleep = blocking_sleep  # type: ignore[attr-defined]  # what `from time import sleep` left behind
    early.unrelated = len  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "early_user_app", early)
    monkeypatch.setattr(monkey, "saved", {"time": {"sleep": blocking_sleep}})
    assert gb.late_patch_report() == ["early_user_app.sleep (time.sleep)"]

    monkeypatch.setattr(gb, "_late_patch_seen", None)
    with caplog.at_level(logging.WARNING, logger="sync_worker.worker.gevent"):
        assert gb._warn_if_patched_late() == ["early_user_app.sleep (time.sleep)"]
        gb._warn_if_patched_late()  # same modules: not scanned or logged again
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "early_user_app.sleep (time.sleep)" in warnings[0]

    monkeypatch.setattr(monkey, "saved", {})
    assert gb.late_patch_report() == []


class FakeMonitor:
    def __init__(self) -> None:
        self.age = 0.01
        self.recent: Any = None

    def overdue(self) -> float:
        return self.age

    def recent_block_seconds(self, within: float) -> Any:
        return self.recent

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def tick_age(self) -> float:
        return self.age

    def describe_stall(self, seconds: float) -> str:
        return f"hub_blocked: {seconds:.1f} s"


def test_a_blocked_scheduler_makes_the_board_not_live_with_its_reason() -> None:
    clock = Clock()
    board, trackers, registration = make_board(clock)
    start(board, trackers, registration)
    monitor = FakeMonitor()
    board.set_scheduler_monitor(monitor)
    status = board.snapshot(event_loop_stall_seconds=2.0)
    assert status.live and status.live_reason == "live"

    monitor.age = 2.5  # the hub has not run for 2.5 s; the supervisor tick is still fresh
    status = board.snapshot(event_loop_stall_seconds=2.0)
    assert not status.live and status.live_reason == "hub_blocked: 2.5 s"
    assert status.event_loop_progress_age_seconds == 2.5
    assert status.ready  # readiness is about the server exchanges, not the hub

    monitor.age = 1.0  # stale supervisor tick while the hub is not running: the hub is the cause
    clock.now += 2.5
    status = board.snapshot(event_loop_stall_seconds=2.0)
    assert not status.live and status.live_reason == "hub_blocked: 1.0 s"

    monitor.age, monitor.recent = 0.01, 3.2  # the hub just resumed; the supervisor has not ticked yet
    status = board.snapshot(event_loop_stall_seconds=2.0)
    assert not status.live and status.live_reason == "hub_blocked: 3.2 s"

    monitor.recent = None  # the hub runs and was not blocked, but the supervisor is stale
    status = board.snapshot(event_loop_stall_seconds=2.0)
    assert not status.live and status.live_reason == "event_loop_stalled"

    board.set_state(WorkerState.STOPPED)
    monitor.age = 100.0
    assert board.snapshot().live_reason == "stopped"
    board.set_scheduler_monitor(None)
    assert board.snapshot().live_reason == "stopped"


def test_board_without_a_monitor_is_unchanged() -> None:
    board = StatusBoard("w", "default", "q", Clock())
    board.set_state(WorkerState.RUNNING)
    board.tick()
    assert board.snapshot().live


def test_hub_monitor_interval_comes_from_the_environment(monkeypatch: Any) -> None:
    monkeypatch.delenv(gb.HUB_MONITOR_ENV, raising=False)
    assert gb.hub_monitor_interval() == 5.0
    monkeypatch.setenv(gb.HUB_MONITOR_ENV, "0.5")
    assert gb.hub_monitor_interval() == 0.5
    for bad in ("soon", "0", "600"):
        monkeypatch.setenv(gb.HUB_MONITOR_ENV, bad)
        with pytest.raises(ValueError, match=gb.HUB_MONITOR_ENV):
            gb.hub_monitor_interval()


def test_hub_monitor_ticks_every_five_seconds_by_default_and_is_not_overdue_between_ticks() -> None:
    hub_monitor = gb.HubMonitor()
    assert hub_monitor.interval == 5.0
    hub_monitor.start()
    try:
        gevent.sleep(0.1)
        assert hub_monitor.overdue() == 0.0 and hub_monitor.blocked_seconds(0.0) is None
    finally:
        hub_monitor.stop()


def test_hub_monitor_sees_the_hub_blocked_from_its_os_thread() -> None:
    hub_monitor = gb.HubMonitor(interval=0.02)
    hub_monitor.start()
    try:
        gevent.sleep(0.1)  # let the hub run the monitor's greenlet
        assert hub_monitor.tick_age() < 0.1 and hub_monitor.blocked_seconds(0.3) is None
        time.sleep(0.5)  # the real, blocking sleep: the hub cannot run
        blocked = hub_monitor.blocked_seconds(0.3)
        assert blocked is not None and blocked >= 0.45  # the block, less the one interval a tick may wait
        assert hub_monitor.describe_stall(blocked).startswith("hub_blocked: the gevent hub has been blocked for 0.")
        gevent.sleep(0.1)
        assert hub_monitor.tick_age() < 0.1
        assert hub_monitor.worst_blocked_seconds >= 0.45  # the gap the monitor saw when the hub ran again
        recent = hub_monitor.recent_block_seconds(5.0)
        assert recent is not None and recent >= 0.45
        time.sleep(0.05)
        assert hub_monitor.recent_block_seconds(0.01) is None
    finally:
        hub_monitor.stop()


def test_hub_monitor_stamps_from_the_hub_itself_and_calls_on_tick_with_its_interval() -> None:
    calls: List[Tuple[float, Any]] = []
    hub_monitor = gb.HubMonitor(interval=0.02)
    hub_monitor.start(on_tick=lambda within: calls.append((within, gevent.getcurrent())))
    try:
        gevent.sleep(0.15)
        assert len(calls) >= 3
        # a loop timer's callback runs in the hub: no greenlet of its own, nothing to switch to
        assert all(within == 0.02 and current is gevent.get_hub() for within, current in calls)
        hub_monitor.start(on_tick=lambda within: calls.append((within, None)))  # a restart replaces the timer
        before = len(calls)
        gevent.sleep(0.15)
        assert calls[before:] and all(current is None for _, current in calls[before:])
    finally:
        hub_monitor.stop()
    ended = len(calls)
    gevent.sleep(0.1)
    assert len(calls) == ended  # stopped on the hub's own thread: at once


def test_hub_monitor_stopped_from_another_os_thread_ends_at_its_next_stamp() -> None:
    stamps: List[float] = []
    hub_monitor = gb.HubMonitor(interval=0.02)
    hub_monitor.start(on_tick=stamps.append)
    try:
        gevent.sleep(0.1)
        stopper = threading.Thread(target=hub_monitor.stop)  # gevent is not patched here: a real thread
        stopper.start()
        stopper.join()
        gevent.sleep(0.1)  # the next stamp sees the flag and ends the timer from the hub's thread
        ended = len(stamps)
        gevent.sleep(0.1)
        assert len(stamps) == ended
    finally:
        hub_monitor.stop()


def test_a_failing_on_tick_never_stops_the_stamps(caplog: pytest.LogCaptureFixture) -> None:
    hub_monitor = gb.HubMonitor(interval=0.02)
    hub_monitor.start(on_tick=lambda within: 1 / 0)
    try:
        with caplog.at_level(logging.ERROR, logger="sync_worker.worker.gevent"):
            gevent.sleep(0.1)
        assert "hub monitor tick callback failed" in caplog.text
        assert hub_monitor.tick_age() < 0.05
    finally:
        hub_monitor.stop()


def test_run_command_pool_must_match_the_loaded_worker() -> None:
    with pytest.raises(click.UsageError, match="built a worker on pool 'threads', but -P gevent"):
        load_worker(f"{T}:ready_worker", server_url="http://127.0.0.1:9", pool="gevent")
    worker: Any = load_worker(f"{T}:ready_worker", server_url="http://127.0.0.1:9", pool="threads")
    assert worker.pool == "threads"
