"""CancelToken: one-way "stop waiting" flag shared by the runtime and the transport.

The runtime hands a token to every blocking call it may need to abandon at shutdown
(long polls, back-off sleeps, retry waits). Cancelling runs the registered callbacks
once, from the cancelling thread; the transport registers one that shuts down the
socket of the in-flight request, so a blocked ``recv`` returns at once.

The event primitive is injectable so the same token works on greenlets: under gevent
the backend passes its own event class (after monkey-patching ``threading.Event`` is
cooperative anyway).
"""

from __future__ import annotations

import _thread
import logging
import sys
import threading
from typing import Any, Callable, Dict, Optional

logger = logging.getLogger("sync_worker.cancel")

Callback = Callable[[], None]


_allocate_lock: Optional[Callable[[], Any]] = None


def _native_lock() -> Any:
    global _allocate_lock
    if _allocate_lock is None:
        monkey = sys.modules.get("gevent.monkey")
        _allocate_lock = monkey.get_original("_thread", "allocate_lock") if monkey is not None \
            else _thread.allocate_lock
    return _allocate_lock()


class CancelToken:
    """A cancellation flag with wait and callbacks. Safe to use from any thread.

    The flag is a plain attribute (read on every request's path); the event is made by the first
    :meth:`wait` (most tokens, one per task, are never waited on).
    """

    def __init__(self, event_factory: Optional[Callable[[], Any]] = None) -> None:
        self._event_factory = event_factory or threading.Event
        self._event: Any = None
        self._cancelled = False
        # Held only for a few dict operations, never across a wait: the OS lock even under gevent
        # (its patched lock is Python code, taken several times per task).
        self._lock = _native_lock()
        self._callbacks: Dict[int, Callback] = {}
        self._next_handle = 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Set the flag and run every registered callback once (errors are logged, not raised)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            event = self._event
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        if event is not None:
            event.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a failing abort must not stop the others
                logger.debug("cancel callback failed", exc_info=True)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until cancelled or ``timeout`` passes; True when cancelled."""
        event = self._event
        if event is None:
            with self._lock:  # cancel() reads the event under this lock: set after, or seen here
                if self._cancelled:
                    return True
                event = self._event
                if event is None:
                    event = self._event = self._event_factory()
        return bool(event.wait(timeout))

    def add_callback(self, callback: Callback) -> int:
        """Register ``callback`` to run on cancel; runs it at once if already cancelled."""
        with self._lock:
            if not self._cancelled:
                handle = self._next_handle
                self._next_handle += 1
                self._callbacks[handle] = callback
                return handle
        callback()
        return -1

    def remove_callback(self, handle: int) -> None:
        with self._lock:
            self._callbacks.pop(handle, None)
