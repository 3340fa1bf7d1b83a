"""Task slots and the single admission point.

A poller asks the server for a task only while it holds a free slot, so a worker never
leases more work than it can run. :func:`admit` is the ONE place where a slot is granted;
the memory admission gate (adaptive concurrency) will sit there later, for both
workflow and activity slots.
"""

from __future__ import annotations

import logging
from typing import Optional

from ..cancel import CancelToken
from .backend import ConcurrencyBackend

__all__ = ["Slot", "SlotPool", "admit"]

logger = logging.getLogger("sync_worker.worker.slots")

# How often a waiting poller re-checks its cancel token while every slot is busy.
_ADMISSION_RECHECK_SECONDS = 0.25


class Slot:
    """One granted slot; release it exactly once (extra releases are ignored)."""

    def __init__(self, pool: SlotPool) -> None:
        self._pool = pool
        self._released = False
        self._lock = pool.backend.lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._pool._give_back()


class SlotPool:
    """A bounded number of concurrent tasks of one kind (``workflow`` or ``activity``)."""

    def __init__(self, backend: ConcurrencyBackend, kind: str, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"max concurrent {kind} tasks must be at least 1, got {capacity}")
        self.backend = backend
        self.kind = kind
        self.capacity = capacity
        self._semaphore = backend.semaphore(capacity)
        self._count_lock = backend.lock()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        with self._count_lock:
            return self._in_use

    @property
    def available(self) -> int:
        return max(0, self.capacity - self.in_use)

    def _try_take(self, timeout: float) -> bool:
        if not self._semaphore.acquire(True, timeout):
            return False
        with self._count_lock:
            self._in_use += 1
        return True

    def _give_back(self) -> None:
        with self._count_lock:
            self._in_use -= 1
        self._semaphore.release()


def admit(pool: SlotPool, cancel: CancelToken, timeout: Optional[float] = None) -> Optional[Slot]:
    """Block until ``pool`` grants a slot; ``None`` when ``cancel`` fires (or ``timeout`` passes).

    This is the single admission decision for every task kind.
    """
    waited = 0.0
    while not cancel.cancelled:
        step = _ADMISSION_RECHECK_SECONDS
        if timeout is not None:
            if waited >= timeout:
                return None
            step = min(step, timeout - waited)
        if pool._try_take(step):
            if cancel.cancelled:  # stop won the race: do not start a new poll
                slot = Slot(pool)
                slot.release()
                return None
            return Slot(pool)
        waited += step
    return None
