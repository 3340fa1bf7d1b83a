"""Workflow tasks: leases, long-poll claims, completion, failure, history paging, recovery.

A task belongs to one run and keeps its ``task_id`` for its whole life; every re-lease after a
failure, lease expiry or worker deregistration bumps ``attempt``, which fences stale reports
(``task_not_leased`` while it waits, ``workflow_task_attempt_mismatch`` once re-leased).
Each claim binds the task to at most one of the run's messages (``messages.take``): a re-lease
re-binds it to the earliest unapplied one, which a failed or expired attempt left in place.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from ..protocol import reasons
from . import commands, messages, resume, routing, sticky, trace_context
from .engine import Engine
from .store import Row
from .util import TERMINAL_STATUSES, ApiError, iso, page_token, parse_page_token

WAITING_TYPE = reasons.WORKFLOW_TASK_WAITING_FOR_HISTORY
_WAITING_MESSAGE = "workflow task waiting for scheduled history"


def claim(engine: Engine, namespace: str, queue: str, worker_id: str, page_size: int,
          workflow_types: Optional[Sequence[str]] = None) -> Optional[Dict[str, Any]]:
    """Lease the oldest ready task on ``queue`` of a workflow type the worker registered (``None``: any).

    Routing by type as the server's ``WorkflowTaskPoller`` does (see ``routing``).
    """
    while True:
        task = routing.first_ready(engine, "wf_tasks", "namespace = ? AND task_queue = ? AND state = 'ready'",
                                   (namespace, queue), "due_at", "workflow_type", workflow_types)
        if task is None:
            return None
        run = engine.get_run(task["run_id"])
        if run is not None and run["status"] not in TERMINAL_STATUSES:
            break
        task["state"] = "cancelled"
        task["due_at"] = None
        engine.store.put("wf_tasks", task)
    ts = engine.now()
    task.update({"state": "leased", "lease_owner": worker_id,
                 "lease_expires_at": ts + engine.config.workflow_task_lease_seconds,
                 "due_at": ts + engine.config.workflow_task_lease_seconds, "page_size": page_size})
    task.pop("signals_to_apply", None)  # what an older dev server stored: every signal at once
    messages.take(task, run)  # at most one message: the earliest signal or update, else a plain task
    engine.store.put("wf_tasks", task)
    run["dirty"] = False
    if run["status"] in ("pending", "waiting"):
        run["status"] = "running"
    engine.save_run(run)
    return render(engine, task, run)


def render(engine: Engine, task: Row, run: Row) -> Dict[str, Any]:
    page_size = int(task.get("page_size") or 500)
    total = engine.store.event_count(run["run_id"])
    offset, mode = sticky.sticky_offset(task, run, total, engine.now())
    events = engine.history_answer(run["run_id"], offset, page_size + 1)
    more = len(events) > page_size
    extra: Dict[str, Any] = {}
    if mode is not None:
        extra["sticky_replay_mode"] = mode
        if offset:
            extra["last_history_sequence"] = offset
    return {
        "task_id": task["task_id"], "task_kind": "workflow", "workflow_task_attempt": task["attempt"],
        "workflow_id": run["workflow_id"], "run_id": run["run_id"], "workflow_type": run["workflow_type"],
        "payload_codec": "avro", "arguments": run["input"], "history_events": events[:page_size],
        "next_history_page_token": page_token(offset + page_size) if more else None,
        "total_history_events": total, **extra,
        "lease_owner": task["lease_owner"], "task_queue": task["task_queue"], "namespace": task["namespace"],
        "lease_expires_at": iso(task["lease_expires_at"]), "cancel_requested": False,
        **messages.resume_context(task, run), **trace_context.task_fields(task, run, messages.carried(task)),
    }


def _leased(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any], read: Any = False) -> Row:
    """The task, leased under this report's attempt and owner (else the precise refusal).

    ``read``: the row :func:`_receipt` just read in this transaction (``None``: none), so the
    report's task is read and decoded once; ``False``: read it here.
    """
    task = engine.store.get("wf_tasks", task_id) if read is False else read
    if task is None or task["namespace"] != namespace:
        raise ApiError(404, "task_not_found", f"workflow task {task_id} was not found", task_id=task_id)
    if task["state"] == "cancelled":
        run = engine.get_run(task["run_id"]) or {}
        raise ApiError(409, reasons.RUN_CLOSED, f"the run of workflow task {task_id} is closed", task_id=task_id,
                       can_continue=False, cancel_requested=True, run_closed_reason=run.get("closed_reason"),
                       run_closed_at=iso(run.get("closed_at")),
                       stop_reason=f"run_{run.get('status')}" if run.get("status") else None)
    if task["state"] != "leased":
        raise ApiError(409, reasons.TASK_NOT_LEASED, f"workflow task {task_id} is not leased", task_id=task_id)
    attempt = body.get("workflow_task_attempt", 1)
    if attempt != task["attempt"]:
        raise ApiError(409, reasons.WORKFLOW_TASK_ATTEMPT_MISMATCH,
                       f"workflow task {task_id} is at attempt {task['attempt']}, not {attempt}",
                       task_id=task_id, workflow_task_attempt=task["attempt"])
    if body.get("lease_owner") != task["lease_owner"]:
        raise ApiError(409, reasons.LEASE_OWNER_MISMATCH, f"workflow task {task_id} is leased to another worker",
                       task_id=task_id)
    return task


def _receipt(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any],
             op: str) -> Tuple[Optional[Dict[str, Any]], Optional[Row]]:
    """The receipt of the report that closed this attempt, if one did and it was an ``op``, and the
    task's row as read (``None``: no such task), for :func:`_leased` (not read twice).

    A completion's receipt lives in the task's own row (``closed_by``: a completed task is final);
    a failure's in ``kv`` (a failed attempt's task is leased again under the next attempt), as is
    a completion's in a file an older dev server wrote. A task leased under this very attempt has
    no receipt yet: nothing more to look up.
    """
    attempt = body.get("workflow_task_attempt", 1)
    task = engine.store.get("wf_tasks", task_id)
    if task is not None and task["namespace"] == namespace:
        closed = task.get("closed_by")
        if isinstance(closed, dict) and closed.get("attempt") == attempt:
            return (dict(closed["receipt"]) if closed.get("operation") == op else None), task
        if task["state"] == "leased" and task["attempt"] == attempt:
            return None, task
    stored = engine.store.get("kv", f"{namespace}\0wft\0{task_id}:{attempt}")
    if stored is None:
        return None, task
    if stored["operation"] != op:
        return None, task  # closed the other way: the lease checks refuse it with the precise reason
    return dict(stored["receipt"]), task


def _store(engine: Engine, namespace: str, task: Row, op: str, receipt: Dict[str, Any]) -> None:
    engine.store.put("kv", {"key": f"{namespace}\0wft\0{task['task_id']}:{task['attempt']}", "namespace": namespace,
                            "kind": "wft", "operation": op, "receipt": receipt})


def _finish(engine: Engine, task: Row, run: Row, *, released: bool = False,
            completed: bool = False) -> Optional[Dict[str, Any]]:
    """The lease ended without a retry: free the run and give it its next task if it has work.

    The next task comes at once when something woke the run during the lease (the dirty flag)
    or when messages remain (one message per task: the engine's ``markRunWaiting`` creates the
    next message task, ``PendingMessageTask::createForRun``; a released signal task applied its
    signal, ``resume.record_release``). A released update task parks the run's messages until
    its next wake-up instead (``messages.park``).

    ``completed``: the attempt was completed; its receipt is returned and kept in the task's row.
    """
    task["state"] = "done"
    task["due_at"] = None
    if run.get("task_id") == task["task_id"]:
        run["task_id"] = None
        if run["status"] not in TERMINAL_STATUSES:
            message = messages.carried(task)
            parked = released and message is not None and message["kind"] == "update"
            if parked:
                messages.park(run)
            if run.get("dirty") or (not parked and messages.has_messages(run)):
                run["dirty"] = False
                engine.wake(run)
            elif run["status"] == "running":
                run["status"] = "waiting"
    receipt: Optional[Dict[str, Any]] = None
    if completed:
        receipt = {"task_id": task["task_id"], "workflow_task_attempt": task["attempt"], "outcome": "completed",
                   "run_status": run["status"], "run_id": run["run_id"]}
        task["closed_by"] = {"operation": "complete", "attempt": task["attempt"], "receipt": receipt}
    engine.store.put("wf_tasks", task)
    engine.save_run(run)
    return receipt


def complete(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    stored, read = _receipt(engine, namespace, task_id, body, "complete")
    if stored is not None:
        return stored
    task = _leased(engine, namespace, task_id, body, read)
    cmds = commands.validate(body.get("commands"))
    resume.check_commands(task, cmds)
    run = engine.get_run(task["run_id"])
    assert run is not None
    # The sticky claim first: a run the commands close is saved by the close with it (the save that
    # follows then writes nothing); bounded by the recorded events once the commands are applied.
    sticky.note_completion(run, task, body, None, engine.now())
    commands.apply(engine, run, task, cmds, body)
    sticky.check_recorded(run, engine.store.event_count(run["run_id"]))
    receipt = _finish(engine, task, run, completed=True)
    assert receipt is not None
    return receipt


def fail(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    stored, read = _receipt(engine, namespace, task_id, body, "fail")
    if stored is not None:
        return stored
    task = _leased(engine, namespace, task_id, body, read)
    raw_failure = body.get("failure")
    failure: Dict[str, Any] = raw_failure if isinstance(raw_failure, dict) else {}
    run = engine.get_run(task["run_id"])
    assert run is not None
    kind = failure.get("type")
    message = str(failure.get("message") or "")
    receipt: Dict[str, Any] = {"task_id": task_id, "workflow_task_attempt": task["attempt"]}
    if kind == WAITING_TYPE or message.lower().startswith(_WAITING_MESSAGE):
        _store(engine, namespace, task, "fail", {**receipt, "outcome": "released"})
        resume.record_release(engine, run, task)
        _finish(engine, task, run, released=True)
        return {**receipt, "outcome": "released", "run_status": run["status"]}
    _store(engine, namespace, task, "fail", {**receipt, "outcome": "failed"})
    sticky.forget(run)
    retry_later(engine, task, run, failure)
    return {**receipt, "outcome": "failed", "run_status": run["status"], "next_attempt": task["attempt"]}


def retry_later(engine: Engine, task: Row, run: Row, failure: Dict[str, Any]) -> None:
    """Re-queue a failed task as the next attempt after a backoff (slow for non-determinism)."""
    attempt = int(task["attempt"])
    if failure.get("type") == "NonDeterministicReplayError":
        delay = min(10.0 * attempt, 60.0)
    else:
        delay = min(0.1 * (2 ** (attempt - 1)), 5.0)
    task.update({"state": "delayed", "attempt": attempt + 1, "lease_owner": None, "lease_expires_at": None,
                 "due_at": engine.now() + delay})
    engine.store.put("wf_tasks", task)
    run["dirty"] = False
    run["last_task_failure"] = {"message": failure.get("message"), "type": failure.get("type"),
                                "attempt": attempt, "at": iso(engine.now())}
    engine.save_run(run)


def requeue(engine: Engine, task: Row) -> None:
    """Lease expired or its worker deregistered: the next claim is a new attempt."""
    task.update({"state": "ready", "attempt": int(task["attempt"]) + 1, "lease_owner": None,
                 "lease_expires_at": None, "due_at": engine.now()})
    engine.store.put("wf_tasks", task)
    engine.notify(task["namespace"], "workflow", task["task_queue"])


def on_due(engine: Engine, task: Row) -> None:
    if task["state"] == "delayed":
        task["state"] = "ready"
        engine.store.put("wf_tasks", task)
        engine.notify(task["namespace"], "workflow", task["task_queue"])
    elif task["state"] == "leased":
        requeue(engine, task)


def history_page(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    task = _leased(engine, namespace, task_id, body)
    offset = parse_page_token(body.get("next_history_page_token"))
    size = int(body.get("history_page_size") or task.get("page_size") or 500)
    size = max(1, min(size, 1000))
    events = engine.history_answer(task["run_id"], offset, size + 1)
    more = len(events) > size
    return {"task_id": task_id, "workflow_task_attempt": task["attempt"], "history_events": events[:size],
            "next_history_page_token": page_token(offset + size) if more else None,
            "total_history_events": engine.store.event_count(task["run_id"])}


def heartbeat(engine: Engine, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    task = _leased(engine, namespace, task_id, body)
    ts = engine.now()
    task["lease_expires_at"] = ts + engine.config.workflow_task_lease_seconds
    task["due_at"] = task["lease_expires_at"]
    engine.store.put("wf_tasks", task)
    return {"task_id": task_id, "lease_owner": task["lease_owner"], "workflow_task_attempt": task["attempt"],
            "renewed": True, "lease_expires_at": iso(task["lease_expires_at"])}


def rendered_for_poll(engine: Engine, task_id: str, attempt: int) -> Optional[Dict[str, Any]]:
    """The task a repeated ``poll_request_id`` already leased, if that lease is still live."""
    task = engine.store.get("wf_tasks", task_id)
    if task is None or task["state"] != "leased" or task["attempt"] != attempt:
        return None
    run = engine.get_run(task["run_id"])
    return None if run is None else render(engine, task, run)
