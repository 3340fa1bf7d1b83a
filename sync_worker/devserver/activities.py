"""Activity executions: scheduling, claims, completion, server-owned retries and timeouts.

One row per activity *execution* (what ``schedule_activity`` asked for); each claim starts a new
*attempt* with its own ``task_id`` and ``activity_attempt_id``. Stale reports are refused by
fencing on both, plus ``lease_owner``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..protocol import reasons
from . import routing, sessions, trace_context
from .engine import Engine
from .lifecycle import close_run
from .payload_checks import check_payload
from .store import Row
from .util import TERMINAL_STATUSES, ApiError, iso, new_id, ordered_id
from .validation import whole_duration

_OPEN = ("ready", "leased", "backoff")
_TIMEOUT_KEYS = ("start_to_close", "schedule_to_start", "schedule_to_close", "heartbeat")


def schedule(engine: Engine, run: Row, *, sequence: int, activity_type: str, arguments: Any,
             task_queue: str, retry_policy: Optional[Dict[str, Any]], timeouts: Dict[str, Optional[int]],
             parallel: Dict[str, Any], standalone: bool = False,
             worker_session: Optional[Dict[str, Any]] = None) -> Row:
    ts = engine.now()
    act: Row = {
        "execution_id": ordered_id("act"), "namespace": run["namespace"], "task_queue": task_queue,
        "run_id": run["run_id"], "workflow_id": run["workflow_id"], "state": "ready", "due_at": None,
        "task_id": None, "attempt_id": None, "attempt_number": 0, "activity_type": activity_type,
        "arguments": arguments, "retry_policy": retry_policy, "timeouts": timeouts, "sequence": sequence,
        "parallel": parallel, "scheduled_at": ts, "started_at": None, "last_heartbeat_at": None,
        "lease_owner": None, "lease_expires_at": None, "available_at": ts, "standalone": standalone,
        "result": None, "failure": None, "heartbeat_details": None, "closed_at": None,
        "worker_session": worker_session,
    }
    if run.get("observability_context") is not None:  # the run's trace, handed to every attempt
        act["observability_context"] = run["observability_context"]
    _recompute_due(engine, act)
    if worker_session is not None:
        # the scheduler looks at it at once: a session already gone for good fails it (``on_due``),
        # outside the workflow task that scheduled it
        act["due_at"] = ts
    engine.store.put("activities", act)
    engine.notify(run["namespace"], "activity", task_queue)
    engine.stranded.note(engine, run["namespace"], task_queue, "activity", activity_type)
    return act


def _recompute_due(engine: Engine, act: Row) -> None:
    t = act["timeouts"] or {}
    candidates: List[float] = []
    if t.get("schedule_to_close"):
        candidates.append(act["scheduled_at"] + t["schedule_to_close"])
    if act["state"] == "ready" and t.get("schedule_to_start"):
        candidates.append(act["scheduled_at"] + t["schedule_to_start"])
    if act["state"] == "backoff":
        candidates.append(act["available_at"])
    if act["state"] == "leased":
        candidates.append(act["lease_expires_at"])
        if t.get("heartbeat"):
            candidates.append((act["last_heartbeat_at"] or act["started_at"]) + t["heartbeat"])
    act["due_at"] = min(candidates) if candidates and act["state"] in _OPEN else None


def describe_task(act: Row, engine: Optional[Engine] = None) -> Dict[str, Any]:
    t = act["timeouts"] or {}
    def _at(base: Optional[float], key: str) -> Optional[str]:
        return iso(base + t[key]) if t.get(key) and base is not None else None

    deadlines = {
        "schedule_to_start": _at(act["scheduled_at"], "schedule_to_start"),
        "start_to_close": _at(act["started_at"], "start_to_close"),
        "schedule_to_close": _at(act["scheduled_at"], "schedule_to_close"),
        "heartbeat": _at(act["last_heartbeat_at"] or act["started_at"], "heartbeat"),
    }
    task = {
        "task_id": act["task_id"], "activity_attempt_id": act["attempt_id"], "attempt_id": act["attempt_id"],
        "activity_type": act["activity_type"], "attempt_number": act["attempt_number"],
        "payload_codec": "avro", "arguments": act["arguments"], "workflow_id": act["workflow_id"],
        "run_id": act["run_id"], "retry_policy": act["retry_policy"],
        "activity_execution_id": act["execution_id"], "lease_owner": act["lease_owner"],
        "task_queue": act["task_queue"], "namespace": act["namespace"],
        "lease_expires_at": iso(act["lease_expires_at"]), "deadlines": deadlines,
        **trace_context.activity_fields(act),
    }
    if engine is not None and act.get("worker_session"):
        task["worker_session"] = sessions.affinity(engine, act)  # the holder tracks its session by it
    return task


def claim(engine: Engine, namespace: str, queue: str, worker_id: str,
          activity_types: Optional[Sequence[str]] = None) -> Optional[Row]:
    """Lease the oldest ready activity on ``queue`` whose type the worker registered (``None``: any).

    The caller holds a transaction. Routing by type as the engine's ``DefaultActivityTaskBridge::poll``
    (see ``routing``). An activity pinned to a worker session goes only to the worker the session
    admits (``sessions.admit``: its holder, or a worker that may create or reacquire it).
    """
    act = routing.first_ready(engine, "activities", "namespace = ? AND task_queue = ? AND state = 'ready'",
                              (namespace, queue), "execution_id", "activity_type", activity_types,
                              accept=lambda row: sessions.admit(engine, namespace, worker_id, row))
    if act is None:
        return None
    ts = engine.now()
    t = act["timeouts"] or {}
    act.update({"state": "leased", "attempt_number": act["attempt_number"] + 1, "attempt_id": new_id("attempt"),
                "task_id": ordered_id("at"), "lease_owner": worker_id, "started_at": ts, "last_heartbeat_at": None,
                "lease_expires_at": ts + float(t.get("start_to_close") or engine.config.activity_task_lease_seconds)})
    _recompute_due(engine, act)
    engine.store.put("activities", act)
    # The run's status, as its stored column: a running run needs only its id to record the event,
    # so its document is not decoded (nor rewritten) on every claim. Not remembered (a run created by
    # another process, or before a restart): the column and the run's event count in one statement.
    status = engine.store.run_status(act["run_id"])
    run = {"run_id": act["run_id"], "status": status} if status == "running" else engine.get_run(act["run_id"])
    engine.activity_tasks.note(act["task_id"], act["execution_id"])
    if run is not None and run["status"] not in TERMINAL_STATUSES:
        engine.append(run, "ActivityStarted", {
            "sequence": act["sequence"], "activity_type": act["activity_type"],
            "activity_execution_id": act["execution_id"], "activity_attempt_id": act["attempt_id"],
            "attempt_number": act["attempt_number"], "lease_owner": worker_id, **act["parallel"]})
        if run["status"] == "pending":
            run["status"] = "running"
            engine.save_run(run)
    return act


def _find_attempt(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any], operation: str,
                  receipts: Optional[str] = None) -> Row:
    """The leased attempt ``body`` reports on, or the refusal (``ApiError``) the report earns.

    ``receipts`` (``"complete"`` / ``"fail"``): a report on an attempt already closed answers with the
    receipt its first report got (raised as :class:`_Repeated`), so a retried report is idempotent.
    Only a report that is not on the live lease looks for one: a closed attempt is never leased.
    """
    act = by_task_id(engine, namespace, task_id)
    attempt_id = body.get("activity_attempt_id") or body.get("attempt_id")
    if act is not None and act["state"] == "leased" and attempt_id == act["attempt_id"] \
            and body.get("lease_owner") == act["lease_owner"]:
        return act
    if receipts is not None:
        stored = _stored_receipt(engine, namespace, act, f"{task_id}:{attempt_id}", receipts)
        if stored is not None:
            raise _Repeated(stored)
    if act is None:
        raise ApiError(404, "task_not_found", f"activity task {task_id} was not found", task_id=task_id)
    if attempt_id != act["attempt_id"]:
        raise ApiError(409, "activity_attempt_mismatch",
                       f"activity attempt {attempt_id} is not the current attempt of task {task_id}",
                       task_id=task_id, activity_attempt_id=attempt_id)
    if act["state"] == "cancelled":
        raise ApiError(409, reasons.RUN_CLOSED, f"the activity's run is closed; {operation} is stale",
                       task_id=task_id, stop_reason=act.get("cancel_reason"), can_continue=False,
                       cancel_requested=True)
    if act["state"] != "leased":
        raise ApiError(409, reasons.TASK_NOT_LEASED, f"activity task {task_id} is not leased", task_id=task_id)
    raise ApiError(409, reasons.LEASE_OWNER_MISMATCH, f"activity task {task_id} is leased to another worker",
                   task_id=task_id)


def by_task_id(engine: Engine, namespace: str, task_id: str) -> Optional[Row]:
    """The execution whose current attempt is ``task_id`` in ``namespace``, or ``None``.

    Scoped by namespace like every other lookup: a task leased in one namespace does not exist for
    a caller that names another. An attempt this server leased lately is found by its execution's
    key (the row's text is usually in the store's cache: no ``SELECT``), checked against the row;
    any other by the ``task_id`` index.
    """
    execution_id = engine.activity_tasks.get(task_id)
    if execution_id is not None:
        act = engine.store.get("activities", execution_id)
        if act is not None and act["task_id"] == task_id and act["namespace"] == namespace:
            return act
    found = engine.store.select("activities", "task_id = ? AND namespace = ?", (task_id, namespace), limit=1)
    return found[0] if found else None


class _Repeated(Exception):
    """A report on an attempt already closed: ``receipt`` is the first report's answer."""

    def __init__(self, receipt: Dict[str, Any]) -> None:
        super().__init__("repeated report")
        self.receipt = receipt


def _stored_receipt(engine: Engine, namespace: str, act: Optional[Row], key: str,
                    operation: str) -> Optional[Dict[str, Any]]:
    """The receipt of the report that closed attempt ``key`` (``task_id:attempt_id``), if one did.

    A completion's receipt lives in the execution's own row (``closed_by``: the row is final, its
    ``task_id`` never changes again); a failure's in ``kv`` (a retried execution's next claim gives the
    row a new task id, and a late repeat of the failure must still find its answer).
    """
    closed = act.get("closed_by") if act is not None else None
    stored: Optional[Row] = None
    if closed == "complete" and act is not None and f"{act['task_id']}:{act['attempt_id']}" == key:
        stored = {"operation": "complete", "receipt": _completed(act["task_id"], act["attempt_id"])}
    elif isinstance(closed, dict) and closed.get("key") == key:  # a row an older dev server wrote
        stored = closed
    else:
        stored = engine.store.get("kv", f"{namespace}\0act_receipt\0{key}")
    if stored is None:
        return None
    if stored["operation"] != operation:
        raise ApiError(409, "activity_attempt_closed", f"the attempt was already closed by {stored['operation']}")
    return dict(stored["receipt"])


def _completed(task_id: str, attempt_id: str) -> Dict[str, Any]:
    return {"outcome": "completed", "task_id": task_id, "activity_attempt_id": attempt_id, "reason": None}


def complete(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    try:
        act = _find_attempt(engine, namespace, task_id, body, "completion", receipts="complete")
    except _Repeated as repeated:
        return repeated.receipt
    check_payload(body.get("result"), "result", codec=body.get("payload_codec") or None)
    receipt = _completed(task_id, act["attempt_id"])
    # ``closed_by``: the report that closed the row (the row is final: its task and attempt ids are
    # that report's, so the receipt is rebuilt from them, not stored).
    act.update({"state": "done", "result": body.get("result"), "closed_at": engine.now(), "due_at": None,
                "closed_by": "complete"})
    engine.store.put("activities", act)
    _resolve(engine, act, "ActivityCompleted", {"result": body.get("result"), "payload_codec": "avro"})
    sessions.released(engine, act)
    return receipt


def fail(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    try:
        act = _find_attempt(engine, namespace, task_id, body, "failure", receipts="fail")
    except _Repeated as repeated:
        return repeated.receipt
    failure = body.get("failure")
    if not isinstance(failure, dict):
        raise ApiError(422, "validation_failed", "failure must be an object",
                       errors={"failure": ["must be an object"]}, validation_errors={"failure": ["must be an object"]})
    if failure.get("details") is not None:
        check_payload(failure.get("details"), "failure.details")
    outcome = retry_or_fail(engine, act, failure, None)
    sessions.released(engine, act)
    receipt = {"outcome": outcome, "task_id": task_id, "activity_attempt_id": act["attempt_id"], "reason": None}
    engine.store.put("kv", {"key": f"{namespace}\0act_receipt\0{task_id}:{act['attempt_id']}", "namespace": namespace,
                            "kind": "act_receipt", "operation": "fail", "receipt": receipt})
    return receipt


def heartbeat(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    found = by_task_id(engine, namespace, task_id)
    if found is not None and found["state"] == "cancelled" and \
            (body.get("activity_attempt_id") or body.get("attempt_id")) == found["attempt_id"]:
        act = found
        return {"task_id": task_id, "activity_attempt_id": act["attempt_id"], "cancel_requested": True,
                "can_continue": False, "reason": reasons.RUN_CLOSED, "stop_reason": act.get("cancel_reason"),
                "heartbeat_recorded": False}
    act = _find_attempt(engine, namespace, task_id, body, "heartbeat")
    act["last_heartbeat_at"] = engine.now()
    if isinstance(body.get("details"), dict):
        act["heartbeat_details"] = body["details"]
    _recompute_due(engine, act)
    engine.store.put("activities", act)
    sessions.renew_from_activity(engine, act)  # the contract: activity heartbeats renew the session lease
    reply = {"task_id": task_id, "activity_attempt_id": act["attempt_id"], "lease_owner": act["lease_owner"],
             "cancel_requested": False, "can_continue": True, "reason": None, "heartbeat_recorded": True,
             "last_heartbeat_at": iso(act["last_heartbeat_at"]), "lease_expires_at": iso(act["lease_expires_at"])}
    if act.get("worker_session"):
        reply["worker_session"] = sessions.affinity(engine, act)
    return reply


def retry_or_fail(engine: Engine, act: Row, failure: Dict[str, Any], timeout_kind: Optional[str]) -> str:
    """Apply the execution's retry policy to a failed attempt; returns ``retrying`` or ``failed``."""
    policy = act["retry_policy"] if isinstance(act["retry_policy"], dict) else None
    if policy is None:
        max_attempts: Optional[int] = 1
    else:
        raw = policy.get("max_attempts", 1)
        max_attempts = None if raw is None else int(raw)
    non_retryable_types = (policy or {}).get("non_retryable_error_types") or []
    failure_type = failure.get("type")
    non_retryable = bool(failure.get("non_retryable")) or (failure_type in non_retryable_types) \
        or timeout_kind in ("schedule_to_start", "schedule_to_close")
    ts = engine.now()
    if not non_retryable and (max_attempts is None or act["attempt_number"] < max_attempts):
        backoffs = (policy or {}).get("backoff_seconds") or []
        index = min(act["attempt_number"] - 1, len(backoffs) - 1)
        delay = float(backoffs[index]) if backoffs else 1.0
        requested = failure.get("next_retry_delay")  # the failing attempt asked for its own delay
        if isinstance(requested, (int, float)) and not isinstance(requested, bool) and 0 <= requested < 10**8:
            delay = float(requested)
        run = engine.get_run(act["run_id"])
        if run is not None and run["status"] not in TERMINAL_STATUSES:
            engine.append(run, "ActivityRetryScheduled", {
                "sequence": act["sequence"], "activity_type": act["activity_type"],
                "activity_execution_id": act["execution_id"], "activity_attempt_id": act["attempt_id"],
                "attempt_number": act["attempt_number"], "next_attempt_number": act["attempt_number"] + 1,
                "backoff_seconds": delay, "retry_available_at": iso(ts + delay),
                "message": failure.get("message"), "exception_type": failure_type,
                "timeout_kind": timeout_kind, **act["parallel"]})
        act.update({"state": "backoff", "available_at": ts + delay, "lease_owner": None,
                    "last_failure": failure})
        _recompute_due(engine, act)
        engine.store.put("activities", act)
        return "retrying"
    message = failure.get("message") or "activity failed"
    payload = {
        "activity_attempt_id": act["attempt_id"], "attempt_number": act["attempt_number"],
        "message": message, "exception_type": failure_type, "exception_class": failure.get("class"),
        "exception": {"type": failure_type, "class": failure.get("class"), "message": message,
                      "code": failure.get("code"), "details": failure.get("details"),
                      "non_retryable": bool(failure.get("non_retryable"))},
        "non_retryable": bool(failure.get("non_retryable")), "code": failure.get("code"),
        "failure_category": "timeout" if timeout_kind else "application",
    }
    if timeout_kind:
        payload["timeout_kind"] = timeout_kind
    act.update({"state": "done", "failure": failure, "closed_at": ts, "due_at": None})
    engine.store.put("activities", act)
    _resolve(engine, act, "ActivityTimedOut" if timeout_kind else "ActivityFailed", payload)
    return "failed"


def _resolve(engine: Engine, act: Row, event_type: str, extra: Dict[str, Any]) -> None:
    run = engine.get_run(act["run_id"])
    if run is None or run["status"] in TERMINAL_STATUSES:
        return
    payload = {"sequence": act["sequence"], "activity_type": act["activity_type"],
               "activity_execution_id": act["execution_id"], "activity_attempt_id": act["attempt_id"],
               "attempt_number": act["attempt_number"], **extra, **act["parallel"]}
    engine.append(run, event_type, payload)
    if run.get("kind") == "activity_host":
        # The host run's only work is this activity, now closed; it never has timers.
        if event_type == "ActivityCompleted":
            run["output"] = act["result"]
            close_run(engine, run, "completed", "WorkflowCompleted",
                      {"output": act["result"], "payload_codec": "avro"}, open_work=False)
        else:
            run["failure"] = {"message": extra.get("message"), "exception_type": extra.get("exception_type"),
                              "exception_class": extra.get("exception_class")}
            close_run(engine, run, "failed", "WorkflowFailed",
                      {"message": extra.get("message"), "exception_type": extra.get("exception_type"),
                       "exception_class": extra.get("exception_class")}, open_work=False)
        return
    engine.member_resolved(run, act["parallel"], act["sequence"])
    engine.save_run(run)


def fail_unadmittable(engine: Engine, act: Row, failure: Dict[str, Any], *, failure_category: str) -> None:
    """Fail a pending execution no worker may ever lease (its worker session is gone for good).

    Recorded as the attempt failures are (``ActivityFailed``), non-retryable; the attempt fields
    are those of the last attempt (none when it never ran).
    """
    message = failure.get("message") or "activity failed"
    payload = {
        "activity_attempt_id": act["attempt_id"], "attempt_number": act["attempt_number"],
        "message": message, "exception_type": failure.get("type"), "exception_class": None,
        "exception": {"type": failure.get("type"), "class": None, "message": message, "code": failure.get("code"),
                      "details": failure.get("details"), "non_retryable": True},
        "non_retryable": True, "code": failure.get("code"), "failure_category": failure_category,
    }
    act.update({"state": "done", "failure": failure, "closed_at": engine.now(), "due_at": None})
    engine.store.put("activities", act)
    _resolve(engine, act, "ActivityFailed", payload)


def on_due(engine: Engine, act: Row) -> None:
    """The scheduler found ``act`` due: end backoff, or time out an attempt or the execution."""
    ts = engine.now()
    t = act["timeouts"] or {}
    if act["state"] == "ready" and sessions.refuse_if_lost(engine, act):  # its session can never be held again
        return
    if t.get("schedule_to_close") and ts >= act["scheduled_at"] + t["schedule_to_close"]:
        retry_or_fail(engine, act, {"message": "activity schedule-to-close timeout", "type": "ActivityTimedOut"},
                      "schedule_to_close")
        return
    if act["state"] == "ready" and t.get("schedule_to_start") and ts >= act["scheduled_at"] + t["schedule_to_start"]:
        retry_or_fail(engine, act, {"message": "activity schedule-to-start timeout", "type": "ActivityTimedOut"},
                      "schedule_to_start")
        return
    if act["state"] == "backoff" and ts >= act["available_at"]:
        act["state"] = "ready"
        _recompute_due(engine, act)
        engine.store.put("activities", act)
        if sessions.refuse_if_lost(engine, act):  # its session can never be held again
            return
        engine.notify(act["namespace"], "activity", act["task_queue"])
        return
    if act["state"] == "leased":
        if t.get("heartbeat") and ts >= (act["last_heartbeat_at"] or act["started_at"]) + t["heartbeat"]:
            retry_or_fail(engine, act, {"message": "activity heartbeat timeout", "type": "ActivityTimedOut"},
                          "heartbeat")
            return
        if ts >= act["lease_expires_at"]:
            retry_or_fail(engine, act, {"message": "activity start-to-close timeout", "type": "ActivityTimedOut"},
                          "start_to_close")
            return
    _recompute_due(engine, act)
    engine.store.put("activities", act)


def timeouts_from(body: Dict[str, Any], suffix: str = "") -> Dict[str, Optional[int]]:
    out: Dict[str, Optional[int]] = {}
    for key in _TIMEOUT_KEYS:
        seconds = whole_duration(body.get(f"{key}_timeout{suffix}"), f"{key}_timeout{suffix}", exclusive=True)
        if seconds is not None:
            out[key] = seconds
    return out
