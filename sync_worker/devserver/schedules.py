"""Schedules: create / describe / list / update / pause / resume / trigger / backfill / delete /
history, and firing on the server's clock.

Behaviour follows the real server and its ServerParity schedule cases: a fire starts the
schedule's action as a new workflow whose history carries a ``ScheduleTriggered`` marker right
after ``WorkflowStarted``; every lifecycle step is one event of the schedule's own audit stream
(``ScheduleCreated``, ``SchedulePaused``, ``ScheduleTriggerSkipped``, ``ScheduleResumed``,
``ScheduleTriggered``, ``ScheduleUpdated``, ``ScheduleDeleted``), which survives deletion; a
paused schedule skips a manual trigger with ``status_not_triggerable``; ``max_runs`` fires and
the schedule is deleted with ``max_runs_exhausted``. Missed occurrences are not caught up: after
a fire the next occurrence is the first one after now. Jitter delays a fire by up to
``jitter_seconds``, never advances it.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Dict, List, Optional, Tuple

from . import control, schedule_specs
from .engine import Engine
from .lifecycle import cancel_run, terminate_run
from .schedule_input import (
    BUFFER_LIMITS,
    check_overlap_policy,
    optional_note,
    validate_create,
    validate_update,
)
from .schedule_views import detail, list_item, snapshot
from .store import Row
from .util import TERMINAL_STATUSES, ApiError, iso, page_token, parse_page_token

_RECENT_ACTIONS = 10
_BUFFER_RECHECK_SECONDS = 0.2
_rng = random.Random()


def _key(namespace: str, schedule_id: str) -> str:
    return f"{namespace}\0{schedule_id}"


def _not_found(schedule_id: str) -> ApiError:
    return ApiError(404, "schedule_not_found", f"schedule {schedule_id} was not found", schedule_id=schedule_id)


def _require(engine: Engine, namespace: str, schedule_id: str, *, allow_deleted: bool = False) -> Row:
    row = engine.store.get("schedules", _key(namespace, schedule_id))
    if row is None or (row["state"] == "deleted" and not allow_deleted):
        raise _not_found(schedule_id)
    return row


# -- the audit stream ----------------------------------------------------------------------------
def _record(engine: Engine, row: Row, event_type: str, payload: Dict[str, Any],
            workflow_id: Optional[str] = None, run_id: Optional[str] = None) -> None:
    row["history_seq"] = int(row.get("history_seq") or 0) + 1
    seq = row["history_seq"]
    event = {"id": f"{row['ulid']}-e{seq}", "sequence": seq, "event_type": event_type, "recorded_at": iso(engine.now()),
             "workflow_instance_id": workflow_id, "workflow_run_id": run_id,
             "payload": {**payload, "schedule": snapshot(row)}}
    engine.store.put("schedule_events", {"key": f"{row['key']}\0{seq:012d}", "namespace": row["namespace"],
                                         "schedule_id": row["schedule_id"], "seq": seq, "event": event})


def history(engine: Engine, namespace: str, schedule_id: str, query: Dict[str, str]) -> Dict[str, Any]:
    _require(engine, namespace, schedule_id, allow_deleted=True)
    limit = _query_int(query, "limit", 100, minimum=1)
    limit = min(limit, 500)
    after = _query_int(query, "after_sequence", 0, minimum=0)
    rows = engine.store.select("schedule_events", "namespace = ? AND schedule_id = ? AND seq > ?",
                               (namespace, schedule_id, after), order="seq", limit=limit + 1)
    events = [r["event"] for r in rows[:limit]]
    more = len(rows) > limit
    return {"schedule_id": schedule_id, "namespace": namespace, "events": events, "has_more": more,
            "next_cursor": events[-1]["sequence"] if more and events else None}


def _query_int(query: Dict[str, str], key: str, default: int, *, minimum: int) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or len(raw) > 12 or int(raw) < minimum:
        raise ApiError(422, "validation_failed", f"{key} must be an integer >= {minimum}",
                       errors={key: [f"must be an integer >= {minimum}"]},
                       validation_errors={key: [f"must be an integer >= {minimum}"]})
    return int(raw)


# -- timing --------------------------------------------------------------------------------------
def _plan_next(engine: Engine, row: Row, after: float) -> None:
    """Set the next occurrence (what describe reports) and the jittered moment it fires."""
    if row["state"] != "active":
        row["next_occurrence"], row["due_at"] = None, None
    else:
        occurrence = schedule_specs.next_after(row["spec"], after)
        jitter = int(row.get("jitter_seconds") or 0)
        row["next_occurrence"] = occurrence
        row["due_at"] = None if occurrence is None else occurrence + (_rng.uniform(0, jitter) if jitter else 0.0)
    _index_wake(engine, row)


def _index_wake(engine: Engine, row: Row) -> None:
    """The indexed wake-up time: the due occurrence, or soon if a buffered fire waits."""
    wake = row.get("due_at") if row["state"] == "active" else None
    if row["state"] == "active" and row.get("buffered"):
        recheck = engine.now() + _BUFFER_RECHECK_SECONDS
        wake = recheck if wake is None else min(wake, recheck)
    row["next_fire_at"] = wake


# -- CRUD ----------------------------------------------------------------------------------------
def create(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    fields = validate_create(body)
    schedule_id = fields.pop("schedule_id") or f"sched-{uuid.uuid4().hex[:20]}"
    key = _key(namespace, schedule_id)
    existing = engine.store.get("schedules", key)
    if existing is not None and existing["state"] != "deleted":
        raise ApiError(409, "schedule_already_exists",
                       f"Schedule [{schedule_id}] already exists in namespace [{namespace}].", schedule_id=schedule_id)
    ts = engine.now()
    paused = bool(fields.pop("paused", False))
    row: Row = {
        "key": key, "namespace": namespace, "schedule_id": schedule_id, "ulid": f"sch-{uuid.uuid4().hex}",
        "state": "paused" if paused else "active", "fires_count": 0, "failures_count": 0,
        "skipped_trigger_count": 0, "last_skip_reason": None, "last_skipped_at": None, "last_fired_at": None,
        "latest_workflow_instance_id": None, "latest_run_id": None, "recent_actions": [], "buffered": [],
        "created_at": ts, "updated_at": ts, "paused_at": ts if paused else None, "deleted_at": None,
        "history_seq": int(existing.get("history_seq") or 0) if existing else 0,
        "overlap_policy": "skip", "jitter_seconds": 0, "max_runs": None, "memo": None, "search_attributes": None,
        "note": None, **fields,
    }
    _plan_next(engine, row, ts)
    _record(engine, row, "ScheduleCreated", {"spec": row["spec"], "action": row["action"],
                                             "overlap_policy": row["overlap_policy"],
                                             "next_fire_at": iso(row["next_occurrence"])})
    engine.store.put("schedules", row)
    return {"namespace": namespace, "schedule_id": schedule_id, "outcome": "created", "status": detail(row)["status"],
            "created_at": iso(ts)}


def describe(engine: Engine, namespace: str, schedule_id: str) -> Dict[str, Any]:
    return detail(_require(engine, namespace, schedule_id))


def list_schedules(engine: Engine, namespace: str, query: Dict[str, str]) -> Dict[str, Any]:
    if query.get("query"):
        raise ApiError(422, "unsupported_visibility_query",
                       "the dev server filters schedules by status and workflow_type only")
    size = min(_query_int(query, "page_size", 100, minimum=1), 1000)
    offset = parse_page_token(query.get("next_page_token"))
    items: List[Dict[str, Any]] = []
    for row in engine.store.select("schedules", "namespace = ? AND state != 'deleted'", (namespace,)):
        item = list_item(row)
        if query.get("status") and item["status"] != query["status"]:
            continue
        if query.get("workflow_type") and item["workflow_type"] != query["workflow_type"]:
            continue
        items.append(item)
    items.sort(key=lambda i: (i["created_at"] or "", i["schedule_id"]), reverse=True)
    page = items[offset:offset + size]
    more = len(items) > offset + size
    return {"namespace": namespace, "schedules": page, "next_page_token": page_token(offset + size) if more else None}


def update(engine: Engine, namespace: str, schedule_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    row = _require(engine, namespace, schedule_id)
    fields = validate_update(body)
    changed: List[str] = []
    for name, value in fields.items():
        if name == "action":
            value = {**row["action"], **value}
        if row.get(name) != value:
            row[name] = value
            changed.append(name)
    if "max_runs" in changed and row["max_runs"] is not None and row["fires_count"] >= row["max_runs"]:
        raise ApiError(422, "validation_failed", "max_runs must exceed the fires already made",
                       errors={"max_runs": ["must exceed fires_count"]},
                       validation_errors={"max_runs": ["must exceed fires_count"]})
    row["updated_at"] = engine.now()
    _plan_next(engine, row, row["updated_at"])
    _record(engine, row, "ScheduleUpdated", {"fields": changed, "changed_fields": changed})
    engine.store.put("schedules", row)
    return {"namespace": namespace, "schedule_id": schedule_id, "outcome": "updated",
            "updated_at": iso(row["updated_at"])}


def set_paused(engine: Engine, namespace: str, schedule_id: str, body: Dict[str, Any], paused: bool) -> Dict[str, Any]:
    """Pause or resume; both are idempotent.

    Pausing an already paused schedule answers ``paused`` again and records another
    ``SchedulePaused`` with a new ``paused_at``, as the PHP server does (the engine's
    ``ScheduleManager::pause`` re-saves the status and records the audit event whatever the
    status was; only a deleted schedule is refused). Resuming a schedule that is not paused
    answers ``resumed`` and records nothing. There the servers differ: PHP answers 500
    (``ScheduleManager::resume`` throws a ``LogicException`` "is not paused" that the controller
    does not catch) and the Rust port ``409 schedule_status_conflict``; the dev server makes it
    a no-op, as asked for both operations.
    """
    row = _require(engine, namespace, schedule_id)
    note = optional_note(body)
    ts = engine.now()
    if not paused and row["state"] != "paused":
        return {"namespace": namespace, "schedule_id": schedule_id, "outcome": "resumed", "paused": False,
                "note": row.get("note"), "resumed_at": None}
    if note is not None:
        row["note"] = note
    row["state"] = "paused" if paused else "active"
    row["paused_at"] = ts if paused else None
    row["updated_at"] = ts
    _plan_next(engine, row, ts)
    if paused:
        _record(engine, row, "SchedulePaused", {"paused_at": iso(ts), "reason": note, "note": note})
    else:
        _record(engine, row, "ScheduleResumed", {"next_fire_at": iso(row["next_occurrence"]), "note": note})
    engine.store.put("schedules", row)
    out = {"namespace": namespace, "schedule_id": schedule_id, "outcome": "paused" if paused else "resumed",
           "paused": paused, "note": row.get("note")}
    out["paused_at" if paused else "resumed_at"] = iso(ts)
    return out


def delete(engine: Engine, namespace: str, schedule_id: str) -> Dict[str, Any]:
    row = _require(engine, namespace, schedule_id)
    _mark_deleted(engine, row, "deleted")
    return {"namespace": namespace, "schedule_id": schedule_id, "outcome": "deleted",
            "deleted_at": iso(row["deleted_at"])}


def _mark_deleted(engine: Engine, row: Row, reason: str) -> None:
    ts = engine.now()
    row.update({"state": "deleted", "deleted_at": ts, "updated_at": ts, "buffered": []})
    if reason == "max_runs_exhausted":
        row["remaining_actions_exhausted"] = True
    _plan_next(engine, row, ts)
    _record(engine, row, "ScheduleDeleted", {"reason": reason, "deleted_at": iso(ts)})
    engine.store.put("schedules", row)


# -- firing --------------------------------------------------------------------------------------
def next_change(engine: Engine, row: Row) -> Optional[float]:
    """When the clock alone next changes this schedule (the caller holds the lock).

    ``next_fire_at`` but for a buffered fire behind a run that is still open: that waits for the
    run (its close is not a clock event), so only the next occurrence counts.
    """
    if row.get("buffered") and _running_run(engine, row) is not None:
        due = row.get("due_at") if row["state"] == "active" else None
        return float(due) if due is not None else None
    wake = row.get("next_fire_at")
    return float(wake) if wake is not None else None


def _running_run(engine: Engine, row: Row) -> Optional[Row]:
    latest = row.get("latest_workflow_instance_id")
    if not latest:
        return None
    run = engine.current_run(row["namespace"], latest)
    return run if run is not None and run["status"] not in TERMINAL_STATUSES else None


def _skip(engine: Engine, row: Row, reason: str) -> Dict[str, Any]:
    ts = engine.now()
    row["skipped_trigger_count"] = int(row.get("skipped_trigger_count") or 0) + 1
    row.update({"last_skip_reason": reason, "last_skipped_at": ts, "updated_at": ts})
    _record(engine, row, "ScheduleTriggerSkipped", {"reason": reason, "skipped_trigger_count":
                                                    row["skipped_trigger_count"], "last_skipped_at": iso(ts)})
    return {"schedule_id": row["schedule_id"], "outcome": "skipped", "reason": reason}


def _remember(row: Row, action: Dict[str, Any]) -> None:
    row["recent_actions"] = [*(row.get("recent_actions") or []), action][-_RECENT_ACTIONS:]


def _start(engine: Engine, row: Row, occurrence: Optional[float], policy: str, outcome: str) -> Dict[str, Any]:
    """Start the action now (the caller settled the overlap policy)."""
    action = row["action"]
    trigger_number = int(row["fires_count"]) + 1
    body: Dict[str, Any] = {"workflow_id": f"{row['schedule_id']}-{uuid.uuid4().hex[:16]}",
                            "workflow_type": action["workflow_type"],
                            "task_queue": action.get("task_queue") or "default", "input": action.get("input"),
                            "memo": row.get("memo"), "search_attributes": row.get("search_attributes"),
                            "execution_timeout_seconds": action.get("execution_timeout_seconds"),
                            "run_timeout_seconds": action.get("run_timeout_seconds")}
    ts = engine.now()
    try:
        started = control.start_workflow(engine, row["namespace"], {k: v for k, v in body.items() if v is not None})
    except ApiError as exc:
        row["failures_count"] = int(row.get("failures_count") or 0) + 1
        _remember(row, {"outcome": "failed", "reason": exc.reason, "fired_at": iso(ts)})
        return {"schedule_id": row["schedule_id"], "outcome": "trigger_failed", "reason": exc.reason}
    workflow_id, run_id = started["workflow_id"], started["run_id"]
    marker: Dict[str, Any] = {"schedule_id": row["schedule_id"], "schedule_ulid": row["ulid"],
                              "timezone": row["spec"].get("timezone", "UTC"), "overlap_policy": policy,
                              "trigger_number": trigger_number}
    audit: Dict[str, Any] = {"workflow_instance_id": workflow_id, "workflow_run_id": run_id, "outcome": outcome,
                             "effective_overlap_policy": policy, "overlap_policy": policy,
                             "trigger_number": trigger_number}
    recent: Dict[str, Any] = {"workflow_id": workflow_id, "run_id": run_id, "outcome": outcome, "fired_at": iso(ts)}
    if occurrence is not None:
        marker["occurrence_time"] = audit["occurrence_time"] = recent["occurrence_time"] = iso(occurrence)
        recent["fire_lag_ms"] = int(max(0.0, ts - occurrence) * 1000)
    run = engine.get_run(run_id)
    assert run is not None
    engine.append(run, "ScheduleTriggered", marker)
    _record(engine, row, "ScheduleTriggered", audit, workflow_id, run_id)
    _remember(row, recent)
    row.update({"fires_count": trigger_number, "last_fired_at": ts, "updated_at": ts,
                "latest_workflow_instance_id": workflow_id, "latest_run_id": run_id})
    return {"schedule_id": row["schedule_id"], "outcome": "triggered", "workflow_id": workflow_id, "run_id": run_id}


def _fire(engine: Engine, row: Row, occurrence: Optional[float], policy: str) -> Dict[str, Any]:
    """One fire under ``policy``: start, buffer or skip; then apply ``max_runs``."""
    if row.get("max_runs") is not None and row["fires_count"] >= row["max_runs"]:
        return _skip(engine, row, "remaining_actions_exhausted")
    running = _running_run(engine, row) if policy != "allow_all" else None
    if running is not None:
        if policy == "skip":
            return _skip(engine, row, "overlap_policy_skip")
        if policy in BUFFER_LIMITS:
            if len(row.get("buffered") or []) >= BUFFER_LIMITS[policy]:
                skipped = _skip(engine, row, "buffer_full")
                return {**skipped, "outcome": "buffer_full"}
            entry = {"occurrence_time": iso(occurrence), "overlap_policy": policy, "buffered_at": iso(engine.now())}
            row["buffered"] = [*(row.get("buffered") or []), entry]
            return {"schedule_id": row["schedule_id"], "outcome": "buffered", "buffer_depth": len(row["buffered"])}
        if policy == "cancel_other":
            cancel_run(engine, running, f"schedule {row['schedule_id']} overlap policy cancel_other")
            engine.save_run(running)
        elif policy == "terminate_other":
            terminate_run(engine, running, f"schedule {row['schedule_id']} overlap policy terminate_other")
            engine.save_run(running)
    result = _start(engine, row, occurrence, policy, "scheduled")
    if row.get("max_runs") is not None and row["fires_count"] >= row["max_runs"]:
        _mark_deleted(engine, row, "max_runs_exhausted")
    return result


def trigger(engine: Engine, namespace: str, schedule_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    row = _require(engine, namespace, schedule_id)
    policy = check_overlap_policy(body.get("overlap_policy")) or row["overlap_policy"]
    if row["state"] != "active":
        result = _skip(engine, row, "status_not_triggerable")
    else:
        result = _fire(engine, row, None, policy)
    if row["state"] != "deleted":
        _index_wake(engine, row)
        engine.store.put("schedules", row)
    return {"namespace": namespace, **result}


def backfill(engine: Engine, namespace: str, schedule_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    row = _require(engine, namespace, schedule_id)
    start = schedule_specs.parse_time(body.get("start_time"), "start_time")
    end = schedule_specs.parse_time(body.get("end_time"), "end_time")
    policy = check_overlap_policy(body.get("overlap_policy")) or row["overlap_policy"]
    if end <= start:
        raise ApiError(422, "invalid_time_range", "end_time must be after start_time.")
    results: List[Dict[str, Any]] = []
    for occurrence in schedule_specs.occurrences(row["spec"], start, end):
        if row["state"] == "deleted":
            break
        fired = _fire(engine, row, occurrence, policy)
        item = {"fire_time": iso(occurrence), **{k: v for k, v in fired.items() if k != "schedule_id"}}
        results.append(item)
    if row["state"] != "deleted":
        _index_wake(engine, row)
        engine.store.put("schedules", row)
    return {"namespace": namespace, "schedule_id": schedule_id, "outcome": "accepted",
            "fires_attempted": len(results), "results": results}


# -- the clock -----------------------------------------------------------------------------------
def due(engine: Engine, ts: float) -> List[str]:
    return [r["key"] for r in engine.store.select("schedules", "state = 'active' AND next_fire_at <= ?", (ts,),
                                                  order="next_fire_at", limit=100)]


def on_due(engine: Engine, key: str) -> Optional[Tuple[str, str]]:
    """Fire one due schedule (caller holds a transaction): a buffered action first, else the occurrence."""
    row = engine.store.get("schedules", key)
    ts = engine.now()
    if row is None or row["state"] != "active" or row.get("next_fire_at") is None or row["next_fire_at"] > ts:
        return None
    if row.get("buffered") and _running_run(engine, row) is None:
        entry = row["buffered"].pop(0)
        occurrence = schedule_specs.parse_time(entry["occurrence_time"], "occurrence_time") \
            if entry.get("occurrence_time") else None
        _start(engine, row, occurrence, entry.get("overlap_policy") or row["overlap_policy"], "scheduled")
        if row.get("max_runs") is not None and row["fires_count"] >= row["max_runs"]:
            _mark_deleted(engine, row, "max_runs_exhausted")
            return row["namespace"], row["schedule_id"]
    if row.get("due_at") is not None and row["due_at"] <= ts:
        _fire(engine, row, row.get("next_occurrence"), row["overlap_policy"])
        if row["state"] == "deleted":
            return row["namespace"], row["schedule_id"]
        _plan_next(engine, row, ts)
    _index_wake(engine, row)
    engine.store.put("schedules", row)
    return row["namespace"], row["schedule_id"]
