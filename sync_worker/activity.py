"""Activities: ``@activity.defn``, ``activity.context()`` and ``heartbeat_sync``.

Activities are plain synchronous functions. The worker runs each attempt in its own
slot (a thread, or a greenlet under the gevent backend) and binds an
:class:`ActivityContext` to that slot, so ``activity.context()`` inside the function
returns the attempt's identity and its heartbeat.

``heartbeat_sync(details)`` sends the protocol §5.5 heartbeat with the attempt's task,
attempt and worker identity, blocking the calling slot only. It raises
:class:`~sync_worker.errors.ActivityCancelled` when the server reports a cancellation
request and :class:`~sync_worker.errors.ActivityLeaseAuthorityLost` when the attempt may
no longer continue; after that every later heartbeat raises it again and nothing is
ever reported for the attempt.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, TypeVar

from .cancel import _native_lock
from .errors import ActivityCancelled, ActivityLeaseAuthorityLost, InvalidWorkflowDefinition, WorkerShutdown

if TYPE_CHECKING:
    from .cancel import CancelToken

__all__ = [
    "ActivityContext",
    "ActivityInfo",
    "ActivityRetryInfo",
    "activity_name",
    "context",
    "defn",
    "registry",
]

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: Dict[str, Callable[..., Any]] = {}
_registry_lock = threading.Lock()

# Task-local storage of the running attempt's context. The concurrency backend may
# replace it once at start-up (a greenlet-local under gevent).
_local: Any = threading.local()
_local_kind = "threads"


def install_local(kind: str, factory: Callable[[], Any]) -> None:
    """Keep activity contexts in the task-local namespace of backend ``kind``.

    Only a different kind of backend replaces the namespace, so a second worker in the
    same process never hides the context of an activity the first one is running.
    """
    global _local, _local_kind
    with _registry_lock:
        if kind != _local_kind:
            _local = factory()
            _local_kind = kind


def defn(*, name: str) -> Callable[[F], F]:
    """Register a synchronous function as the activity type ``name`` (the wire type key)."""
    if not isinstance(name, str) or not name:
        raise InvalidWorkflowDefinition("activity.defn(name=...) needs a non-empty activity type name")

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise InvalidWorkflowDefinition(
                f"activity {name!r} ({getattr(fn, '__qualname__', fn)!r}) is an 'async def'; sync_worker runs "
                "activities as plain synchronous functions. Define it with 'def' and call "
                "activity.context().heartbeat_sync(...) to report progress."
            )
        if not callable(fn):
            raise InvalidWorkflowDefinition(f"activity {name!r} must be a callable, got {type(fn).__name__}")
        fn.__activity_name__ = name  # type: ignore[attr-defined]
        with _registry_lock:
            _REGISTRY[name] = fn
        return fn

    return wrap


def activity_name(fn: Callable[..., Any]) -> str:
    """The wire type of an activity callable (its ``defn`` name, else ``__name__``)."""
    name = getattr(fn, "__activity_name__", None)
    if isinstance(name, str) and name:
        return name
    return str(getattr(fn, "__name__", repr(fn)))


def registry() -> Dict[str, Callable[..., Any]]:
    """A copy of the activities registered with ``defn`` in this process."""
    with _registry_lock:
        return dict(_REGISTRY)


@dataclass(frozen=True, init=False)
class ActivityRetryInfo:
    """The attempt number and the retry policy snapshot the server sent (unchanged)."""

    attempt_number: int
    policy_provided: bool
    _policy_json: str = field(repr=False)

    def __init__(self, attempt_number: int, policy_provided: bool = False, policy: Any = None) -> None:
        object.__setattr__(self, "attempt_number", attempt_number)
        object.__setattr__(self, "policy_provided", policy_provided)
        # Stored as JSON so every caller gets an independent copy.
        object.__setattr__(self, "_policy_json", "null" if policy is None else json.dumps(policy))

    @classmethod
    def from_task(cls, attempt_number: int, task: Mapping[str, Any]) -> ActivityRetryInfo:
        return cls(attempt_number, "retry_policy" in task, task.get("retry_policy"))

    def policy(self) -> Any:
        return json.loads(self._policy_json)

    def max_attempts(self) -> Optional[int]:
        """The configured positive attempt limit, or None when unknown or unlimited."""
        policy = self.policy()
        value = policy.get("max_attempts") if isinstance(policy, dict) else None
        return value if type(value) is int and value > 0 else None

    def is_unlimited(self) -> bool:
        """True only for an explicit ``max_attempts: null`` in the policy."""
        policy = self.policy()
        return isinstance(policy, dict) and "max_attempts" in policy and policy["max_attempts"] is None

    def is_last_configured_attempt(self) -> Optional[bool]:
        """Whether this attempt uses up the configured budget (None when unknown)."""
        if self.attempt_number < 1:
            return None
        limit = self.max_attempts()
        if limit is not None:
            return self.attempt_number >= limit
        return False if self.is_unlimited() else None


@dataclass(frozen=True)
class ActivityInfo:
    """Identity of the running activity attempt."""

    task_id: str
    activity_type: str
    activity_attempt_id: str
    attempt_number: int
    task_queue: str
    worker_id: str
    task_metadata: InitVar[Optional[Mapping[str, Any]]] = None
    retry_info: ActivityRetryInfo = field(init=False)
    workflow_id: Optional[str] = field(init=False)
    run_id: Optional[str] = field(init=False)

    def __post_init__(self, task_metadata: Optional[Mapping[str, Any]]) -> None:
        task = task_metadata if task_metadata is not None else {}
        object.__setattr__(self, "retry_info", ActivityRetryInfo.from_task(self.attempt_number, task))
        for key in ("workflow_id", "run_id"):
            value = task.get(key)
            object.__setattr__(self, key, value if isinstance(value, str) and value else None)


class ActivityContext:
    """Per-attempt context returned by :func:`context` inside a running activity."""

    def __init__(self, *, info: Optional[ActivityInfo] = None, client: Any, cancel: Optional[CancelToken] = None,
                 info_factory: Optional[Callable[[], ActivityInfo]] = None) -> None:
        if info is None and info_factory is None:
            raise TypeError("ActivityContext needs info or info_factory")
        # The worker passes ``info_factory``: most attempts never read their info, so the frozen
        # dataclass (and its retry info) is built at the first read, not per task.
        self._info = info
        self._info_factory = info_factory
        self._client = client
        self._cancel = cancel
        # Guards a few flags, never held across a call: the OS lock even under gevent (one per
        # task; gevent's patched lock is Python code to make and to take).
        self._lock = _native_lock()
        self._cancel_requested = False
        self._authority_lost_reason: Optional[str] = None
        self._abandoned = False
        self.heartbeats_sent = 0
        #: Wall-clock time of the last heartbeat the server accepted (None: none yet).
        self.last_heartbeat_at: Optional[float] = None

    @property
    def info(self) -> ActivityInfo:
        info = self._info
        if info is None:
            assert self._info_factory is not None
            info = self._info = self._info_factory()
        return info

    @property
    def is_cancelled(self) -> bool:
        """True once the server asked this attempt to stop (or the worker abandoned it)."""
        with self._lock:
            return self._cancel_requested or self._abandoned

    @property
    def authority_lost_reason(self) -> Optional[str]:
        with self._lock:
            return self._authority_lost_reason

    def _mark_abandoned(self) -> None:
        """The worker gave up on this attempt at its shutdown deadline."""
        with self._lock:
            self._abandoned = True

    def raise_if_cannot_continue(self) -> None:
        reason = self._authority_lost_reason  # one attribute read: no lock needed to see it
        if reason is not None:
            raise ActivityLeaseAuthorityLost(self.info.task_id, reason)

    def heartbeat_sync(self, details: Optional[Dict[str, Any]] = None) -> None:
        """Report progress; raise if the server cancelled the attempt or revoked its authority."""
        self.raise_if_cannot_continue()
        with self._lock:
            abandoned = self._abandoned
        if abandoned:
            raise ActivityCancelled("activity abandoned: the worker shut down before it finished")
        try:
            info = self.info
            response = self._client.heartbeat_activity_task(
                info.task_id,
                activity_attempt_id=info.activity_attempt_id,
                lease_owner=info.worker_id,
                details=details,
                cancel=self._cancel,
            )
        except WorkerShutdown:
            self._mark_abandoned()
            raise ActivityCancelled("activity abandoned: the worker shut down before it finished")
        with self._lock:
            self.heartbeats_sent += 1
            self.last_heartbeat_at = time.time()
        if not isinstance(response, dict):
            return
        if response.get("cancel_requested"):
            with self._lock:
                self._cancel_requested = True
            raise ActivityCancelled("activity cancelled")
        if response.get("can_continue") is False:
            reason = response.get("reason")
            with self._lock:
                self._authority_lost_reason = (
                    reason if isinstance(reason, str) and reason else "activity_cannot_continue"
                )
            self.raise_if_cannot_continue()


def context() -> ActivityContext:
    """The context of the activity attempt running in this slot."""
    ctx: Optional[ActivityContext] = getattr(_local, "context", None)
    if ctx is None:
        raise RuntimeError("activity.context() called outside of an activity execution")
    return ctx


def set_context(ctx: Optional[ActivityContext]) -> None:
    """Make ``ctx`` what :func:`context` returns in this task (the runtime calls it around an activity)."""
    _local.context = ctx



# The names the runtime used before they were public (kept for code that imported them).
_install_local = install_local
_set_context = set_context
