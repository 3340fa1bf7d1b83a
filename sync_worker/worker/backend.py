"""Concurrency backends: the one strategy object the runtime uses for every concurrent thing.

The worker never touches ``threading`` directly. Pollers, the registration heartbeat,
activity slots and workflow-task slots are all spawned, slept, signalled and bounded
through a :class:`ConcurrencyBackend` chosen once at start-up. :class:`ThreadBackend`
uses plain OS threads; a greenlet backend can later provide the same surface without
any ``if gevent:`` branches in the runtime.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Optional, Protocol

__all__ = [
    "ConcurrencyBackend",
    "EventLike",
    "LockLike",
    "QueueLike",
    "SemaphoreLike",
    "TaskHandle",
    "ThreadBackend",
    "ThreadTaskHandle",
    "backend_for_pool",
]


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


class ConcurrencyBackend(Protocol):
    """Everything concurrent the runtime needs, behind one object."""

    name: str

    def spawn(self, name: str, target: Callable[[], None]) -> TaskHandle:
        """Start ``target`` concurrently under ``name`` and return its handle."""
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

    def spawn(self, name: str, target: Callable[[], None]) -> ThreadTaskHandle:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return ThreadTaskHandle(thread)

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

    def monotonic(self) -> float:
        return time.monotonic()

    def local(self) -> threading.local:
        return threading.local()


def backend_for_pool(pool: str) -> ConcurrencyBackend:
    """The backend for a ``pool`` name ("threads"; "gevent" is not available yet)."""
    if pool in ("threads", "thread", "threading"):
        return ThreadBackend()
    if pool == "gevent":
        raise ValueError("the gevent pool is not available yet; use pool='threads'")
    raise ValueError(f"unknown worker pool {pool!r}; expected 'threads'")
