"""The worker's session leases: tracked, renewed on the registration heartbeat, closed on shutdown.

* :meth:`SessionBook.handle` is ``Worker.worker_session(options)``: one handle per session id
  (other options for a known id are refused, as the SDK does).
* :meth:`SessionBook.track` marks a session active when an activity task of it is leased to
  this worker (``task.worker_session``): the server created or reacquired the lease for us
  (lazy creation, the engine's contract ``lazy_create_on_first_admitted_activity``).
* :meth:`SessionBook.renew_due` runs on the worker's heartbeat loop (no thread per session):
  every active session is renewed once a third of its lease has passed;
  :meth:`SessionBook.heartbeat_interval` shortens the heartbeat's wait to that cadence while
  sessions are held. A refused renewal (the server says the lease is gone) drops the session.
* :meth:`SessionBook.close_all` closes every active session before deregistration (§3.4:
  "On shutdown, the worker closes every active session before deregistering").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional

from ..errors import ServerError, TransportError
from ..worker_session import WorkerSession, WorkerSessionOptions

__all__ = ["SessionBook"]

logger = logging.getLogger("sync_worker.worker")

#: A lease is renewed when this fraction of it has passed (three chances before it lapses).
RENEW_FRACTION = 1.0 / 3.0
#: Never renew more often than this (the heartbeat loop's own probe spacing).
MIN_RENEW_SECONDS = 1.0


class SessionBook:
    """The sessions one worker holds; thread- and greenlet-safe (``lock_factory`` of the backend)."""

    def __init__(self, client: Any, worker_id: str, capacity: int, *, clock: Callable[[], float],
                 lock_factory: Callable[[], Any], wake: Callable[[], None] = lambda: None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError("max_concurrent_worker_sessions must be at least 1")
        self.client, self.worker_id, self.capacity = client, worker_id, capacity
        self._clock, self._lock_factory = clock, lock_factory
        self._lock = lock_factory()
        self._sessions: Dict[str, WorkerSession] = {}
        self._renewed_at: Dict[str, float] = {}
        #: wakes the heartbeat loop so a new session's first renewal is not a full interval away
        self.wake = wake

    # -- handles -----------------------------------------------------------------------------

    def handle(self, options: WorkerSessionOptions) -> WorkerSession:
        if not isinstance(options, WorkerSessionOptions):
            raise TypeError("worker_session needs a WorkerSessionOptions")
        with self._lock:
            existing = self._sessions.get(options.session_id)
            if existing is not None:
                if existing.options != options:
                    raise ValueError("worker session id already has different options")
                return existing
            session = WorkerSession(self.client, self.worker_id, options, lock_factory=self._lock_factory,
                                    on_change=self._changed)
            self._sessions[options.session_id] = session
            return session

    def sessions(self) -> List[WorkerSession]:
        with self._lock:
            return list(self._sessions.values())

    def active(self) -> List[WorkerSession]:
        return [session for session in self.sessions() if session.active]

    @property
    def available(self) -> int:
        """``task_slots.session_available``: capacity minus active sessions (never negative)."""
        return max(0, self.capacity - len(self.active()))

    def _changed(self) -> None:
        self.wake()

    # -- tasks -------------------------------------------------------------------------------

    def track(self, task: Mapping[str, Any]) -> Optional[WorkerSession]:
        """Note the session of a leased activity task (``task.worker_session``), if it has one."""
        raw = task.get("worker_session")
        if raw is None:  # most tasks (typing.Mapping's isinstance is slow)
            return None
        if not isinstance(raw, Mapping) or not isinstance(raw.get("session_id"), str):
            return None
        try:
            options = WorkerSessionOptions.from_wire(raw)
        except (KeyError, TypeError, ValueError) as error:
            logger.warning("worker session metadata is invalid: %s", error)
            return None
        with self._lock:
            session = self._sessions.get(options.session_id)
        if session is None:
            session = self.handle(options)
        with self._lock:
            self._renewed_at.setdefault(options.session_id, self._clock())
        session._track_leased_task()
        return session

    # -- renewal on the heartbeat -------------------------------------------------------------

    def heartbeat_interval(self, base: float) -> float:
        """The heartbeat loop's wait: ``base``, shortened to the renewal cadence of held sessions."""
        leases = [s.options.lease_seconds for s in self.active()]
        if not leases:
            return base
        return max(MIN_RENEW_SECONDS, min(base, min(leases) * RENEW_FRACTION))

    def renew_due(self) -> None:
        """Renew every active session whose lease is a third used (called by the heartbeat loop)."""
        now = self._clock()
        for session in self.active():
            sid = session.session_id
            with self._lock:
                last = self._renewed_at.get(sid)
            if last is not None and now - last < session.options.lease_seconds * RENEW_FRACTION - 0.05:
                continue
            try:
                session.renew()
            except ServerError as error:
                if 400 <= error.status < 500:  # the server says the lease is no longer ours
                    logger.warning("worker session %s was lost (%s); activities pinned to it will be "
                                   "reacquired or failed by the server", sid, error.reason() or error.status)
                    session.lost()
                    continue
                logger.warning("worker session %s renewal failed: %s", sid, error)
                continue
            except (TransportError, RuntimeError) as error:
                logger.warning("worker session %s renewal failed: %s", sid, error)
                continue
            with self._lock:
                self._renewed_at[sid] = now

    # -- shutdown -------------------------------------------------------------------------------

    def close_all(self, *, deadline: float) -> int:
        """Close every active session (before deregistration); returns how many closed."""
        closed = 0
        for session in self.active():
            if self._clock() >= deadline:
                logger.warning("worker session %s left open: the shutdown deadline passed", session.session_id)
                continue
            try:
                session.close("worker_shutdown")
                closed += 1
            except Exception as error:  # a failed close never blocks deregistration
                logger.warning("worker session %s close failed: %s", session.session_id, error)
        return closed
