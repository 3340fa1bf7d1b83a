"""Task queues: list, describe (backlog, leases, pollers, admission) and build-id rollouts.

A queue exists once anything names it: a registered worker, a workflow task or an activity. The
dev server has no dispatch budgets, so every admission status is ``accepting``. Build-id rollout
intents (drain / promote / resume) are recorded per ``(queue, build_id)`` and reported with the
worker cohorts; the dev server does not route tasks by build id (see docs/devserver.md).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from .engine import Engine
from .store import LEASED_WF_TASKS, Row
from .util import ApiError, iso

_UNVERSIONED = "unversioned"


def _stale(engine: Engine, worker: Row) -> bool:
    return engine.now() - float(worker.get("last_seen_at") or 0) > engine.config.stale_after_seconds


def _queue_names(engine: Engine, namespace: str) -> List[str]:
    names: Set[str] = set()
    for table in ("workers", "wf_tasks", "activities"):
        for row in engine.store.select(table, "namespace = ?", (namespace,)):
            if isinstance(row.get("task_queue"), str):
                names.add(row["task_queue"])
    return sorted(names)


def _counts(rows: List[Row], ts: float) -> Dict[str, int]:
    ready = sum(1 for r in rows if r["state"] == "ready")
    leased = [r for r in rows if r["state"] == "leased"]
    expired = sum(1 for r in leased if r.get("lease_expires_at") is not None and r["lease_expires_at"] <= ts)
    return {"ready_count": ready, "leased_count": len(leased), "expired_lease_count": expired}


def _pollers(engine: Engine, namespace: str, queue: str) -> List[Dict[str, Any]]:
    out = []
    for worker in engine.store.select("workers", "namespace = ?", (namespace,), order="worker_id"):
        if worker.get("task_queue") != queue or worker.get("status") != "active":
            continue
        stale = _stale(engine, worker)
        out.append({"worker_id": worker["worker_id"], "runtime": worker.get("runtime"),
                    "build_id": worker.get("build_id"), "last_heartbeat_at": iso(worker.get("last_heartbeat_at")),
                    "status": "stale" if stale else "active", "is_stale": stale})
    return out


_UNBOUNDED = ("server_max_active_leases_per_queue", "server_remaining_active_lease_capacity",
              "server_max_active_leases_per_namespace", "server_remaining_namespace_active_lease_capacity",
              "server_dispatch_count_this_minute", "server_max_dispatches_per_minute",
              "server_remaining_dispatch_capacity", "server_namespace_dispatch_count_this_minute",
              "server_max_dispatches_per_minute_per_namespace", "server_remaining_namespace_dispatch_capacity")
_BUDGET_GROUP = ("server_dispatch_budget_group", "server_budget_group_dispatch_count_this_minute",
                 "server_max_dispatches_per_minute_per_budget_group", "server_remaining_budget_group_dispatch_capacity")


def _admission(queue_leases: Dict[str, int], namespace_leases: Dict[str, int]) -> Dict[str, Any]:
    """No budgets here: limits and remaining capacities are null (unbounded), dispatch rates untracked."""
    out: Dict[str, Any] = {}
    for kind in ("workflow_tasks", "activity_tasks"):
        entry: Dict[str, Any] = {"status": "accepting", "server_active_lease_count": queue_leases[kind],
                                 "server_namespace_active_lease_count": namespace_leases[kind],
                                 **{k: None for k in _UNBOUNDED}, "server_budget_source": "devserver.unbounded"}
        if kind == "workflow_tasks":
            entry.update({k: None for k in _BUDGET_GROUP})
        out[kind] = entry
    out["query_tasks"] = {"status": "accepting", "approximate_pending_count": None, "max_pending_per_queue": None,
                          "remaining_pending_capacity": None, "lock_required": False, "lock_supported": False,
                          "budget_source": "devserver.unbounded"}
    return out


def describe(engine: Engine, namespace: str, queue: str, *, full: bool = True) -> Dict[str, Any]:
    ts = engine.now()
    wf = [r for r in engine.store.select("wf_tasks", "namespace = ? AND task_queue = ? AND state IN "
                                         "('ready', 'leased')", (namespace, queue))]
    acts = [r for r in engine.store.select("activities", "namespace = ? AND task_queue = ? AND state IN "
                                           "('ready', 'leased')", (namespace, queue))]
    pollers = _pollers(engine, namespace, queue)
    ready_since = [r.get("due_at") or ts for r in wf + acts if r["state"] == "ready"]
    backlog = len(ready_since)
    out_counts = {"workflow_tasks": _counts(wf, ts), "activity_tasks": _counts(acts, ts)}
    out: Dict[str, Any] = {
        "name": queue, "namespace": namespace,
        "stats": {"approximate_backlog_count": backlog,
                  "approximate_backlog_age": f"{int(max(0.0, ts - min(ready_since))) if ready_since else 0}s",
                  **out_counts,
                  "pollers": {"active_count": sum(1 for p in pollers if not p["is_stale"]),
                              "stale_count": sum(1 for p in pollers if p["is_stale"])}},
        "admission": _admission(
            {"workflow_tasks": out_counts["workflow_tasks"]["leased_count"],
             "activity_tasks": out_counts["activity_tasks"]["leased_count"]},
            {"workflow_tasks": engine.store.count("wf_tasks", f"namespace = ? AND {LEASED_WF_TASKS}", (namespace,)),
             "activity_tasks": engine.store.count("activities", "namespace = ? AND state = 'leased'", (namespace,))}),
    }
    if full:
        leases = []
        for task in wf:
            if task["state"] == "leased":
                run = engine.get_run(task["run_id"]) or {}
                leases.append({"task_id": task["task_id"], "task_type": "workflow",
                               "workflow_id": run.get("workflow_id"), "run_id": task["run_id"],
                               "lease_owner": task.get("lease_owner"),
                               "lease_expires_at": iso(task.get("lease_expires_at")),
                               "is_expired": (task.get("lease_expires_at") or ts) <= ts,
                               "workflow_task_attempt": task.get("attempt")})
        for act in acts:
            if act["state"] == "leased":
                leases.append({"task_id": act["task_id"], "task_type": "activity",
                               "workflow_id": act.get("workflow_id"),
                               "run_id": act.get("run_id"), "lease_owner": act.get("lease_owner"),
                               "lease_expires_at": iso(act.get("lease_expires_at")),
                               "is_expired": (act.get("lease_expires_at") or ts) <= ts,
                               "activity_attempt_number": act.get("attempt_number")})
        out["current_leases"] = leases
        out["pollers"] = pollers
    return out


def list_queues(engine: Engine, namespace: str) -> Dict[str, Any]:
    return {"namespace": namespace,
            "task_queues": [describe(engine, namespace, name, full=False) for name in _queue_names(engine, namespace)]}


# -- build-id rollouts ---------------------------------------------------------------------------
def _rollout_key(namespace: str, queue: str, build_id: Optional[str]) -> str:
    return f"{namespace}\0rollout\0{queue}\0{build_id if build_id is not None else _UNVERSIONED}"


def _rollout(engine: Engine, namespace: str, queue: str, build_id: Optional[str]) -> Dict[str, Any]:
    stored = engine.store.get("kv", _rollout_key(namespace, queue, build_id))
    return dict(stored["state"]) if stored else {"drain_intent": "active", "drained_at": None, "promoted_at": None}


def build_ids(engine: Engine, namespace: str, queue: str) -> Dict[str, Any]:
    cohorts: Dict[Optional[str], List[Row]] = {}
    workers_here = sorted(engine.store.select("workers", "namespace = ?", (namespace,)),
                          key=lambda w: float(w.get("registered_at") or 0))
    for worker in workers_here:
        if worker.get("task_queue") == queue and worker.get("status") == "active":
            cohorts.setdefault(worker.get("build_id"), []).append(worker)
    for stored in engine.store.select("kv", "namespace = ? AND kind = 'rollout'", (namespace,)):
        if stored.get("task_queue") == queue:
            cohorts.setdefault(stored.get("build_id"), [])
    items = []
    for build_id, workers in cohorts.items():
        state = _rollout(engine, namespace, queue, build_id)
        stale = [w for w in workers if _stale(engine, w)]
        live = [w for w in workers if not _stale(engine, w)]
        draining = state["drain_intent"] == "draining"
        if draining:
            status = "draining"
        elif live:
            status = "active"
        else:
            status = "stale_only" if stale else "inactive"
        beats = [w.get("last_heartbeat_at") or w.get("last_seen_at") for w in workers]
        items.append({
            "build_id": build_id, "rollout_status": status,
            "active_worker_count": 0 if draining else len(live), "draining_worker_count": len(live) if draining else 0,
            "stale_worker_count": len(stale), "total_worker_count": len(workers),
            "runtimes": sorted({str(w["runtime"]) for w in workers if w.get("runtime")}),
            "sdk_versions": sorted({str(w["sdk_version"]) for w in workers if w.get("sdk_version")}),
            "last_heartbeat_at": iso(max((b for b in beats if b), default=None)),
            "first_seen_at": iso(min((w["registered_at"] for w in workers), default=None)),
            **{k: iso(v) if k.endswith("_at") else v for k, v in state.items()},
        })
    items.sort(key=lambda i: (i["build_id"] is None, str(i["first_seen_at"] or "")), reverse=False)
    return {"namespace": namespace, "task_queue": queue, "stale_after_seconds": engine.config.stale_after_seconds,
            "build_ids": items}


def _build_id(body: Dict[str, Any]) -> Optional[str]:
    """The cohort's build id; ``null`` names the unversioned cohort (workers without one)."""
    if "build_id" not in body:
        raise ApiError(422, "validation_failed", "build_id is required (null for the unversioned cohort)",
                       errors={"build_id": ["is required"]}, validation_errors={"build_id": ["is required"]})
    value = body["build_id"]
    if value is not None and (not isinstance(value, str) or not value or len(value) > 255):
        raise ApiError(422, "validation_failed", "build_id must be a non-empty string or null",
                       errors={"build_id": ["must be a non-empty string or null"]},
                       validation_errors={"build_id": ["must be a non-empty string or null"]})
    return None if value is None else str(value)


def set_rollout(engine: Engine, namespace: str, queue: str, action: str, body: Dict[str, Any]) -> Dict[str, Any]:
    build_id = _build_id(body)
    state = _rollout(engine, namespace, queue, build_id)
    ts = engine.now()
    if action == "drain":
        if state["drain_intent"] != "draining":  # a repeated drain keeps the first drained_at
            state.update({"drain_intent": "draining", "drained_at": ts})
    else:
        state.update({"drain_intent": "active", "drained_at": None})
        if action == "promote":
            state["promoted_at"] = ts
    engine.store.put("kv", {"key": _rollout_key(namespace, queue, build_id), "namespace": namespace,
                            "kind": "rollout", "task_queue": queue, "build_id": build_id, "state": state})
    out: Dict[str, Any] = {"namespace": namespace, "task_queue": queue, "build_id": build_id,
                           "drain_intent": state["drain_intent"], "drained_at": iso(state["drained_at"])}
    if action == "promote":
        out.update({"promoted_at": iso(state["promoted_at"]), "new_start_selected": True})
    return out
