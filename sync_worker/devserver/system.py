"""The ``/api/system/*`` maintenance surface: repair, retention and activity-timeout status and passes.

The dev server's scheduler thread already does this work continuously (expired leases go back
to the queue, timeouts fire within a tick); these routes let an operator look and run one pass
on demand, with the real server's bodies. Retention prunes closed runs older than their
namespace's ``retention_days`` (history, tasks, activities, timers and the run itself).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import activities, messages, tasks
from .engine import Engine
from .store import LEASED_WF_TASKS, Row
from .util import TERMINAL_STATUSES, ApiError, iso

SCAN_LIMIT = 100
_DAY = 86400.0


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{field} {message}", errors={field: [message]},
                    validation_errors={field: [message]})


def _ids(body: Dict[str, Any], key: str) -> Optional[List[str]]:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > 1000 or not all(isinstance(v, str) and v for v in value):
        raise _invalid(key, "must be a list of at most 1000 non-empty strings")
    return list(value)


def _limit(body: Dict[str, Any]) -> int:
    value = body.get("limit", SCAN_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise _invalid("limit", "must be an integer between 1 and 1000")
    return int(value)


# -- repair ------------------------------------------------------------------------------------
def _needs_task(engine: Engine, run: Row) -> bool:
    task = engine.store.get("wf_tasks", run["task_id"]) if run.get("task_id") else None
    if task is not None and task["state"] in ("ready", "delayed", "leased"):
        return False
    return messages.needs_task(run)


def _repair_candidates(engine: Engine, namespace: str) -> Dict[str, List[Row]]:
    ts = engine.now()
    existing = [t for t in engine.store.select("wf_tasks", f"namespace = ? AND {LEASED_WF_TASKS}", (namespace,))
                if (t.get("lease_expires_at") or ts) <= ts]
    missing = [r for r in engine.store.select("runs", "namespace = ? AND is_current = 1", (namespace,))
               if r.get("kind") == "workflow" and r["status"] not in TERMINAL_STATUSES and _needs_task(engine, r)]
    return {"existing": existing[:SCAN_LIMIT], "missing": missing[:SCAN_LIMIT]}


def repair_status(engine: Engine, namespace: str) -> Dict[str, Any]:
    found = _repair_candidates(engine, namespace)
    scopes: Dict[str, Dict[str, Any]] = {}
    for kind, rows in (("existing_task_candidates", found["existing"]), ("missing_task_candidates", found["missing"])):
        for row in rows:
            run = row if kind == "missing_task_candidates" else (engine.get_run(row["run_id"]) or {})
            key = f"{run.get('workflow_id')}:{run.get('run_id')}"
            scope = scopes.setdefault(key, {"scope_key": key, "existing_task_candidates": 0,
                                            "missing_task_candidates": 0, "total_candidates": 0,
                                            "selected_total_candidates": 0, "scan_limited_by_global_policy": False})
            scope[kind] += 1
            scope["total_candidates"] += 1
            scope["selected_total_candidates"] += 1
    total = len(found["existing"]) + len(found["missing"])
    return {"namespace": namespace,
            "policy": {"redispatch_after_seconds": engine.config.workflow_task_lease_seconds,
                       "loop_throttle_seconds": engine.config.tick_seconds, "scan_limit": SCAN_LIMIT,
                       "scan_strategy": "oldest_first", "failure_backoff_max_seconds": 0},
            "candidates": {"total_candidates": total, "existing_task_candidates": len(found["existing"]),
                           "missing_task_candidates": len(found["missing"]), "scan_pressure": False,
                           "oldest_task_candidate_created_at": iso(min((t.get("created_at") or 0 for t in
                                                                        found["existing"]), default=None)),
                           "oldest_missing_run_started_at": iso(min((r["created_at"] for r in found["missing"]),
                                                                    default=None)),
                           "scopes": list(scopes.values())}}


def repair_pass(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    run_ids = _ids(body, "run_ids")
    instance_id = body.get("instance_id")
    if instance_id is not None and not isinstance(instance_id, str):
        raise _invalid("instance_id", "must be a string")
    found = _repair_candidates(engine, namespace)
    existing = [t for t in found["existing"] if run_ids is None or t["run_id"] in run_ids]
    missing = [r for r in found["missing"] if (run_ids is None or r["run_id"] in run_ids)
               and (instance_id is None or r["workflow_id"] == instance_id)]
    if instance_id is not None:
        existing = [t for t in existing if (engine.get_run(t["run_id"]) or {}).get("workflow_id") == instance_id]
    for task in existing:
        tasks.requeue(engine, task)
    for run in missing:
        engine.wake(run)
        engine.save_run(run)
    return {"namespace": namespace, "instance_id": instance_id, "throttled": False,
            "selected_existing_task_candidates": len(existing), "selected_missing_task_candidates": len(missing),
            "repaired_existing_tasks": len(existing), "repaired_missing_tasks": len(missing),
            "dispatched_tasks": len(existing) + len(missing), "selected_command_contract_candidates": 0,
            "backfilled_command_contracts": 0, "command_contract_backfill_unavailable": 0,
            "command_contract_failures": [], "existing_task_failures": [], "missing_run_failures": []}


# -- retention ----------------------------------------------------------------------------------
def _retention_days(engine: Engine, namespace: str) -> int:
    row = engine.store.get("namespaces", namespace) or {}
    return int(row.get("retention_days") or 30)


def _expired(engine: Engine, namespace: str, cutoff: float) -> List[Row]:
    return [r for r in engine.store.select("runs", "namespace = ?", (namespace,), order="created_order")
            if r["status"] in TERMINAL_STATUSES and r.get("closed_at") is not None and r["closed_at"] < cutoff]


def retention_status(engine: Engine, namespace: str) -> Dict[str, Any]:
    days = _retention_days(engine, namespace)
    cutoff = engine.now() - days * _DAY
    expired = _expired(engine, namespace, cutoff)
    return {"namespace": namespace, "retention_days": days, "cutoff": iso(cutoff),
            "expired_run_count": len(expired), "expired_run_ids": [r["run_id"] for r in expired[:SCAN_LIMIT]],
            "scan_limit": SCAN_LIMIT, "scan_pressure": len(expired) > SCAN_LIMIT}


def retention_pass(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    run_ids = _ids(body, "run_ids")
    limit = _limit(body)
    cutoff = engine.now() - _retention_days(engine, namespace) * _DAY
    if run_ids is None:
        candidates: List[Any] = [r["run_id"] for r in _expired(engine, namespace, cutoff)[:limit]]
    else:
        candidates = run_ids[:limit]
    results: List[Dict[str, Any]] = []
    for run_id in candidates:
        run = engine.get_run(run_id)
        if run is None or run["namespace"] != namespace:
            results.append({"run_id": run_id, "outcome": "skipped", "reason": "run_not_found"})
        elif run["status"] not in TERMINAL_STATUSES:
            results.append({"run_id": run_id, "outcome": "skipped", "reason": "run_not_terminal"})
        elif (run.get("closed_at") or engine.now()) >= cutoff:
            results.append({"run_id": run_id, "outcome": "skipped", "reason": "retention_not_expired"})
        else:
            store = engine.store
            events = store.delete_where("events", "run_id = ?", (run_id,))
            removed = store.delete_where("wf_tasks", "run_id = ?", (run_id,))
            store.delete_where("activities", "run_id = ?", (run_id,))
            store.delete_where("timers", "run_id = ?", (run_id,))
            store.delete("runs", run_id)
            results.append({"run_id": run_id, "outcome": "pruned", "history_events_deleted": events,
                            "tasks_deleted": removed, "external_payloads_deleted": 0, "deleted": True})
    pruned = [r for r in results if r["outcome"] == "pruned"]
    return {"namespace": namespace, "processed": len(results), "pruned": len(pruned),
            "skipped": len(results) - len(pruned), "failed": 0, "results": results}


# -- activity timeouts --------------------------------------------------------------------------
def _due_activities(engine: Engine, namespace: str) -> List[Row]:
    return engine.store.select("activities", "namespace = ? AND state IN ('ready', 'leased', 'backoff') "
                                             "AND due_at <= ?", (namespace, engine.now()), order="due_at")


def activity_timeout_status(engine: Engine, namespace: str) -> Dict[str, Any]:
    due = _due_activities(engine, namespace)
    return {"namespace": namespace, "expired_count": len(due),
            "expired_execution_ids": [a["execution_id"] for a in due[:SCAN_LIMIT]], "scan_limit": SCAN_LIMIT,
            "scan_pressure": len(due) > SCAN_LIMIT}


def activity_timeout_pass(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    ids = _ids(body, "execution_ids")
    limit = _limit(body)
    wanted = ids[:limit] if ids is not None else [a["execution_id"] for a in _due_activities(engine, namespace)[:limit]]
    results: List[Dict[str, Any]] = []
    for execution_id in wanted:
        act = engine.store.get("activities", execution_id)
        if act is None or act["namespace"] != namespace:
            results.append({"execution_id": execution_id, "outcome": "skipped", "reason": "execution_not_found"})
            continue
        due = act.get("due_at")
        if act["state"] not in ("ready", "leased", "backoff") or due is None or due > engine.now():
            results.append({"execution_id": execution_id, "outcome": "skipped", "reason": "not_expired"})
            continue
        before = (act["state"], act.get("attempt_number"))
        activities.on_due(engine, act)
        after = engine.store.get("activities", execution_id) or {}
        if (after.get("state"), after.get("attempt_number")) == before:  # nothing was due after all
            results.append({"execution_id": execution_id, "outcome": "skipped", "reason": "not_expired"})
            continue
        results.append({"execution_id": execution_id, "outcome": "enforced",
                        "has_retry": after.get("state") in ("backoff", "ready")})
    enforced = sum(1 for r in results if r["outcome"] == "enforced")
    return {"namespace": namespace, "processed": len(results), "enforced": enforced,
            "skipped": len(results) - enforced, "failed": 0, "results": results}
