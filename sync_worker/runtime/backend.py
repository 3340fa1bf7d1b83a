"""Concurrency backends: the one strategy object the runtime uses for every concurrent thing.

The worker never touches ``threading`` directly. Pollers, the registration heartbeat,
activity slots and workflow-task slots are all spawned, slept, signalled and bounded
through a :class:`ConcurrencyBackend` chosen once at start-up. :class:`ThreadBackend`
uses plain OS threads; a greenlet backend can later provide the same surface without
any ``if gevent:`` branches in the runtime.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional, Protocol

from .thread_reuse import ReusableThreads

__all__ = [
    "ConcurrencyBackend",
    "EventLike",
    "LockLike",
    "POOL_ENV",
    "POOLS",
    "QueueLike",
    "SchedulerMonitor",
    "SemaphoreLike",
    "TaskHandle",
    "ThreadBackend",
    "ThreadTaskHandle",
    "backend_for_pool",
    "check_pool",
    "default_pool",
    "normalize_pool",
]

#: Environment variable naming the pool (also read by the patch-first launcher).
POOL_ENV = "SYNC_WORKER_POOL"
#: The pool names a worker accepts.
POOLS = ("threads", "gevent")
_ALIASES = {"threads": "threads", "thread": "threads", "threading": "threads", "gevent": "gevent"}


class TaskHandle(Protocol):
    """A spawned unit of work (a thread or a greenlet)."""

    @property
    def name(self) -> str: ...

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds; True when the task has finished."""
        ...

    def is_alive(self) -> bool: ...


class EventLike(Protocol):
    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: Optional[float] = None) -> bool: ...


class LockLike(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(self, *args: Any) -> Optional[bool]: ...


class SemaphoreLike(Protocol):
    """A bounded counting semaphore (releasing more than acquired is an error)."""

    def acquire(self, blocking: bool = ..., timeout: Optional[float] = ...) -> bool: ...

    def release(self) -> None: ...


class QueueLike(Protocol):
    def put(self, item: Any, block: bool = ..., timeout: Optional[float] = ...) -> None: ...

    def get(self, block: bool = ..., timeout: Optional[float] = ...) -> Any: ...

    def qsize(self) -> int: ...


class SchedulerMonitor(Protocol):
    """Watches a cooperative scheduler (the gevent hub) from outside it."""

    def start(self, on_tick: Optional[Callable[[float], None]] = None) -> None:
        """Start watching; ``on_tick(next_within)`` runs on the scheduler each time it runs the
        monitor (a worker passes its progress tick: under a cooperative scheduler the monitor's
        stamp proves what the supervisor's tick would, so the supervisor does not wake for it)."""
        ...

    def stop(self) -> None: ...

    def tick_age(self) -> float:
        """Seconds since the scheduler last ran the monitor (readable from any OS thread)."""
        ...

    def overdue(self) -> float:
        """How long the scheduler has at least been blocked (the monitor's tick is this late)."""
        ...

    def recent_block_seconds(self, within: float) -> Optional[float]:
        """How long the scheduler was blocked, when that block ended less than ``within`` s ago."""
        ...

    def describe_stall(self, seconds: float) -> str:
        """The liveness reason for a scheduler blocked for ``seconds``."""
        ...


class ConcurrencyBackend(Protocol):
    """Everything concurrent the runtime needs, behind one object."""

    name: str

    def spawn(self, name: str, target: Callable[[], None]) -> TaskHandle:
        """Start ``target`` concurrently under ``name`` and return its handle."""
        ...

    def spawn_task(self, name: str, target: Callable[[], None]) -> TaskHandle:
        """Run one task body (an activity or workflow task in its slot) concurrently.

        Like :meth:`spawn`, but the backend may run it on a reused unit of execution: the
        thread backend hands it to a parked slot thread instead of starting a new OS thread.
        """
        ...

    def close_idle(self) -> None:
        """Release units of execution parked for reuse (the worker stopped); running ones are untouched."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def event(self) -> EventLike: ...

    def lock(self) -> LockLike: ...

    def semaphore(self, value: int) -> SemaphoreLike: ...

    def queue(self, maxsize: int = 0) -> QueueLike: ...

    def monotonic(self) -> float: ...

    def local(self) -> Any:
        """A task-local attribute namespace (``threading.local`` or its greenlet twin)."""
        ...

    def native_lock(self) -> LockLike:
        """A lock that real OS threads outside the scheduler may take too (``status()`` readers).

        Hold it only briefly and never across a blocking call: under gevent it is the
        unpatched OS lock, which would block the whole hub if it were contended by a greenlet.
        """
        ...

    def kill(self, handle: TaskHandle) -> bool:
        """Stop ``handle`` at its next cooperative point; False when the backend cannot (threads)."""
        ...

    def scheduler_monitor(self) -> Optional[SchedulerMonitor]:
        """A monitor of the backend's scheduler, or None when there is none to watch (threads)."""
        ...


class ThreadTaskHandle:
    """Handle of a daemon thread started by :class:`ThreadBackend`."""

    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread

    @property
    def name(self) -> str:
        return self._thread.name

    def join(self, timeout: Optional[float] = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def is_alive(self) -> bool:
        return self._thread.is_alive()


class ThreadBackend:
    """Plain OS threads.

    Threads are daemons: a stuck activity must not keep the interpreter alive after the
    worker has reported that it could not stop (the caller decides what to do then).
    """

    name = "threads"

    def __init__(self) -> None:
        self.slot_threads = ReusableThreads()

    def spawn(self, name: str, target: Callable[[], None]) -> ThreadTaskHandle:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return ThreadTaskHandle(thread)

    def spawn_task(self, name: str, target: Callable[[], None]) -> TaskHandle:
        return self.slot_threads.submit(name, target)

    def close_idle(self) -> None:
        self.slot_threads.close_idle()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def event(self) -> threading.Event:
        return threading.Event()

    def lock(self) -> LockLike:
        return threading.Lock()

    def semaphore(self, value: int) -> threading.BoundedSemaphore:
        return threading.BoundedSemaphore(value)

    def queue(self, maxsize: int = 0) -> queue.Queue[Any]:
        return queue.Queue(maxsize)

    #: the clock itself: read several times per task (a wrapper would be a Python frame each time)
    monotonic = staticmethod(time.monotonic)

    def local(self) -> threading.local:
        return threading.local()

    def native_lock(self) -> LockLike:
        return threading.Lock()

    def kill(self, handle: TaskHandle) -> bool:
        """Threads cannot be killed; abandoned work runs until it returns."""
        return False

    def scheduler_monitor(self) -> Optional[SchedulerMonitor]:
        return None


def normalize_pool(pool: str) -> str:
    """The canonical pool name (``"threads"`` or ``"gevent"``); ValueError when unknown."""
    name = _ALIASES.get(str(pool).strip().lower())
    if name is None:
        raise ValueError(f"unknown worker pool {pool!r}; expected one of {', '.join(POOLS)}")
    return name


def _process_patched_for_gevent() -> bool:
    if "gevent" not in sys.modules:  # nothing can have patched without importing gevent
        return False
    from .gevent_backend import fully_patched

    return fully_patched()


def default_pool(environ: Optional[Mapping[str, str]] = None) -> str:
    """The pool of a worker built without one.

    ``SYNC_WORKER_POOL`` when set (the launcher sets it when it patched); otherwise
    ``"gevent"`` in a process monkey-patched for gevent (where "threads" would be greenlets
    anyway), else ``"threads"``.
    """
    env = os.environ if environ is None else environ
    named = env.get(POOL_ENV)
    if named:
        return normalize_pool(named)
    return "gevent" if _process_patched_for_gevent() else "threads"


def check_pool(pool: str) -> str:
    """Validate ``pool`` for this process without building anything; returns its canonical name.

    Raises ValueError for an unknown name and
    :class:`~sync_worker.runtime.gevent_backend.GeventNotPatched` (a RuntimeError) when gevent
    is asked for in a process that was not monkey-patched first.
    """
    name = normalize_pool(pool)
    if name == "gevent":
        from .gevent_backend import require_patched

        require_patched()
    return name


def backend_for_pool(pool: str) -> ConcurrencyBackend:
    """The backend for a ``pool`` name: ``"threads"`` or ``"gevent"``.

    ``"gevent"`` refuses an unpatched process (``GeventNotPatched``, saying how to fix it)
    and logs a warning naming modules that kept unpatched references when it was patched late.
    """
    name = normalize_pool(pool)
    if name == "gevent":
        from .gevent_backend import GeventBackend

        return GeventBackend()
    return ThreadBackend()
