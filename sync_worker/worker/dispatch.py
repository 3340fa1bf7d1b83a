"""Task dispatch of a :class:`~sync_worker.worker.worker.Worker`: each accepted task runs on a task
of the backend holding its slot; malformed tasks are refused before anything runs; outcomes are
counted. Functions over the worker (its methods delegate here) so ``worker.py`` stays one concept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from ..runtime.inflight import InflightTask
from ..runtime.metrics import TASK_DURATION, TASKS
from ..runtime.slots import Slot
from .activities import run_activity_task
from .malformed import reject_malformed
from .workflow_tasks import run_query_task, run_workflow_task

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

__all__ = ["dispatch_activity", "dispatch_workflow", "reject_if_malformed", "run_query", "spawn_task"]

logger = logging.getLogger("sync_worker.worker")

# Task outcomes the adaptive controller counts as errors (its backpressure rule).
ERROR_OUTCOMES = frozenset({"failed", "failed_non_retryable", "crashed", "complete_error"})


def spawn_task(worker: Worker, kind: str, task: Dict[str, Any], slot: Slot,
                body: Callable[[InflightTask], str]) -> None:
    task_id = str(task.get("task_id", ""))
    inflight = InflightTask(worker.backend, kind, task_id)
    key = worker._inflight.add(inflight)
    tags = {"task_kind": kind, "task_queue": worker.task_queue}

    def execute() -> None:
        outcome = "crashed"
        try:
            outcome = body(inflight)
        except BaseException as error:
            if inflight.abandoned:  # e.g. killed by a cold stop at its next cooperative point
                outcome = "abandoned"
                logger.warning("%s task %s ended after it was abandoned (%s)", kind, task_id,
                               type(error).__name__)
            else:
                logger.exception("%s task %s crashed the runtime", kind, task_id)
        finally:
            duration = worker.backend.monotonic() - inflight.started_at
            worker.metrics.increment(TASKS, 1.0, dict(tags, outcome=outcome))
            worker.metrics.record(TASK_DURATION, duration, dict(tags, outcome=outcome))
            worker._inflight.remove(key)
            slot.release(ok=outcome not in ERROR_OUTCOMES)

    try:
        inflight.handle = worker.backend.spawn_task(f"sync-worker-{kind}-{task_id}", execute)
    except BaseException:
        worker._inflight.remove(key)
        slot.release()
        raise

def reject_if_malformed(worker: Worker, kind: str, task: Dict[str, Any], slot: Optional[Slot]) -> bool:
    """Never run a malformed task: count it, log it once, report it when identifiable."""
    client = worker._query_client if kind == "query" else worker.client
    if not reject_malformed(kind, task, client=client, worker_id=worker.worker_id, cancel=worker._poll_cancel):
        return False
    worker.metrics.increment(TASKS, 1.0, {"task_kind": kind, "task_queue": worker.task_queue, "outcome": "malformed"})
    if slot is not None:
        slot.release()
    return True

def dispatch_activity(worker: Worker, task: Dict[str, Any], slot: Optional[Slot]) -> None:
    assert slot is not None
    if reject_if_malformed(worker, "activity", task, slot):
        return
    slot.started(str(task.get("activity_type") or ""))
    spawn_task(worker, "activity", task, slot, lambda inflight: run_activity_task(
        client=worker.client, task=task, activities=worker.activities, worker_id=worker.worker_id,
        task_queue=worker.task_queue, inflight=inflight, interceptors=worker.interceptors,
        namespace=worker._namespace,
    ))

def dispatch_workflow(worker: Worker, task: Dict[str, Any], slot: Optional[Slot]) -> None:
    assert slot is not None
    if reject_if_malformed(worker, "workflow", task, slot):
        return
    spawn_task(worker, "workflow", task, slot, lambda inflight: run_workflow_task(
        client=worker.client, task=task, registry=worker.workflows.registry(), worker_id=worker.worker_id,
        task_queue=worker.task_queue, inflight=inflight, sleep=worker.backend.sleep,
        executor=worker._workflow_executor, interceptors=worker.interceptors, namespace=worker._namespace,
        sticky=worker._sticky, build_id=worker.build_id,
    ))

def run_query(worker: Worker, task: Dict[str, Any], slot: Optional[Slot]) -> None:
    if reject_if_malformed(worker, "query", task, None):
        return
    started = worker.backend.monotonic()
    outcome = run_query_task(client=worker._query_client, task=task, registry=worker.workflows.registry(),
                             worker_id=worker.worker_id, cancel=worker._poll_cancel,
                             executor=worker._query_executor, interceptors=worker.interceptors,
                             task_queue=worker.task_queue, namespace=worker._namespace)
    tags = {"task_kind": "query", "task_queue": worker.task_queue, "outcome": outcome}
    worker.metrics.increment(TASKS, 1.0, tags)
    worker.metrics.record(TASK_DURATION, worker.backend.monotonic() - started, tags)
