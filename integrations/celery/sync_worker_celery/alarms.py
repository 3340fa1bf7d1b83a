"""Many short-lived deadlines on one timer entry: what every running task arms and almost always disarms.

Each task arms its heartbeat watch (and, on threads, its time limits) when it starts and disarms
them when it ends, nearly always long before they are due. Pushing each one on the process's
timer task (:class:`~sync_worker.client.deadlines.DeadlineWatchdog`) wakes that task whenever the
new deadline comes first, which, as its heap empties between tasks, is nearly every time: a
thread switch per task. :class:`Alarms` keeps its own table of pending deadlines and one entry on
the timer, at the earliest of them: arming a later deadline (every task's watch: ``now +
interval``) is a dict insert under a lock, disarming a removal, and the timer task wakes about
once per ``interval`` under load, not once per task. A callback runs at its own deadline, as
before, on the timer task.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

from sync_worker.cancel import _native_lock
from sync_worker.client.deadlines import DeadlineWatchdog

__all__ = ["Alarms"]

logger = logging.getLogger("sync_worker.celery.alarms")


class Alarms:
    """Deadlines multiplexed on one :class:`DeadlineWatchdog` entry (the earliest pending one)."""

    def __init__(self, timers: DeadlineWatchdog, clock: Callable[[], float] = time.monotonic) -> None:
        self._timers = timers
        self._clock = clock
        self._reset()
        if hasattr(os, "register_at_fork"):  # a forked child starts with none (and a free lock)
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = _native_lock()  # held for a dict operation only, never across a switch
        self._pending: Dict[int, Tuple[float, Callable[[], None]]] = {}
        self._keys = itertools.count()
        self._armed: Optional[float] = None  # the earliest deadline a timer entry is pushed for

    def arm(self, seconds: float, callback: Callable[[], None]) -> int:
        """Run ``callback`` (on the timer task) in ``seconds`` unless :meth:`disarm`-ed first; its key."""
        deadline = self._clock() + (seconds if seconds > 0.0 else 0.0)
        key = next(self._keys)
        with self._lock:
            self._pending[key] = (deadline, callback)
            push = self._armed is None or deadline < self._armed
            if push:
                self._armed = deadline
        if push:
            self._timers.schedule(deadline - self._clock(), self._fire)
        return key

    def disarm(self, key: int) -> None:
        with self._lock:
            self._pending.pop(key, None)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _fire(self) -> None:
        now = self._clock()
        with self._lock:
            due = [key for key, (deadline, _) in self._pending.items() if deadline <= now]
            callbacks: List[Callable[[], None]] = [self._pending.pop(key)[1] for key in due]
            following = min((deadline for deadline, _ in self._pending.values()), default=None)
            self._armed = following
        if following is not None:
            self._timers.schedule(following - self._clock(), self._fire)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # pragma: no cover - a callback must never stop the others
                logger.exception("task alarm callback failed")
