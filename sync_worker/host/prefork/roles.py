"""What one child of the prefork pool runs: its spec, its split of the loaded worker, its recycler.

A child serves one *role*: ``activities`` (one activity slot, as a Celery prefork child runs one
task at a time) or ``workflows`` (the one home of workflow and query tasks, so replay and the
sticky cache stay in one process). :func:`split_worker` builds that child's
:class:`~sync_worker.Worker` from the worker the parent loaded: same task queue, types,
interceptors and limits, its own Client (own connection pool, opened after the fork) and its own
worker id. :class:`Recycler` is the interceptor that ends a child after ``max_tasks_per_child``
activities or once its resident set passes ``max_memory_per_child``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ...interceptors import ActivityHandler, ActivityInterceptorContext, PassthroughWorkerInterceptor
from ...runtime.admission.peak import read_rss_and_hwm

if TYPE_CHECKING:  # pragma: no cover
    from ...worker import Worker

__all__ = ["ACTIVITIES", "WORKFLOWS", "ChildSpec", "Recycler", "resident_bytes", "split_worker"]

logger = logging.getLogger("sync_worker.prefork")

ACTIVITIES = "activities"
WORKFLOWS = "workflows"


@dataclass(frozen=True)
class ChildSpec:
    """One child of the pool: its role, its place (``index``) and which replacement it is (``generation``)."""

    role: str
    index: int
    generation: int

    @property
    def tag(self) -> str:
        """The suffix of the child's worker ids: ``a0.1`` (activities child 0, second start), ``w0.0``."""
        return f"{self.role[0]}{self.index}.{self.generation}"


def resident_bytes() -> Optional[int]:
    """This process's resident set (VmRSS) in bytes, the reading the admission gate falls back to;
    None where /proc is missing."""
    figures = read_rss_and_hwm()
    return figures[0] if figures is not None else None


class Recycler(PassthroughWorkerInterceptor):
    """Counts this child's activities and asks it to leave after the one that reached a limit.

    ``on_recycle(reason)`` is called on the activity's thread as the activity returns (before its
    result is reported): it stops intake at once, so the child leases nothing more, and starts a
    warm stop that drains the reporting task. Nothing is lost or reported twice.
    """

    def __init__(self, *, max_tasks: Optional[int] = None, max_memory_bytes: Optional[int] = None,
                 memory: Callable[[], Optional[int]] = resident_bytes) -> None:
        self.max_tasks = max_tasks
        self.max_memory_bytes = max_memory_bytes
        self.started = 0
        self.finished = 0
        self.reason: Optional[str] = None
        self.on_recycle: Optional[Callable[[str], None]] = None
        self._memory = memory

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        self.started += 1
        try:
            return next(context)
        finally:
            self.finished += 1
            self._check()

    def _check(self) -> None:
        if self.reason is not None:
            return
        reason = None
        if self.max_tasks is not None and self.finished >= self.max_tasks:
            reason = f"max-tasks-per-child reached ({self.finished} task(s))"
        elif self.max_memory_bytes is not None:
            used = self._memory()
            if used is not None and used > self.max_memory_bytes:
                reason = f"max-memory-per-child exceeded ({used // 1024} KiB > {self.max_memory_bytes // 1024} KiB)"
        if reason is None:
            return
        self.reason = reason
        if self.on_recycle is not None:
            self.on_recycle(reason)


def split_worker(worker: Worker, spec: ChildSpec, *, recycler: Optional[Recycler] = None) -> Worker:
    """The child's share of ``worker`` (built in the child, after the fork): see the module docstring."""
    from ...worker import Worker

    client = worker.client
    clone = getattr(client, "clone", None)
    if callable(clone):
        client = clone()  # its own connection pool: nothing the parent opened is shared
    activities_child = spec.role == ACTIVITIES
    interceptors: List[Any] = list(worker.interceptors)
    if activities_child and recycler is not None:
        interceptors.insert(0, recycler)  # outermost: it sees every attempt, whatever the others do
    sticky = worker.sticky_cache
    return Worker(
        client,
        task_queue=worker.task_queue,
        workflows=() if activities_child else list(worker.workflows.classes),
        activities=list(worker.activities.values()) if activities_child else (),
        worker_id=f"{worker.worker_id}-{spec.tag}",
        build_id=worker.build_id,
        poll_timeout=worker.poll_timeout,
        max_concurrent_workflow_tasks=worker.max_concurrent_workflow_tasks,
        max_concurrent_activity_tasks=1,
        max_concurrent_workflow_task_polls=worker.max_concurrent_workflow_task_polls,
        max_concurrent_activity_task_polls=1,
        shutdown_timeout=worker.shutdown_timeout,
        heartbeat_interval=worker.heartbeat_interval,
        max_startup_wait=worker.max_startup_wait,
        metrics=worker.metrics,
        interceptors=interceptors,
        pool="threads",
        sticky_cache_capacity=sticky.capacity,
        sticky_cache_max_bytes=sticky.max_bytes,
        sticky_cache_ttl_seconds=sticky.ttl_seconds,
    )
