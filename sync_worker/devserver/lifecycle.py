"""Closing runs: terminal events, open work, parent notification and parent-close policies."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .engine import Engine
from .store import Row
from .util import TERMINAL_STATUSES, iso

_CHILD_EVENT = {
    "completed": "ChildRunCompleted",
    "failed": "ChildRunFailed",
    "cancelled": "ChildRunCancelled",
    "terminated": "ChildRunTerminated",
    "timed_out": "ChildRunFailed",
}


def close_run(engine: Engine, run: Row, status: str, event_type: Optional[str],
              payload: Optional[Dict[str, Any]], *, reason: Optional[str] = None,
              record_open_work: bool = False, open_work: bool = True) -> None:
    """Close ``run`` with ``status``: record the terminal event, settle open work, tell the parent.

    Saves ``run``. ``status == "continued"`` leaves the parent link to the caller (it moves to
    the new run). ``open_work=False`` is for a caller that knows the run has no pending timer
    and no open activity (a standalone activity's host run closing with its one activity).
    """
    ts = engine.now()
    pending_timers = engine.store.select("timers", "run_id = ? AND state = 'pending'",
                                         (run["run_id"],)) if open_work else []
    for timer in pending_timers:
        timer["state"] = "cancelled"
        engine.store.put("timers", timer)
        if record_open_work and timer.get("timer_kind") is None:  # user timers only
            engine.append(run, "TimerCancelled", {
                "sequence": timer["sequence"], "timer_id": timer["timer_id"],
                "delay_seconds": timer.get("delay_seconds"), "fire_at": iso(timer["fire_at"]),
                "timer_kind": timer.get("timer_kind"), "reason": reason,
                **timer.get("parallel", {})})
    open_activities = engine.store.select("activities", "run_id = ? AND state IN ('ready', 'backoff', 'leased')",
                                          (run["run_id"],)) if open_work else []
    for act in open_activities:
        if record_open_work and event_type is not None:
            engine.append(run, "ActivityCancelled", {
                "sequence": act["sequence"], "activity_type": act["activity_type"],
                "activity_execution_id": act["execution_id"], "activity_attempt_id": act["attempt_id"],
                "attempt_number": act["attempt_number"], "message": reason or "workflow was cancelled",
                "reason": reason, **act.get("parallel", {})})
        act["state"] = "cancelled"
        act["due_at"] = None
        act["cancel_reason"] = f"run_{status}"
        engine.store.put("activities", act)
    if event_type is not None:
        engine.append(run, event_type, payload or {})
    task_id = run.get("task_id")
    if task_id:
        task = engine.store.get("wf_tasks", task_id)
        if task is not None and task["state"] != "done":
            task["state"] = "cancelled"
            task["due_at"] = None
            engine.store.put("wf_tasks", task)
    run["task_id"] = None
    run["dirty"] = False
    run["status"] = status
    run["closed_at"] = ts
    run["closed_reason"] = reason or status
    engine.save_run(run)
    if status != "continued":  # a continued run's child links and policies move to the new run
        _notify_parent(engine, run)
        _apply_parent_close_policy(engine, run)


def _notify_parent(engine: Engine, child: Row) -> None:
    link = child.get("parent")
    if not link:
        return
    parent = engine.get_run(link["run_id"])
    if parent is None or parent["status"] in TERMINAL_STATUSES:
        return
    event_type = _CHILD_EVENT.get(child["status"], "ChildRunFailed")
    payload: Dict[str, Any] = {
        "sequence": link["sequence"], "child_workflow_instance_id": child["workflow_id"],
        "child_workflow_run_id": child["run_id"], "child_workflow_type": child["workflow_type"],
        "workflow_type": child["workflow_type"], "child_status": child["status"],
        "closed_reason": child.get("closed_reason"), "closed_at": iso(child.get("closed_at")),
        "child_run_number": child.get("run_number"),
        **link.get("parallel", {}),
    }
    for key in ("parent_close_policy", "cancellation_policy"):
        if link.get(key) is not None:
            payload[key] = link[key]
    if child["status"] == "completed":
        payload.update({"result": child.get("output"), "output": child.get("output"), "payload_codec": "avro"})
    else:
        failure = child.get("failure") or {}
        message = failure.get("message") or f"child workflow {child['status']}"
        payload.update({
            "message": message,
            "exception_type": failure.get("exception_type"),
            "exception_class": failure.get("exception_class"),
            "exception": {"message": message, "type": failure.get("exception_type"),
                          "class": failure.get("exception_class")},
        })
    engine.append(parent, event_type, payload)
    engine.member_resolved(parent, link.get("parallel", {}), link["sequence"])
    engine.save_run(parent)


def _apply_parent_close_policy(engine: Engine, run: Row) -> None:
    for child_workflow_id in run.get("children", []):
        child = engine.current_run(run["namespace"], child_workflow_id)
        if child is None or child["status"] in TERMINAL_STATUSES:
            continue
        policy = (child.get("parent") or {}).get("parent_close_policy") or "abandon"
        if policy == "terminate":
            terminate_run(engine, child, "parent workflow closed (parent_close_policy=terminate)")
        elif policy in ("request_cancel", "request_cancellation"):
            cancel_run(engine, child, "parent workflow closed (parent_close_policy=request_cancel)")


def cancel_run(engine: Engine, run: Row, reason: Optional[str]) -> None:
    engine.append(run, "CancelRequested", {"reason": reason, "workflow_id": run["workflow_id"],
                                           "run_id": run["run_id"]})
    run["failure"] = {"message": reason or "workflow was cancelled"}
    close_run(engine, run, "cancelled", "WorkflowCancelled",
              {"reason": reason, "workflow_id": run["workflow_id"], "run_id": run["run_id"]},
              reason=reason, record_open_work=True)


def terminate_run(engine: Engine, run: Row, reason: Optional[str]) -> None:
    run["failure"] = {"message": reason or "workflow was terminated"}
    close_run(engine, run, "terminated", "WorkflowTerminated",
              {"reason": reason, "workflow_id": run["workflow_id"], "run_id": run["run_id"]}, reason=reason)
