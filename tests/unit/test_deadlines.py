"""The absolute-deadline watchdog: a cancelled deadline lets go of its callback at once, cancelled
entries do not pile up in a busy process, and a live deadline still fires among thousands of
cancelled ones."""

from __future__ import annotations

import gc
import threading
import weakref

from sync_worker.client.deadlines import DeadlineWatchdog


class _Abort:
    def __init__(self) -> None:
        self.called = threading.Event()

    def __call__(self) -> None:
        self.called.set()


def test_a_cancelled_deadline_releases_its_callback() -> None:
    watchdog = DeadlineWatchdog()
    abort = _Abort()
    ref = weakref.ref(abort)
    timer = watchdog.schedule(60.0, abort)
    watchdog.cancel(timer)
    del abort
    gc.collect()
    assert ref() is None  # the request's slot (and connection) is not kept for 60 s


def test_cancelled_entries_are_dropped_while_scheduling() -> None:
    watchdog = DeadlineWatchdog()
    for _ in range(20_000):  # what a busy worker does: each request's deadline, cancelled when it ends
        watchdog.cancel(watchdog.schedule(60.0, _Abort()))
    assert watchdog.pending() <= 2 * 1024


def test_a_live_deadline_fires_among_cancelled_ones() -> None:
    watchdog = DeadlineWatchdog()
    live = _Abort()
    watchdog.schedule(0.3, live)
    for _ in range(5_000):
        watchdog.cancel(watchdog.schedule(30.0, _Abort()))
    assert live.called.wait(5.0)
    kept = _Abort()
    timer = watchdog.schedule(0.2, kept)
    watchdog.cancel(timer)
    assert not kept.called.wait(0.6) and not timer.fired
