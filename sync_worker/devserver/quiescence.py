"""Is anything in flight, and when is the next deadline? (What the time-skipping clock asks.)

The server is *quiescent* when no worker holds or could take work: no workflow or activity task
is leased, no query is waiting for an answer, and every ready task is one that no registered,
active worker of its queue runs (its type is not in the worker's registration). Only the clock
can then change anything: :func:`next_due` says when the next timer fires, a failed workflow
task or an activity's back-off ends, an activity or workflow times out, or a schedule fires.

Both read the store under the engine lock; they never change it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import routing, schedules
from .engine import Engine
from .store import LEASED_WF_TASKS, Row

__all__ = ["busy_reason", "next_due"]

#: (table, indexed due column, the states whose due column is a deadline the scheduler acts on);
#: ``timers.fire_timer``, ``tasks.on_due`` and ``activities.on_due`` act on them (schedules:
#: ``schedules.next_change``).
_DEADLINES: Tuple[Tuple[str, str, str], ...] = (
    ("timers", "fire_at", "state = 'pending'"),
    ("wf_tasks", "due_at", "state IN ('delayed', 'leased')"),
    ("activities", "due_at", "state IN ('ready', 'leased', 'backoff')"),
)


def next_due(engine: Engine) -> Optional[float]:
    """The earliest deadline the scheduler will act on (epoch seconds), or ``None``."""
    with engine.lock:
        found = [engine.store.minimum(table, column, f"{where} AND {column} IS NOT NULL")
                 for table, column, where in _DEADLINES]
        found.extend(schedules.next_change(engine, row)
                     for row in engine.store.select("schedules", "state = 'active' AND next_fire_at IS NOT NULL"))
    present = [value for value in found if value is not None]
    return min(present) if present else None


def busy_reason(engine: Engine, queries_in_flight: int = 0) -> Optional[str]:
    """Why the server is not quiescent (a short phrase), or ``None`` when it is."""
    if queries_in_flight:
        return f"{queries_in_flight} query task(s) waiting for a worker's answer"
    with engine.lock:
        store = engine.store
        leased = store.count("wf_tasks", LEASED_WF_TASKS)
        if leased:
            return f"{leased} workflow task(s) leased"
        running = store.count("activities", "state = 'leased'")
        if running:
            return f"{running} activity task(s) running"
        workers = _active_workers(engine)
        # Only a queue with an active worker can take a task: its ready tasks, through the queue's index
        # (no index holds every ready workflow task), oldest deadline first as a scan of all would find them.
        ready: List[Row] = []
        for namespace, queue in workers:
            ready.extend(store.select("wf_tasks", "namespace = ? AND task_queue = ? AND state = 'ready'",
                                      (namespace, queue)))
        ready.sort(key=lambda row: (float(row.get("due_at") or 0), str(row.get("task_id"))))
        for task in ready:
            if _takeable(workers, task, "workflow", "workflow_type"):
                return f"workflow task of {task.get('workflow_type')!r} ready on {task.get('task_queue')!r}"
        for act in store.select("activities", "state = 'ready'"):
            if _takeable(workers, act, "activity", "activity_type"):
                return f"activity {act.get('activity_type')!r} ready on {act.get('task_queue')!r}"
    return None


def _active_workers(engine: Engine) -> Dict[Tuple[str, str], List[Row]]:
    by_queue: Dict[Tuple[str, str], List[Row]] = {}
    for worker in engine.store.select("workers", "1=1"):
        if worker.get("status") == "active":
            by_queue.setdefault((str(worker.get("namespace")), str(worker.get("task_queue"))), []).append(worker)
    return by_queue


def _takeable(workers: Dict[Tuple[str, str], List[Row]], row: Dict[str, Any], kind: str, type_key: str) -> bool:
    """Whether a registered, active worker of the row's queue would be handed it (``routing``'s rule)."""
    for worker in workers.get((str(row.get("namespace")), str(row.get("task_queue"))), []):
        types = routing.types_for(worker, kind)
        if types is None or row.get(type_key) in types:
            return True
    return False
