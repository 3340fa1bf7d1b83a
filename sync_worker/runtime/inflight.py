"""Accepted work the worker is still running, for drain and abandonment at shutdown."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional

from ..cancel import CancelToken
from .backend import ConcurrencyBackend, TaskHandle

__all__ = ["InflightSet", "InflightTask"]


class InflightTask:
    """One accepted task (workflow, activity) running in its slot.

    ``cancel`` interrupts the task's own server calls; once :meth:`abandon` has run, the
    task must not report any result or failure (:meth:`claim_report` returns False).
    """

    def __init__(self, backend: ConcurrencyBackend, kind: str, task_id: str) -> None:
        self.kind = kind
        self.task_id = task_id
        self.started_at = backend.monotonic()
        self.cancel = CancelToken(backend.event)
        self.handle: Optional[TaskHandle] = None
        self._lock = backend.native_lock()  # brief, never held across a blocking call
        self._abandoned = False
        self._on_abandon: List[Callable[[], None]] = []
        #: the call that runs a task tracked to run on its caller's unit (``spawn_task(..., here=True)``)
        self.pending: Optional[Callable[[], None]] = None
        #: tracked to run on its caller's unit (an intake loop that runs it), not on a unit of its own
        self.here = False

    def run(self) -> None:
        """Run the task here, on the calling unit (a task tracked with ``here=True``; at most once)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending()

    @property
    def abandoned(self) -> bool:
        with self._lock:
            return self._abandoned

    def on_abandon(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._on_abandon.append(callback)

    def abandon(self) -> None:
        with self._lock:
            if self._abandoned:
                return
            self._abandoned = True
            callbacks = list(self._on_abandon)
        for callback in callbacks:
            callback()
        self.cancel.cancel()

    def claim_report(self) -> bool:
        """True when the task may still submit its outcome to the server."""
        return not self.abandoned


class InflightSet:
    """Thread-safe set of running :class:`InflightTask` objects."""

    def __init__(self, backend: ConcurrencyBackend) -> None:
        self._backend = backend
        self._lock = backend.native_lock()  # brief, never held across a blocking call
        self._tasks: Dict[int, InflightTask] = {}
        self._ids = itertools.count()
        self._changed = backend.event()

    def add(self, task: InflightTask) -> int:
        with self._lock:
            key = next(self._ids)
            self._tasks[key] = task
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._tasks.pop(key, None)
        if not self._changed.is_set():  # wait_empty clears it, then counts: a set flag is seen there
            self._changed.set()

    def snapshot(self) -> List[InflightTask]:
        with self._lock:
            return list(self._tasks.values())

    def count(self, kind: Optional[str] = None) -> int:
        with self._lock:
            return sum(1 for t in self._tasks.values() if kind is None or t.kind == kind)

    def wait_empty(self, deadline: float, *, tick: Optional[Callable[[], Any]] = None,
                   interrupted: Optional[Callable[[], bool]] = None) -> bool:
        """Wait until nothing runs or the monotonic ``deadline`` passes; True when empty."""
        while True:
            if self.count() == 0:
                return True
            if interrupted is not None and interrupted():
                return False
            remaining = deadline - self._backend.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            if self.count() == 0:
                return True
            self._changed.wait(min(remaining, 0.5))
            if tick is not None:
                tick()
