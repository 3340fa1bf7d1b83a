"""The dev server's one clock: every deadline, timestamp and due time it records reads it.

``Engine.now()`` is the only way the server reads the time of day (history ``recorded_at``,
``server_time``, timers' ``fire_at``, leases, activity timeouts and back-off, workflow
timeouts, schedules, sticky TTLs, worker liveness, retention cut-offs). Two clocks exist:

* :class:`SystemClock` (the default): ``time.time`` itself, so the real server path pays
  nothing for the indirection (``Engine.now`` *is* ``time.time``);
* :class:`VirtualClock`: the wall clock plus an offset that only grows. It runs at real speed
  and can be moved forward (:meth:`VirtualClock.advance_to`), which is what the time-skipping
  test environment (``sync_worker.testing``) does while nothing is in flight.

What stays on the real clock, on purpose: how long a request waits (long polls, a query
waiting for its answer, an update waiting for its outcome: ``time.monotonic``), how often the
scheduler thread and the WAL checkpointer wake, the HTTP ``Date`` header and the time part of
ordered ids (they only need to grow). Those measure the process, not the workflow's world.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

__all__ = ["Clock", "SystemClock", "VirtualClock"]


class Clock:
    """What the engine needs of a clock: epoch seconds (:meth:`time`)."""

    #: True when the time may jump forward (the time-skipping test environment).
    virtual = False

    def time(self) -> float:  # pragma: no cover - the subclasses define it
        raise NotImplementedError


class SystemClock(Clock):
    """The wall clock (``time.time``)."""

    time = staticmethod(time.time)

    def __repr__(self) -> str:
        return "SystemClock()"


class VirtualClock(Clock):
    """Wall-clock time plus an offset that :meth:`advance_to` / :meth:`advance` grow.

    ``start`` (epoch seconds) sets where the virtual time begins; by default it is now. The clock
    never goes back: asking for an instant in its past changes nothing.
    """

    virtual = True

    def __init__(self, start: Optional[float] = None, *, real: Callable[[], float] = time.time) -> None:
        self._real = real
        self._offset = 0.0 if start is None else float(start) - real()
        self._skipped = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        return self._real() + self._offset

    @property
    def skipped(self) -> float:
        """Seconds jumped over in total (the virtual time minus the real time that passed)."""
        return self._skipped

    def advance_to(self, instant: float) -> float:
        """Move the time forward to ``instant`` (epoch seconds); returns the seconds jumped (0 if past)."""
        with self._lock:
            gap = float(instant) - self.time()
            if gap <= 0:
                return 0.0
            self._offset += gap
            self._skipped += gap
            return gap

    def advance(self, seconds: float) -> float:
        """Move the time forward by ``seconds``; returns the seconds jumped."""
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._offset += float(seconds)
            self._skipped += float(seconds)
            return float(seconds)

    def __repr__(self) -> str:
        return f"VirtualClock(skipped={self._skipped:.3f}s)"
