"""Control-plane handlers: workflows (start, describe, list, runs, history, signal, query, cancel,
terminate) and standalone activities."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import activities, messages, namespaces, trace_context
from .engine import Engine
from .lifecycle import cancel_run, terminate_run
from .payload_checks import check_payload
from .queries import QueryBroker
from .store import Row
from .update_validation import declared_contract
from .util import (
    TERMINAL_STATUSES,
    ApiError,
    iso,
    new_id,
    page_token,
    parse_page_token,
    require_safe_id,
    require_str,
)
from .validation import retry_policy as validate_retry_policy
from .validation import whole_duration

STANDALONE_TYPE = "durable-workflow.standalone-activity"


def run_view(engine: Engine, run: Row, *, full: bool = True) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "workflow_id": run["workflow_id"], "run_id": run["run_id"], "workflow_type": run["workflow_type"],
        "status": run["status"], "namespace": run["namespace"], "task_queue": run["task_queue"],
        "payload_codec": "avro", "memo": run.get("memo") or {}, "search_attributes": run.get("search_attributes") or {},
        "run_number": run.get("run_number"), "is_current_run": bool(run.get("is_current")),
        "created_at": iso(run["created_at"]), "started_at": iso(run["created_at"]),
        "closed_at": iso(run.get("closed_at")), "closed_reason": run.get("closed_reason"),
        "continued_from_run_id": run.get("continued_from"),
        "wait_kind": (run.get("open_wait") and "condition") or None,
        "parent_workflow_id": (run.get("parent") or {}).get("workflow_id"),
        "parent_run_id": (run.get("parent") or {}).get("run_id"),
        "last_task_failure": run.get("last_task_failure"), "business_key": run.get("business_key"),
        "execution_timeout_seconds": run.get("execution_timeout_seconds"),
        "run_timeout_seconds": run.get("run_timeout_seconds"),
        "run_deadline_at": iso(run.get("run_deadline")), "execution_deadline_at": iso(run.get("execution_deadline")),
        "status_bucket": "closed" if run["status"] in TERMINAL_STATUSES else "running",
    }
    if full:
        out.update({"input": run.get("input"), "input_envelope": run.get("input"),
                    "output": run.get("output"), "output_envelope": run.get("output"),
                    "failure": run.get("failure")})
    return out


def _body_dict(value: Any, key: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(422, "validation_failed", f"{key} must be an object", errors={key: ["must be an object"]},
                       validation_errors={key: ["must be an object"]})
    return value


def start_workflow(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    workflow_type = require_str(body, "workflow_type")
    task_queue = require_str(body, "task_queue")
    workflow_id = require_str(body, "workflow_id", optional=True) or new_id("wf")
    require_safe_id(workflow_id, "workflow_id")
    assert workflow_type is not None and task_queue is not None
    check_payload(body.get("input"), "input", codec=body.get("payload_codec"))
    memo = _body_dict(body.get("memo"), "memo")
    attributes = _body_dict(body.get("search_attributes"), "search_attributes")
    execution_timeout = whole_duration(body.get("execution_timeout_seconds"), "execution_timeout_seconds", minimum=1)
    run_timeout = whole_duration(body.get("run_timeout_seconds"), "run_timeout_seconds", minimum=1)
    policy = str(body.get("duplicate_policy") or "fail").replace("_", "-")
    carrier = trace_context.accepted(engine, body)
    if namespaces.reserved_elsewhere(engine, namespace, workflow_id):
        raise namespaces.refuse_reserved(workflow_id)
    existing = engine.current_run(namespace, workflow_id)
    if existing is not None and existing["status"] not in TERMINAL_STATUSES:
        if policy == "use-existing":
            return {**run_view(engine, existing, full=False), "outcome": "returned_existing"}
        raise ApiError(409, "duplicate_not_allowed", f"workflow {workflow_id} is already running",
                       workflow_id=workflow_id, run_id=existing["run_id"])
    # WorkflowStarted records the command contract the queue's worker registered for the type
    # (``WorkflowStartService::enrichStartedEventWithExternalCommandContract``): update validation reads it.
    # The queue's registrations are read once for it and for the stranded-type note (same transaction).
    queue_workers = engine.store.select("workers", "namespace = ? AND task_queue = ?", (namespace, task_queue))
    contract = declared_contract(engine, namespace, task_queue, workflow_type, queue_workers)
    run = engine.create_run(namespace=namespace, workflow_id=workflow_id, workflow_type=workflow_type,
                            task_queue=task_queue, arguments=body.get("input"), memo=memo,
                            search_attributes=attributes, execution_timeout_seconds=execution_timeout,
                            run_timeout_seconds=run_timeout,
                            extra={trace_context.FIELD: carrier} if carrier is not None else None,
                            started_extra=contract,
                            first_of_id=existing is None)
    engine.stranded.note(engine, namespace, task_queue, "workflow", workflow_type, queue_workers)
    return {**run_view(engine, run, full=False), "outcome": "started_new"}


def describe(engine: Engine, namespace: str, workflow_id: str) -> Dict[str, Any]:
    run = engine.require_run(namespace, workflow_id)
    view = run_view(engine, run)
    view["run_count"] = len(engine.runs_of(namespace, workflow_id))
    return view


def list_workflows(engine: Engine, namespace: str, query: Dict[str, str]) -> Dict[str, Any]:
    size = max(1, min(int(query.get("page_size") or 100), 1000)) if (query.get("page_size") or "1").isdigit() else 100
    offset = parse_page_token(query.get("next_page_token"))
    rows: List[Dict[str, Any]] = []
    # ``query``: the workflow id or business key contains it, as the server's WorkflowController@index
    # matches (a LIKE '%term%' on workflow_instance_id or business_key; blank means no filter).
    term = (query.get("query") or "").strip()
    for run in engine.store.select("runs", "namespace = ? AND is_current = 1", (namespace,), order="created_order"):
        if run.get("kind") != "workflow":
            continue
        if query.get("workflow_type") and run["workflow_type"] != query["workflow_type"]:
            continue
        if query.get("status") and run["status"] != query["status"]:
            continue
        if term and term not in run["workflow_id"] and term not in str(run.get("business_key") or ""):
            continue
        rows.append(run_view(engine, run, full=False))
    page = rows[offset:offset + size]
    more = len(rows) > offset + size
    return {"workflows": page, "next_page_token": page_token(offset + size) if more else None,
            "workflow_count": len(rows)}


def runs(engine: Engine, namespace: str, workflow_id: str) -> Dict[str, Any]:
    found = engine.runs_of(namespace, workflow_id)
    if not found:
        raise ApiError(404, "workflow_not_found", f"workflow {workflow_id} was not found", workflow_id=workflow_id)
    return {"workflow_id": workflow_id, "runs": [run_view(engine, r, full=False) for r in found],
            "run_count": len(found)}


def describe_run(engine: Engine, namespace: str, workflow_id: str, run_id: str) -> Dict[str, Any]:
    return run_view(engine, engine.require_run(namespace, workflow_id, run_id))


def history(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str],
            query: Dict[str, str]) -> Dict[str, Any]:
    store = engine.store
    if run_id and store.stored_column("runs", run_id, "namespace") == namespace \
            and store.stored_column("runs", run_id, "workflow_id") == workflow_id:
        found = run_id  # the columns the store remembers say it is this workflow's run: no document to decode
    else:
        found = engine.require_run(namespace, workflow_id, run_id)["run_id"]
    raw = query.get("page_size") or "1000"
    size = max(1, min(int(raw), 1000)) if raw.isdigit() else 1000
    offset = parse_page_token(query.get("next_page_token"))
    events = engine.history_answer(found, offset, size + 1)
    more = len(events) > size
    return {"workflow_id": workflow_id, "run_id": found, "events": events[:size],
            "next_page_token": page_token(offset + size) if more else None}


def signal(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str], name: str,
           body: Dict[str, Any]) -> Dict[str, Any]:
    run = engine.require_run(namespace, workflow_id, run_id)
    arguments = body.get("input", body.get("arguments"))
    check_payload(arguments, "input", codec=body.get("payload_codec"))
    carrier = trace_context.accepted(engine, body)
    request_id = body.get("request_id")
    intent = {"name": name, "arguments": arguments, "run_id": run_id}
    dedupe_key = f"{namespace}\0signal\0{workflow_id}\0{request_id}" if isinstance(request_id, str) else None
    if dedupe_key is not None:
        stored = engine.store.get("kv", dedupe_key)
        if stored is not None:
            if stored["intent"] != intent:
                raise ApiError(409, "request_id_conflict", f"request_id {request_id} was used for another signal",
                               request_id=request_id, retained_command_type="signal", conflict="intent_mismatch",
                               retained_command_id=stored["receipt"].get("command_id"))
            return {**stored["receipt"], "retained": True, "intent_verified": True}
    if run["status"] in TERMINAL_STATUSES:
        raise ApiError(409, "run_not_active", f"workflow {workflow_id} run {run['run_id']} is not active",
                       workflow_id=workflow_id, run_id=run["run_id"], control_plane={"operation": "signal"})
    signal_id = new_id("sig")
    payload: Dict[str, Any] = {"signal_name": name, "payload_codec": "avro", "signal_id": signal_id,
                               "workflow_command_id": signal_id, "workflow_instance_id": workflow_id,
                               "workflow_run_id": run["run_id"], "request_id": request_id}
    if arguments is not None:
        payload["arguments"] = arguments
    engine.append(run, "SignalReceived", payload)
    entry = {"signal_id": signal_id, "signal_name": name, "workflow_command_id": signal_id,
             "message_sequence": messages.reserve_sequence(engine, run)}
    if carrier is not None:
        entry[trace_context.FIELD] = carrier
    run["unapplied_signals"].append(entry)
    engine.wake(run)
    engine.save_run(run)
    receipt = {"workflow_id": workflow_id, "run_id": run["run_id"], "signal_name": name, "signal_id": signal_id,
               "command_id": signal_id, "command_status": "accepted", "outcome": "signal_received",
               "request_id": request_id}
    if dedupe_key is not None:
        engine.store.put("kv", {"key": dedupe_key, "namespace": namespace, "kind": "signal", "intent": intent,
                                "receipt": receipt})
    return receipt


def query(engine: Engine, broker: QueryBroker, namespace: str, workflow_id: str, run_id: Optional[str],
          name: str, body: Dict[str, Any]) -> Dict[str, Any]:
    with engine.lock:
        run = engine.require_run(namespace, workflow_id, run_id)
    arguments = body.get("input", body.get("arguments"))
    check_payload(arguments, "input", codec=body.get("payload_codec"))
    return broker.ask(namespace, run, name, arguments)


def cancel(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str], body: Dict[str, Any],
           *, terminate: bool = False) -> Dict[str, Any]:
    run = engine.require_run(namespace, workflow_id, run_id)
    trace_context.accepted(engine, body)  # checked and accepted: nothing runs for a cancel here
    operation = "terminate" if terminate else "cancel"
    if run["status"] in TERMINAL_STATUSES:
        raise ApiError(409, "run_not_active", f"workflow {workflow_id} run {run['run_id']} is not active",
                       workflow_id=workflow_id, run_id=run["run_id"], control_plane={"operation": operation})
    reason = body.get("reason") if isinstance(body.get("reason"), str) else None
    if terminate:
        terminate_run(engine, run, reason)
    else:
        cancel_run(engine, run, reason)
    return {"workflow_id": workflow_id, "run_id": run["run_id"], "command_status": "accepted",
            "outcome": "terminated" if terminate else "cancelled", "reason": reason}


# -- standalone activities ---------------------------------------------------------------------
def start_activity(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    activity_type = require_str(body, "activity_type")
    task_queue = require_str(body, "task_queue")
    activity_id = require_str(body, "activity_id", optional=True) or new_id("activity")
    require_safe_id(activity_id, "activity_id")
    assert activity_type is not None and task_queue is not None
    check_payload(body.get("input"), "input", codec=body.get("payload_codec"))
    retry_policy = validate_retry_policy(body.get("retry_policy"))
    timeouts = activities.timeouts_from(body, "_seconds")
    existing = engine.current_run(namespace, activity_id)
    if existing is not None and existing["status"] not in TERMINAL_STATUSES:
        raise ApiError(409, "duplicate_not_allowed", f"{activity_id} is already running", activity_id=activity_id)
    run = engine.create_run(namespace=namespace, workflow_id=activity_id, workflow_type=STANDALONE_TYPE,
                            task_queue=task_queue, arguments=body.get("input"), kind="activity_host",
                            first_of_id=existing is None,
                            # running from its first write: one INSERT of the run, not an INSERT and
                            # an UPDATE in the same transaction (the final row is the same)
                            extra={"activity_class": body.get("activity_class"),
                                   "business_key": body.get("business_key"), "status": "running", "next_seq": 1})
    act = activities.schedule(engine, run, sequence=1, activity_type=activity_type, arguments=body.get("input"),
                              task_queue=task_queue, retry_policy=retry_policy, timeouts=timeouts, parallel={},
                              standalone=True)
    engine.host_activities.note(run["run_id"], act["execution_id"])
    engine.append(run, "ActivityScheduled", {"sequence": 1, "activity_type": activity_type,
                                             "activity_execution_id": act["execution_id"], "task_queue": task_queue})
    # No save of the run here: ``create_run`` stored it, and neither the activity's scheduling nor an
    # appended event changes its document (a save would encode it again only to find the same text).
    return {"activity_id": activity_id, "workflow_run_id": run["run_id"], "activity_execution_id": act["execution_id"],
            "workflow_type": STANDALONE_TYPE, "activity_type": activity_type, "task_queue": task_queue,
            "namespace": namespace, "status": run["status"]}


_ACTIVITY_STATUS = {"ready": "scheduled", "leased": "running", "backoff": "retrying", "cancelled": "cancelled"}


def _host_activity(engine: Engine, run_id: str) -> Optional[Row]:
    """A standalone host run's one activity: by the key noted at its start (a hint, checked against the
    row: a rolled-back start's is no row), else by the run's index."""
    execution_id = engine.host_activities.get(run_id)
    if execution_id is not None:
        act = engine.store.get("activities", execution_id)
        if act is not None and act["run_id"] == run_id:
            return act
    found = engine.store.select("activities", "run_id = ?", (run_id,), limit=1)
    return found[0] if found else None


def _activity_view(engine: Engine, run: Row) -> Dict[str, Any]:
    act: Row = _host_activity(engine, run["run_id"]) or {}
    state = act.get("state", "ready")
    activity_status = _ACTIVITY_STATUS.get(state) or ("completed" if act.get("failure") is None else "failed")
    return {
        "activity_id": run["workflow_id"], "workflow_run_id": run["run_id"],
        "activity_execution_id": act.get("execution_id"), "workflow_type": STANDALONE_TYPE,
        "activity_type": act.get("activity_type"), "activity_class": run.get("activity_class"),
        "task_queue": run["task_queue"], "namespace": run["namespace"], "status": run["status"],
        "activity_status": activity_status, "closed_reason": run.get("closed_reason"),
        "business_key": run.get("business_key"), "payload_codec": "avro", "started_at": iso(act.get("started_at")),
        "closed_at": iso(run.get("closed_at")), "last_heartbeat_at": iso(act.get("last_heartbeat_at")),
        "last_progress_at": iso(act.get("last_heartbeat_at")), "attempt_count": act.get("attempt_number", 0),
        "result": act.get("result"), "failure": act.get("failure"),
        "heartbeat_details": act.get("heartbeat_details"), "last_failure": act.get("last_failure"),
    }


def describe_activity(engine: Engine, namespace: str, activity_id: str) -> Dict[str, Any]:
    run = engine.current_run(namespace, activity_id)
    if run is None or run.get("kind") != "activity_host":
        raise ApiError(404, "activity_not_found", f"activity {activity_id} was not found", activity_id=activity_id)
    return _activity_view(engine, run)


def list_activities(engine: Engine, namespace: str, query: Dict[str, str]) -> Dict[str, Any]:
    raw = query.get("page_size") or "100"
    size = max(1, min(int(raw), 1000)) if raw.isdigit() else 100
    offset = parse_page_token(query.get("next_page_token"))
    status = query.get("status")
    rows = []
    for run in engine.store.select("runs", "namespace = ? AND is_current = 1", (namespace,), order="created_order"):
        if run.get("kind") != "activity_host":
            continue
        view = _activity_view(engine, run)
        if status and status not in (view["status"], view["activity_status"]):
            continue
        rows.append(view)
    page = rows[offset:offset + size]
    return {"activities": page, "activity_count": len(rows),
            "next_page_token": page_token(offset + size) if len(rows) > offset + size else None}
