"""Reused slot threads: task work on parked OS threads instead of one new thread per task.

Starting an OS thread per task costs a few percent of a busy worker's CPU. :class:`ReusableThreads`
keeps threads that finished a task parked for a while and hands the next task to one of them.
The number of threads is never bounded here: the slot pools bound how many tasks run at once,
so at most ``slots`` threads exist, and a parked thread that waits ``idle_seconds`` without work
exits. Each thread takes the task's name while it runs it (logs and ``threading.enumerate()``
show the task, as with a fresh thread).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, List, Optional

__all__ = ["PooledTaskHandle", "ReusableThreads"]

logger = logging.getLogger("sync_worker.worker.threads")

_PARKED_NAME = "sync-worker-slot-idle"


class PooledTaskHandle:
    """Handle of one task run on a reused thread (finished when the task returned).

    ``_running`` is a lock held from submission until the task returned (a plain lock: an
    ``Event`` per task costs a condition variable to make and five Python calls to set).
    """

    __slots__ = ("_done", "_name", "_running")

    def __init__(self, name: str) -> None:
        self._name = name
        self._done = False
        self._running = threading.Lock()
        self._running.acquire()

    @property
    def name(self) -> str:
        return self._name

    def _finished(self) -> None:
        self._done = True
        self._running.release()

    def join(self, timeout: Optional[float] = None) -> bool:
        if self._done:
            return True
        if self._running.acquire(True, -1 if timeout is None else max(0.0, timeout)):
            self._running.release()  # let any other joiner through too
            return True
        return False

    def is_alive(self) -> bool:
        return not self._done


class _Job:
    __slots__ = ("handle", "target")

    def __init__(self, handle: PooledTaskHandle, target: Callable[[], None]) -> None:
        self.handle = handle
        self.target = target


class _Parked:
    """One thread's mailbox: the job it is handed, and the lock that wakes it.

    ``wake`` is a lock used as a binary semaphore (held: nothing to do; released by the handing
    thread: look at ``job``): a plain lock costs a fraction of an ``Event``'s condition machinery
    on every hand-off.
    """

    __slots__ = ("job", "wake")

    def __init__(self, job: _Job) -> None:
        self.job: Optional[_Job] = job
        self.wake = threading.Lock()
        self.wake.acquire()

    def signal(self) -> None:
        try:
            self.wake.release()
        except RuntimeError:  # already signalled (close_idle after a hand-off): one wake is enough
            pass


class ReusableThreads:
    """Daemon threads that run one task after another (see the module docstring)."""

    def __init__(self, idle_seconds: float = 60.0) -> None:
        self.idle_seconds = float(idle_seconds)
        self._lock = threading.Lock()
        self._parked: List[_Parked] = []
        self.started = 0  # threads ever started (a bench and the tests read it)
        self._closed = False

    @property
    def parked(self) -> int:
        with self._lock:
            return len(self._parked)

    def submit(self, name: str, target: Callable[[], None]) -> PooledTaskHandle:
        handle = PooledTaskHandle(name)
        job = _Job(handle, target)
        with self._lock:
            if self._parked:
                box = self._parked.pop()
                box.job = job
                box.signal()
                return handle
            self.started += 1
        box = _Parked(job)
        thread = threading.Thread(target=self._serve, args=(box,), name=name, daemon=True)
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self.started -= 1
            raise
        return handle

    def _serve(self, box: _Parked) -> None:
        me = threading.current_thread()
        while True:
            job = box.job
            assert job is not None
            box.job = None
            me.name = job.handle.name
            try:
                job.target()
            except BaseException:  # the runtime's task bodies catch everything; never lose the thread silently
                logger.exception("task %s raised out of its slot thread", job.handle.name)
            finally:
                job.handle._finished()
            me.name = _PARKED_NAME
            box.wake.acquire(False)  # no stale wake-up: held from here until a hand-off
            with self._lock:
                if self._closed:  # the worker stopped: a thread that finishes late does not park
                    return
                self._parked.append(box)
            box.wake.acquire(True, max(0.0, self.idle_seconds))
            with self._lock:
                if box.job is None:  # nobody handed us work in time (or close_idle): leave
                    if box in self._parked:
                        self._parked.remove(box)
                    return

    def close_idle(self) -> int:
        """Let every parked thread exit now and later ones exit after their task; returns how many left.

        Tasks submitted afterwards still run (each on a new thread that then exits).
        """
        with self._lock:
            self._closed = True
            boxes, self._parked = self._parked, []
        for box in boxes:
            box.signal()
        return len(boxes)
