"""Task slots and the single admission point.

A poller asks the server for a task only while it holds a free slot, so a worker never
leases more work than it can run. :func:`admit` is the ONE place where a slot is granted.

A pool may carry an :class:`~sync_worker.runtime.admission.AdmissionGate` (the activity pool
always does): the gate is asked *before the poll*, so a worker that defers for memory does
not lease a task it cannot start (another replica takes it), and a deferral can never let a
lease expire. A waiting poller holds no task, so shutdown cancels it at once and drain is
never blocked by the gate. The slot carries the gate's reservation: the runtime marks it
started with the task's type once the task is leased, and finishes it with the outcome.
"""

from __future__ import annotations

import logging
from typing import Optional

from ..cancel import CancelToken
from .admission import AdmissionGate, Reservation
from .backend import ConcurrencyBackend

__all__ = ["Slot", "SlotPool", "admit"]

logger = logging.getLogger("sync_worker.runtime.slots")

# How often a waiting poller re-checks its cancel token while every slot is busy.
_ADMISSION_RECHECK_SECONDS = 0.25


class Slot:
    """One granted slot; release it exactly once (extra releases are ignored)."""

    def __init__(self, pool: SlotPool, reservation: Optional[Reservation] = None) -> None:
        self._pool = pool
        self._released = False
        self._lock = pool.backend.native_lock()  # brief, never held across a blocking call
        self.reservation = reservation

    def started(self, task_type: str) -> None:
        """The leased task (of ``task_type``) starts in this slot: the gate learns and reserves by type."""
        if self.reservation is not None:
            self.reservation.start(task_type or None)

    def release(self, ok: bool = True) -> None:
        """Give the slot back; ``ok`` is the task's outcome (for the adaptive controller)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        if self.reservation is not None:
            if self.reservation.started:
                self.reservation.finish(ok)
            else:
                self.reservation.release()
        self._pool._give_back()


class SlotPool:
    """A bounded number of concurrent tasks of one kind (``workflow`` or ``activity``)."""

    def __init__(self, backend: ConcurrencyBackend, kind: str, capacity: int,
                 gate: Optional[AdmissionGate] = None) -> None:
        if capacity < 1:
            raise ValueError(f"max concurrent {kind} tasks must be at least 1, got {capacity}")
        self.backend = backend
        self.kind = kind
        self.capacity = capacity
        self.gate = gate
        self._semaphore = backend.semaphore(capacity)
        self._count_lock = backend.native_lock()  # brief, never held across a blocking call
        self._in_use = 0

    @property
    def in_use(self) -> int:
        with self._count_lock:
            return self._in_use

    @property
    def available(self) -> int:
        free = max(0, self.capacity - self.in_use)
        if self.gate is not None and not self.gate.fixed:
            return min(free, self.gate.available())
        return free

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
            reservation: Optional[Reservation] = None
            gate = pool.gate
            if gate is not None:
                if gate.fixed:  # a fixed N admits at once: nothing to wait for or wake
                    reservation = gate.try_reserve()
                else:
                    handle = cancel.add_callback(gate.wake)
                    try:
                        reservation = gate.reserve(stop=lambda: cancel.cancelled)
                    finally:
                        cancel.remove_callback(handle)
                if reservation is None:  # cancelled while the gate deferred
                    pool._give_back()
                    return None
            slot = Slot(pool, reservation)
            if cancel.cancelled:  # stop won the race: do not start a new poll
                slot.release()
                return None
            return slot
        waited += step
    return None
