"""Soft and hard time limits raised *inside* a running task, on threads and on gevent.

* threads: the process's one task-timer thread (:data:`task_timers`, through :data:`task_alarms`: a
  limit costs a push, not a timer thread per task) injects the exception into the task's thread
  (``PyThreadState_SetAsyncExc``); it lands at the next bytecode boundary, so a task blocked
  in a long C call sees it when the call returns;
* gevent (a patched process): a ``gevent.Timeout`` carrying the exception, raised in the task's
  greenlet at its next cooperative switch (I/O, sleep).

``SoftTimeLimitExceeded`` is catchable (clean up and return or re-raise); past the hard limit
``TimeLimitExceeded`` fails the task (state FAILURE, not retried), as in Celery.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from typing import Any, Callable, List, Optional, Type

from sync_worker.client.deadlines import DeadlineWatchdog

from .alarms import Alarms
from .exceptions import SoftTimeLimitExceeded, TimeLimitExceeded

__all__ = ["TimeLimits", "gevent_active", "interrupt_current", "task_alarms", "task_timers"]

#: One timer task per process for what fires while a task runs (its time limits on threads, the
#: start of its heartbeat watch): started at first use, afresh in a forked child. Its callbacks
#: only inject an exception or start a thread, never block.
task_timers = DeadlineWatchdog()
#: The running tasks' deadlines, on one :data:`task_timers` entry at a time (:mod:`.alarms`).
task_alarms = Alarms(task_timers)


_patched = False  # once patched, a process stays patched: asked again (every task) only until then


def gevent_active() -> bool:
    """True in a process monkey-patched for gevent (tasks then run on greenlets)."""
    global _patched
    if _patched:
        return True
    monkey = sys.modules.get("gevent.monkey")  # imported by whoever patched (no import statement per task)
    if monkey is None:
        return False
    _patched = bool(monkey.is_module_patched("threading"))
    return _patched


def _inject(thread_id: int, exc_type: Type[BaseException]) -> bool:
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
    if done > 1:  # pragma: no cover - more than one thread matched: undo, as the C API asks
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
        return False
    return bool(done)


def interrupt_current() -> Callable[[Type[BaseException]], None]:
    """A function that raises an exception type inside the *calling* thread or greenlet, from elsewhere."""
    if gevent_active():
        gevent: Any = sys.modules["gevent"]  # imported by the patching (no import statement per task)
        target: Any = gevent.getcurrent()
        # throw() is scheduled on the hub, which is how gevent itself kills a greenlet
        return lambda exc_type: gevent.get_hub().loop.run_callback(target.throw, exc_type())
    ident = threading.get_ident()

    def inject(exc_type: Type[BaseException]) -> None:
        _inject(ident, exc_type)
    return inject


class TimeLimits:
    """``with TimeLimits(hard, soft): run()`` — arms both limits for the calling thread/greenlet."""

    def __init__(self, hard: Optional[float], soft: Optional[float]) -> None:
        self.hard = hard if hard and hard > 0 else None
        self.soft = soft if soft and soft > 0 else None
        self._cleanup: List[Callable[[], None]] = []
        self._lock: Optional[threading.Lock] = None  # made only when a limit is armed (most tasks have none)
        self._active = False

    def __enter__(self) -> TimeLimits:
        if self.hard is None and self.soft is None:
            return self
        self._lock = threading.Lock()
        self._active = True
        if gevent_active():
            import gevent

            for seconds, exc in ((self.soft, SoftTimeLimitExceeded), (self.hard, TimeLimitExceeded)):
                if seconds is not None:
                    timeout = gevent.Timeout(seconds, exc(seconds))
                    timeout.start()
                    self._cleanup.append(timeout.close)
            return self
        ident = threading.get_ident()
        for seconds, exc_type in ((self.soft, SoftTimeLimitExceeded), (self.hard, TimeLimitExceeded)):
            if seconds is not None:
                key = task_alarms.arm(seconds, functools.partial(self._fire, ident, exc_type))
                self._cleanup.append(functools.partial(task_alarms.disarm, key))
        return self

    def _fire(self, ident: int, exc_type: Type[BaseException]) -> None:
        assert self._lock is not None  # armed, so made
        with self._lock:
            if self._active:
                _inject(ident, exc_type)

    def __exit__(self, *exc: Any) -> None:
        if self._lock is None:  # nothing was armed
            return
        with self._lock:
            self._active = False
        for cleanup in self._cleanup:
            cleanup()
        self._cleanup.clear()
