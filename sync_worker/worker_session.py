"""Worker sessions: pin a series of activities to the one worker holding a session lease.

A session is a lease on ``session_id`` owned by one registered worker (the published SDK's
``WorkerSessionOptions`` / ``WorkerSession``, same names, fields and wire shape; protocol §3.4).
A workflow schedules activities with ``worker_session=WorkerSessionOptions(...)``; the server
hands those activity tasks only to the session's holder. The holder renews the lease (this
worker: on its registration heartbeat, ``sync_worker.worker.sessions``), closes it when done or
on shutdown, and when it is lost the server either lets another worker reacquire the session
(``allow_reacquire_after_failure``, the default) or fails the session's pending activities.

Semantics are the engine's published contract (durable-workflow/workflow
``docs/architecture/worker-sessions.md`` and
``resources/conformance/suite-v41/platform-protocol-specs/worker-sessions-runtime.schema.json``).
The blocking twin of the SDK's asyncio ``WorkerSession``: ``create``/``renew``/``close`` block.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["DEFAULT_LEASE_SECONDS", "DEFAULT_TTL_SECONDS", "WorkerSession", "WorkerSessionOptions"]

DEFAULT_LEASE_SECONDS = 120
DEFAULT_TTL_SECONDS = 1800
_MAX_TEXT = 255  # the schema's maxLength of session ids, queues and requirements


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"worker session {name} must be positive")
    return int(value)


@dataclass(frozen=True)
class WorkerSessionOptions:
    """What a session is: its id, where it runs and what its holder must offer.

    ``requirements`` are capability strings the holder's registration must list
    (``gpu:nvidia-l4``); ``lease_seconds`` is how long the lease lasts unrenewed;
    ``ttl_seconds`` the session's absolute lifetime (terminal); ``max_concurrent_activities``
    caps the session's activities leased at once.
    """

    session_id: str
    queue: Optional[str] = None
    requirements: Tuple[str, ...] = ()
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    max_concurrent_activities: int = 1
    create_if_missing: bool = True
    allow_reacquire_after_failure: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, str) or not self.session_id.strip():
            raise ValueError("worker session id must be a non-empty string")
        session_id = self.session_id.strip()
        if len(session_id) > _MAX_TEXT:
            raise ValueError(f"worker session id must be at most {_MAX_TEXT} characters")
        object.__setattr__(self, "session_id", session_id)
        if self.queue is not None and (not isinstance(self.queue, str) or not self.queue.strip()):
            raise ValueError("worker session queue must be a non-empty string when provided")
        for name in ("lease_seconds", "ttl_seconds", "max_concurrent_activities"):
            _positive(name, getattr(self, name))
        for name in ("create_if_missing", "allow_reacquire_after_failure"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"worker session {name} must be a bool")
        if isinstance(self.requirements, str):
            raise ValueError("worker session requirements must be a sequence of strings, not one string")
        cleaned = []
        for requirement in self.requirements:
            if not isinstance(requirement, str) or not requirement.strip():
                raise ValueError("worker session requirements must be non-empty strings")
            cleaned.append(requirement.strip())
        object.__setattr__(self, "requirements", tuple(dict.fromkeys(cleaned)))

    def to_wire(self) -> Dict[str, Any]:
        """The ``worker_session`` object of ``schedule_activity`` and ``POST /worker/sessions``."""
        wire: Dict[str, Any] = {
            "session_id": self.session_id,
            "requirements": list(self.requirements),
            "lease_seconds": self.lease_seconds,
            "ttl_seconds": self.ttl_seconds,
            "max_concurrent_activities": self.max_concurrent_activities,
            "create_if_missing": self.create_if_missing,
            "allow_reacquire_after_failure": self.allow_reacquire_after_failure,
        }
        if self.queue is not None:
            wire["queue"] = self.queue
        return wire

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> WorkerSessionOptions:
        """Options from a wire object (a task's ``worker_session``); raises ``ValueError``/``TypeError``."""
        if not isinstance(wire, Mapping):
            raise TypeError("worker session must be an object")
        return cls(
            session_id=wire["session_id"],
            queue=wire.get("queue"),
            requirements=tuple(wire.get("requirements") or ()),
            lease_seconds=wire.get("lease_seconds", DEFAULT_LEASE_SECONDS),
            ttl_seconds=wire.get("ttl_seconds", DEFAULT_TTL_SECONDS),
            max_concurrent_activities=wire.get("max_concurrent_activities", 1),
            create_if_missing=wire.get("create_if_missing", True),
            allow_reacquire_after_failure=wire.get("allow_reacquire_after_failure", True),
        )


class WorkerSession:
    """A session lease held by one registered worker (``Worker.worker_session(options)``).

    ``create`` asks the server for the lease (or reuses/reacquires it); ``renew`` extends it;
    ``close`` ends it (once; later calls return the first answer). Process-local state tied to a
    session must be rebuilt after the session was lost and reacquired
    (:meth:`rebuild_required_after_holder_loss`).
    """

    def __init__(self, client: Any, worker_id: str, options: WorkerSessionOptions,
                 lock_factory: Callable[[], Any] = threading.Lock,
                 on_change: Optional[Callable[[], None]] = None) -> None:
        self.client = client
        self.worker_id = worker_id
        self.options = options
        self._lock = lock_factory()
        self._active = False
        self._close_response: Optional[Dict[str, Any]] = None
        self._on_change = on_change
        #: the server's latest view of the session (``session`` of its last answer)
        self.snapshot: Optional[Dict[str, Any]] = None

    @property
    def active(self) -> bool:
        return self._active

    @property
    def session_id(self) -> str:
        return self.options.session_id

    def _remember(self, response: Any) -> Dict[str, Any]:
        body = dict(response) if isinstance(response, Mapping) else {}
        if isinstance(body.get("session"), Mapping):
            self.snapshot = dict(body["session"])
        return body

    def create(self) -> Dict[str, Any]:
        """``POST /worker/sessions``: create, reuse or reacquire the lease for this worker."""
        response = self._remember(self.client.create_worker_session(self.worker_id, self.options))
        with self._lock:
            self._active = True
            self._close_response = None
        self._changed()
        return response

    def renew(self, lease_seconds: Optional[int] = None) -> Dict[str, Any]:
        """``POST /worker/sessions/{id}/heartbeat``: extend the lease by ``lease_seconds``."""
        with self._lock:
            if not self._active:
                raise RuntimeError("a closed or uncreated worker session cannot be renewed")
        seconds = self.options.lease_seconds if lease_seconds is None else _positive("lease_seconds", lease_seconds)
        return self._remember(self.client.renew_worker_session(self.worker_id, self.options.session_id, seconds))

    def close(self, reason: str = "worker_shutdown") -> Dict[str, Any]:
        """``DELETE /worker/sessions/{id}``; a second call returns the first close's answer."""
        with self._lock:
            if self._close_response is not None:
                return self._close_response
        response = self._remember(self.client.close_worker_session(self.worker_id, self.options.session_id, reason))
        with self._lock:
            self._active = False
            self._close_response = response
        self._changed()
        return response

    def activity_options(self) -> Dict[str, Any]:
        """``{"worker_session": <wire>}``, as the SDK offers it for raw command building."""
        return {"worker_session": self.options.to_wire()}

    def rebuild_required_after_holder_loss(self) -> bool:
        """Always true: state held for a session does not survive the loss of its holder."""
        return True

    def lost(self) -> None:
        """The server says the lease is gone (renewal refused): no longer active, not closed."""
        with self._lock:
            self._active = False
        self._changed()

    def _track_leased_task(self) -> None:
        """A session activity task was leased to this worker: the server holds the lease for it."""
        with self._lock:
            changed = not self._active
            self._active = True
            self._close_response = None
        if changed:
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def __repr__(self) -> str:
        return f"WorkerSession({self.options.session_id!r}, worker_id={self.worker_id!r}, active={self._active})"
