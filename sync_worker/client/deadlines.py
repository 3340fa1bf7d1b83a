"""Absolute deadlines for HTTP attempts.

A socket read timeout applies to each ``recv``: a server that drips one byte a second keeps a
request alive for as long as it likes. Every attempt therefore also gets an absolute
deadline; when it passes, :class:`DeadlineWatchdog` runs the attempt's abort callback (which
shuts the socket down), whatever bytes are still arriving.

One watchdog task serves the whole process: a heap of deadlines and one wake-up event, so an
attempt costs a heap push, not a timer thread. The heap's lock is the OS lock even under gevent
(held for a push or a pop, never across a wait; gevent's patched lock is Python code, taken on
every request); the event is ``threading``'s, so under gevent the watchdog waits as a greenlet.
After a fork the child starts its own.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from typing import Callable, List, Optional, Tuple

from ..cancel import _native_lock

__all__ = ["DeadlineWatchdog", "Timer", "watchdog"]

logger = logging.getLogger("sync_worker.http")


class Timer:
    """One scheduled deadline; :attr:`fired` says whether its callback ran."""

    __slots__ = ("callback", "cancelled", "deadline", "fired")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False
        self.fired = False


class DeadlineWatchdog:
    """Fires callbacks at monotonic deadlines from one background task."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._order = itertools.count()
        self._reset()
        if hasattr(os, "register_at_fork"):
            # The child has no watchdog task and may have inherited a held lock: start afresh.
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = _native_lock()
        self._wake = threading.Event()  # set when a new deadline comes first
        # Starting the task may switch greenlets (gevent's Thread.start waits): never under _lock.
        self._start_lock = threading.Lock()
        self._heap: List[Tuple[float, int, Timer]] = []
        self._pushes = 0
        self._running = False  # reset in a forked child (the at-fork hook): no getpid per schedule

    def schedule(self, seconds: float, callback: Callable[[], None]) -> Timer:
        deadline = self._clock() + (seconds if seconds > 0.0 else 0.0)
        timer = Timer(deadline, callback)
        if not self._running:
            self._ensure_running()
        with self._lock:
            heap = self._heap
            _heappush(heap, (deadline, next(self._order), timer))
            self._pushes += 1
            if self._pushes >= _COMPACT_EVERY:
                self._compact()
                heap = self._heap
            first = heap[0][2] is timer
        if first:
            self._wake.set()
        return timer

    def cancel(self, timer: Timer) -> None:
        # Lazy removal: the entry is skipped when it surfaces (cancel is on every request's path).
        # The callback (the request's slot, and through it its connection) is let go at once.
        timer.cancelled = True
        timer.callback = _noop

    def _compact(self) -> None:
        """Drop cancelled entries once they are most of the heap (amortised O(1) per schedule).

        Almost every deadline is cancelled long before it is due (the request ended), and each
        surfaces only at its deadline: a busy worker would otherwise carry one entry per request
        of the last minute or so.
        """
        self._pushes = 0
        live = [entry for entry in self._heap if not entry[2].cancelled]
        if 2 * len(live) <= len(self._heap):
            heapq.heapify(live)
            self._heap = live

    def pending(self) -> int:
        """Entries in the heap (cancelled ones not yet dropped included)."""
        with self._lock:
            return len(self._heap)

    def _ensure_running(self) -> None:
        with self._start_lock:
            if self._running:
                return
            self._running = True
            thread = threading.Thread(target=self._run, name="sync-worker-http-deadlines", daemon=True)
            thread.start()

    def _run(self) -> None:
        while True:
            due: List[Timer] = []
            wait: Optional[float] = None
            self._wake.clear()  # before looking: a deadline pushed after this look sets it again
            with self._lock:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if self._heap:
                    now = self._clock()
                    while self._heap and (self._heap[0][2].cancelled or self._heap[0][0] <= now):
                        _, _, timer = heapq.heappop(self._heap)
                        if not timer.cancelled:
                            timer.fired = True
                            due.append(timer)
                    if not due and self._heap:
                        wait = max(0.0, self._heap[0][0] - now)
            if not due:
                self._wake.wait(wait)
                continue
            for timer in due:
                try:
                    timer.callback()
                except Exception:  # pragma: no cover - an abort callback must never kill the watchdog
                    logger.exception("HTTP deadline callback failed")


_heappush = heapq.heappush


def _noop() -> None:
    return None


#: Schedules between two looks for cancelled entries to drop.
_COMPACT_EVERY = 1024

_watchdog = DeadlineWatchdog()


def watchdog() -> DeadlineWatchdog:
    """The process-wide watchdog every transport shares."""
    return _watchdog
