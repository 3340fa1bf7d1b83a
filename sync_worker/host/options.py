"""``WorkerOptions``: the keywords of :class:`sync_worker.Worker`, validated, from any door.

One frozen dataclass whose fields are the Worker constructor's keywords (except ``client``)
with the same defaults. Every door builds its workers through it:

* keyword arguments: ``WorkerOptions.from_kwargs(task_queue="shop", max_concurrent_activity_tasks=8)``;
* a settings mapping: Django's ``SYNC_WORKER`` names (``CONCURRENCY``, ``WORKFLOW_CONCURRENCY``,
  ``ACTIVITY_POLLERS``, ``SHUTDOWN_TIMEOUT``, ``POOL``, ...), Celery's ``worker_concurrency``, or
  the field names themselves: ``WorkerOptions.from_mapping(settings)``;
* the environment: ``SYNC_WORKER_<NAME>`` for each of those Django names
  (``SYNC_WORKER_CONCURRENCY``, ``SYNC_WORKER_POOL``, ...): ``WorkerOptions.from_env()``.

A bad value is an :class:`~sync_worker.host.OptionsError` naming the key as written, where it
was read and the value; an unknown key is an :class:`~sync_worker.host.UnknownOption`.
``options.build(client)`` makes the Worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Mapping, Optional, Tuple

from ..interceptors import WorkerInterceptor
from ..runtime.admission import ConcurrencyOption
from ..runtime.metrics import MetricsRecorder
from . import values
from .errors import OptionsError
from .optionbase import OptionsBase
from .values import Rule

if TYPE_CHECKING:  # pragma: no cover
    from ..worker import Worker

__all__ = ["WorkerOptions"]

#: The settings names (Django's ``SYNC_WORKER`` keys; ``SYNC_WORKER_<NAME>`` in the environment).
_SETTING_FIELDS: Dict[str, str] = {
    "TASK_QUEUE": "task_queue",
    "WORKER_ID": "worker_id",
    "BUILD_ID": "build_id",
    "POLL_TIMEOUT": "poll_timeout",
    "CONCURRENCY": "max_concurrent_activity_tasks",
    "WORKFLOW_CONCURRENCY": "max_concurrent_workflow_tasks",
    "ACTIVITY_POLLERS": "max_concurrent_activity_task_polls",
    "WORKFLOW_POLLERS": "max_concurrent_workflow_task_polls",
    "SHUTDOWN_TIMEOUT": "shutdown_timeout",
    "HEARTBEAT_INTERVAL": "heartbeat_interval",
    "MAX_STARTUP_WAIT": "max_startup_wait",
    "POOL": "pool",
    "STICKY_CACHE_CAPACITY": "sticky_cache_capacity",
    "STICKY_CACHE_MAX_BYTES": "sticky_cache_max_bytes",
    "STICKY_CACHE_TTL_SECONDS": "sticky_cache_ttl_seconds",
    "MAX_CONCURRENT_WORKER_SESSIONS": "max_concurrent_worker_sessions",
}
# external_storage* are also the Client's: the environment and settings give them to ClientOptions
# (every door's client carries them, and a worker takes what its client has); here they are keywords.

_RULES: Dict[str, Rule] = {
    "task_queue": values.optional_text,
    "workflows": values.sequence,
    "activities": values.sequence,
    "worker_id": values.optional_text,
    "build_id": values.optional_text,
    "poll_timeout": values.non_negative_seconds,
    "max_concurrent_workflow_tasks": values.positive_int,
    "max_concurrent_activity_tasks": values.activity_slots,
    "max_concurrent_workflow_task_polls": values.positive_int,
    "max_concurrent_activity_task_polls": values.positive_int,
    "shutdown_timeout": values.non_negative_seconds,
    "heartbeat_interval": values.positive_seconds,
    "max_startup_wait": values.non_negative_seconds,
    "interceptors": values.sequence,
    "pool": values.pool_name,
    "sticky_cache_capacity": values.optional_non_negative_int,
    "sticky_cache_max_bytes": values.positive_int,
    "sticky_cache_ttl_seconds": values.ttl_seconds,
    "external_storage": values.external_storage,
    "external_storage_threshold_bytes": values.optional_positive_int,
    "external_storage_cache": values.optional_object,
    "max_concurrent_worker_sessions": values.positive_int,
}


@dataclass(frozen=True)
class WorkerOptions(OptionsBase):
    """The Worker constructor's keywords (see :class:`sync_worker.Worker`), validated on construction."""

    task_queue: Optional[str] = None
    workflows: Tuple[Any, ...] = ()
    activities: Tuple[Callable[..., Any], ...] = ()
    worker_id: Optional[str] = None
    build_id: Optional[str] = None
    poll_timeout: float = 35.0
    max_concurrent_workflow_tasks: int = 10
    max_concurrent_activity_tasks: ConcurrencyOption = 10
    max_concurrent_workflow_task_polls: int = 1
    max_concurrent_activity_task_polls: int = 1
    shutdown_timeout: float = 30.0
    heartbeat_interval: float = 60.0
    max_startup_wait: float = 0.0
    metrics: Optional[MetricsRecorder] = None
    interceptors: Tuple[WorkerInterceptor, ...] = ()
    pool: Optional[str] = None
    sticky_cache_capacity: Optional[int] = None  # None: the worker's default (on; off on a server without sticky)
    sticky_cache_max_bytes: int = 16 * 1024 * 1024
    sticky_cache_ttl_seconds: int = 300
    external_storage: Any = None
    external_storage_threshold_bytes: Optional[int] = None
    external_storage_cache: Any = None
    max_concurrent_worker_sessions: int = 10  # session leases held at once (docs/sessions.md)

    RULES = _RULES
    SETTING_NAMES: ClassVar[Mapping[str, str]] = {
        **_SETTING_FIELDS,
        "worker_concurrency": "max_concurrent_activity_tasks",  # Celery's setting
    }
    ENVIRONMENT: ClassVar[Mapping[str, str]] = {f"SYNC_WORKER_{name}": field for name, field in _SETTING_FIELDS.items()}

    @property
    def prefork(self) -> bool:
        """``pool="prefork"``: the worker commands run these workers in a process pool
        (:mod:`sync_worker.host.prefork`); each Worker itself runs on threads."""
        return self.pool == "prefork"

    def worker_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of ``Worker(client, **...)``; the task queue must be set.
        ``pool="prefork"`` builds a threads Worker (the template of the pool's children)."""
        if self.task_queue is None:
            raise OptionsError("task_queue", None, "must be set to build a worker")
        kwargs = self.as_dict()
        if self.prefork:
            kwargs["pool"] = "threads"
        return kwargs

    def build(self, client: Any) -> Worker:
        """``Worker(client, **self.worker_kwargs())``."""
        from ..worker import Worker

        return Worker(client, **self.worker_kwargs())
