"""Coming back fast after a server outage: shared server contact, and the worker heartbeat.

After an outage each role sits in its own back-off wait (up to 30 s for pollers) and, before,
a failed heartbeat waited its full 60 s interval: readiness came back 35-54 s after the server.
Two rules fix it:

* :class:`ServerContact`: any successful exchange (a poll answered, a heartbeat acknowledged)
  wakes every role waiting out a back-off, so they retry at once instead of at their next
  random delay;
* :func:`run_heartbeat`: a failed heartbeat (or a poll that could not reach the server) puts
  the heartbeat on the poll back-off schedule, capped at :data:`HEARTBEAT_RETRY_CEILING_SECONDS`
  (one small request every few seconds while the server is away), so it is the first to notice
  the server is back; after a success it waits the normal interval again.

Together with readiness counting a long poll the server is holding (see ``status``), a worker
is ready again a few seconds after its server is.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Callable, List, Optional

from ..cancel import CancelToken
from ..errors import ServerError, TransportError, WorkerShutdown
from ..runtime.backend import ConcurrencyBackend
from ..runtime.backoff import poll_error_summary
from ..runtime.status import RoleTracker

__all__ = ["HEARTBEAT_RETRY_CEILING_SECONDS", "ServerContact", "run_heartbeat", "unreachable"]

logger = logging.getLogger("sync_worker.worker")

#: Longest wait between heartbeat retries while the server is unreachable.
HEARTBEAT_RETRY_CEILING_SECONDS = 3.0


def unreachable(error: BaseException) -> bool:
    """Whether a failure looks like the server (or the way to it) being away, not a refusal."""
    if isinstance(error, TransportError):
        return True
    return isinstance(error, ServerError) and error.status in (502, 503, 504)


class ServerContact:
    """Links the roles of one worker: trouble seen by one, recovery seen by another.

    * :meth:`trouble` (a poll could not reach the server) makes the heartbeat probe soon;
    * :meth:`succeeded` (any exchange got through) wakes every role waiting out a back-off
      after an unreachable server, so they retry at once.
    """

    def __init__(self, backend: ConcurrencyBackend) -> None:
        self._backend = backend
        self._lock = backend.native_lock()
        self._waiters: List[Any] = []
        self._probers: List[Any] = []

    def succeeded(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()

    def trouble(self) -> None:
        with self._lock:
            probers, self._probers = self._probers, []
        for event in probers:
            event.set()

    def wake_heartbeat(self) -> None:
        """Let the heartbeat beat soon (a session was created or tracked: its renewals start)."""
        self.trouble()

    def _wait(self, registry: List[Any], seconds: float, cancel: CancelToken) -> None:
        event = self._backend.event()
        handle = cancel.add_callback(event.set)
        with self._lock:
            registry.append(event)
        try:
            event.wait(max(0.0, seconds))
        finally:
            with self._lock:
                if event in registry:
                    registry.remove(event)
            cancel.remove_callback(handle)

    def wait(self, seconds: float, cancel: CancelToken) -> bool:
        """A back-off wait cut short by :meth:`succeeded`; returns True when ``cancel`` fired."""
        self._wait(self._waiters, seconds, cancel)
        return cancel.cancelled

    def wait_for_trouble(self, seconds: float, cancel: CancelToken) -> bool:
        """The heartbeat's wait, cut short by :meth:`trouble`; returns True when ``cancel`` fired."""
        self._wait(self._probers, seconds, cancel)
        return cancel.cancelled


def run_heartbeat(*, send: Callable[[], Any], interval: Callable[[], float], stop: Any, cancel: CancelToken,
                  tracker: RoleTracker, contact: ServerContact, on_ack: Callable[[Any], None],
                  clock: Callable[[], float], rng: Optional[Callable[[float, float], float]] = None) -> None:
    """The registration heartbeat loop (runs until ``stop`` is set or ``cancel`` fires).

    Normally one heartbeat per ``interval()``. After a failure, or as soon as another role
    reports the server unreachable, it probes on the poll back-off schedule capped at
    :data:`HEARTBEAT_RETRY_CEILING_SECONDS` (never more than one probe a second), until one
    succeeds; that success wakes the other roles (:meth:`ServerContact.succeeded`).
    """
    uniform = rng or random.uniform
    ceiling = 1.0
    wait = interval()
    last_sent = clock()
    logged: Optional[str] = None
    try:
        while True:
            if contact.wait_for_trouble(wait, cancel) or stop.is_set():
                return
            since = clock() - last_sent
            if since < min(wait, _MIN_PROBE_SPACING_SECONDS):  # woken by trouble right after a beat
                wait = _MIN_PROBE_SPACING_SECONDS - since
                continue
            last_sent = clock()
            tracker.request_started()
            try:
                ack = send()
            except WorkerShutdown:
                tracker.request_abandoned()
                return
            except Exception as error:
                tracker.request_failed(error)
                summary = poll_error_summary(error)
                wait = min(interval(), uniform(ceiling / 2.0, ceiling))
                ceiling = min(HEARTBEAT_RETRY_CEILING_SECONDS, ceiling * 2.0)
                if logged != summary:
                    logged = summary
                    logger.warning("worker heartbeat failed: %s; retrying every few seconds until the server "
                                   "answers", summary)
                continue
            if logged is not None:
                logger.info("worker heartbeat succeeded again; the server is reachable")
                logged = None
            tracker.request_succeeded()
            contact.succeeded()
            on_ack(ack)
            ceiling = 1.0
            wait = interval()
    finally:
        tracker.exited()


_MIN_PROBE_SPACING_SECONDS = 1.0
