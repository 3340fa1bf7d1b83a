"""Workflow-task commands: validation (all or nothing) and their history events (§15.2)."""

from __future__ import annotations

from typing import Any, Dict, List

from . import activities, memo, resume, selection, sessions, trace_context, validation, workflow_streams
from .engine import Engine
from .lifecycle import close_run
from .payload_checks import check_payload
from .store import Row
from .util import ApiError, iso, new_id, ordered_id

SUPPORTED_COMMANDS = (
    "complete_workflow", "fail_workflow", "continue_as_new", "schedule_activity", "start_timer",
    "start_child_workflow", "record_side_effect", "record_version_marker", "upsert_search_attributes",
    "open_condition_wait", "record_local_activity", "upsert_memo", "complete_update", "fail_update",
    "cancel_selection_operation",
)
TERMINAL_COMMANDS = ("complete_workflow", "fail_workflow", "continue_as_new")


def _bad(index: int, message: str) -> ApiError:
    key = f"commands.{index}"
    return ApiError(422, "validation_failed", f"{key}: {message}", errors={key: [message]},
                    validation_errors={key: [message]})


def _int(cmd: Dict[str, Any], key: str, index: int, *, required: bool = False) -> None:
    value = cmd.get(key)
    if value is None and not required:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(index, f"{key} must be a whole number")


def _seconds(cmd: Dict[str, Any], key: str, index: int, *, required: bool = False, positive: bool = False) -> None:
    validation.duration(cmd.get(key), f"commands.{index}.{key}", required=required, exclusive=positive)


def validate(commands: Any) -> List[Dict[str, Any]]:
    """Check every command before any is applied, so a refusal changes nothing."""
    if not isinstance(commands, list) or not commands:
        raise ApiError(422, "validation_failed", "commands must be a non-empty list",
                       errors={"commands": ["must be a non-empty list"]},
                       validation_errors={"commands": ["must be a non-empty list"]})
    for i, cmd in enumerate(commands):
        if not isinstance(cmd, dict):
            raise _bad(i, "must be an object")
        kind = cmd.get("type")
        if kind not in SUPPORTED_COMMANDS:
            raise ApiError(422, "unsupported_workflow_task_command", f"commands.{i}: unsupported command type {kind!r}",
                           command_type=kind, supported_workflow_task_commands=list(SUPPORTED_COMMANDS))
        codec = cmd.get("payload_codec")
        if kind in ("schedule_activity", "start_child_workflow"):
            name_key = "activity_type" if kind == "schedule_activity" else "workflow_type"
            if not isinstance(cmd.get(name_key), str) or not cmd.get(name_key):
                raise _bad(i, f"{name_key} must be a non-empty string")
            check_payload(cmd.get("arguments"), f"commands.{i}.arguments", codec=codec)
            validation.retry_policy(cmd.get("retry_policy"), f"commands.{i}.retry_policy")
            for key in ("start_to_close_timeout", "schedule_to_start_timeout", "schedule_to_close_timeout",
                        "heartbeat_timeout", "execution_timeout_seconds", "run_timeout_seconds"):
                _seconds(cmd, key, i, positive=True)
            if kind == "schedule_activity" and cmd.get("worker_session") is not None:
                # as the engine's WorkflowCommandNormalizer::optionalWorkerSession
                sessions.check_options(cmd["worker_session"], f"commands.{i}.worker_session", "validation_failed")
        elif kind == "start_timer":
            _seconds(cmd, "delay_seconds", i, required=True)
        elif kind in ("complete_workflow", "complete_update"):
            check_payload(cmd.get("result"), f"commands.{i}.result", codec=codec)
        elif kind == "continue_as_new":
            check_payload(cmd.get("arguments"), f"commands.{i}.arguments", codec=codec)
        elif kind == "record_side_effect":
            check_payload(cmd.get("result"), f"commands.{i}.result", codec=codec or "avro")
        elif kind == "record_version_marker":
            if not isinstance(cmd.get("change_id"), str):
                raise _bad(i, "change_id must be a string")
            for key in ("version", "min_supported", "max_supported"):
                _int(cmd, key, i, required=True)
        elif kind == "upsert_search_attributes":
            if not isinstance(cmd.get("attributes"), dict):
                raise _bad(i, "attributes must be an object")
        elif kind == "open_condition_wait":
            _seconds(cmd, "timeout_seconds", i)
        elif kind == "upsert_memo":
            memo.validate(cmd, f"commands.{i}")
        elif kind == "record_local_activity":
            if not isinstance(cmd.get("activity_type"), str) or not cmd.get("activity_type"):
                raise _bad(i, "activity_type must be a non-empty string")
            if cmd.get("outcome") not in _LOCAL_OUTCOMES:
                raise _bad(i, f"outcome must be one of {sorted(_LOCAL_OUTCOMES)}")
            check_payload(cmd.get("arguments"), f"commands.{i}.arguments", codec=codec)
            check_payload(cmd.get("result"), f"commands.{i}.result", codec=codec)
        elif kind == "cancel_selection_operation":
            selection.validate_cancel(cmd, i)
        if kind in ("start_child_workflow", "continue_as_new"):
            trace_context.command_context(cmd, i)
        if cmd.get("workflow_stream") is not None:
            workflow_streams.validate_directive(cmd, i)
        elif kind == "fail_workflow" and cmd.get("message") is not None and not isinstance(cmd["message"], str):
            raise _bad(i, "message must be a string")
        if kind in ("complete_update", "fail_update") and not isinstance(cmd.get("update_id"), str):
            raise _bad(i, "update_id must be a string")
    return commands


def apply(engine: Engine, run: Row, task: Row, commands: List[Dict[str, Any]], body: Dict[str, Any]) -> None:
    """Record the completion's events in order and start the work the commands ask for.

    What the task's message or the open wait records comes first (``resume``).
    """
    for index, cmd in enumerate(resume.record_before_commands(engine, run, task, commands, body)):
        if run["status"] in ("completed", "failed", "cancelled", "terminated", "continued"):
            break  # nothing after a terminal command counts
        workflow_streams.apply_directive(engine, run, task, cmd, index)  # (stripped: not in history)
        if cmd["type"] in _CLOSING and run.get("task_id") == task["task_id"]:
            # The run closes under the task completing now: ``close_run`` would write that task's row
            # as cancelled, and ``tasks._finish`` writes it done right after (the row's last write:
            # the same final row, one read, encode and UPDATE fewer per closing completion).
            run["task_id"] = None
        handler = _HANDLERS[cmd["type"]]
        handler(engine, run, cmd)


def _next_seq(run: Row) -> int:
    run["next_seq"] += 1
    return int(run["next_seq"])


def _already_recorded(run: Row, cmd: Dict[str, Any]) -> bool:
    """A re-emitted member of a parallel group that is already scheduled (§4.5 re-emission)."""
    gid = cmd.get("parallel_group_id")
    return bool(gid) and f"{gid}#{cmd.get('parallel_group_index')}" in run["members"]


def _schedule_activity(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    if _already_recorded(run, cmd):
        return
    seq = _next_seq(run)
    fields = engine.parallel_fields(cmd)
    queue = cmd.get("queue") or cmd.get("task_queue") or run["task_queue"]
    timeouts = activities.timeouts_from(cmd)
    session = None
    if cmd.get("worker_session") is not None:
        session = sessions.check_options(cmd["worker_session"], "worker_session", "validation_failed")
    act = activities.schedule(engine, run, sequence=seq, activity_type=cmd["activity_type"],
                              arguments=cmd.get("arguments"), task_queue=queue,
                              retry_policy=cmd.get("retry_policy"), timeouts=timeouts, parallel=fields,
                              worker_session=session)
    payload: Dict[str, Any] = {"sequence": seq, "activity_type": cmd["activity_type"],
                               "activity_execution_id": act["execution_id"], "task_queue": queue}
    if cmd.get("retry_policy") is not None:
        payload["retry_policy"] = cmd["retry_policy"]
    if session is not None:  # the engine keeps it in the step's activity options (WorkflowStep::workerSession)
        payload["worker_session"] = {k: v for k, v in session.items() if v is not None}
    engine.append(run, "ActivityScheduled", {**payload, **fields})
    engine.member_scheduled(run, fields, seq)


def _start_timer(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    if _already_recorded(run, cmd):
        return
    seq = _next_seq(run)
    fields = engine.parallel_fields(cmd)
    delay = max(0, int(cmd["delay_seconds"]))
    fire_at = engine.now() + delay
    timer = {"timer_id": ordered_id("timer"), "namespace": run["namespace"], "run_id": run["run_id"],
             "state": "pending", "fire_at": fire_at, "sequence": seq, "delay_seconds": delay,
             "timer_kind": None, "parallel": fields}
    engine.store.put("timers", timer)
    engine.append(run, "TimerScheduled", {"sequence": seq, "timer_id": timer["timer_id"], "delay_seconds": delay,
                                          "fire_at": iso(fire_at), **fields})
    engine.member_scheduled(run, fields, seq)


def _start_child(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    if _already_recorded(run, cmd):
        return
    seq = _next_seq(run)
    fields = engine.parallel_fields(cmd)
    policies = {k: cmd[k] for k in ("parent_close_policy", "cancellation_policy") if cmd.get(k) is not None}
    child_id = new_id("child")
    child_run_id = ordered_id("run")
    child_type = cmd["workflow_type"]
    ident = {"child_workflow_instance_id": child_id, "child_workflow_run_id": child_run_id,
             "child_workflow_type": child_type, "workflow_type": child_type}
    scheduled = {"sequence": seq, **ident, **policies, **fields}
    if cmd.get("retry_policy") is not None:
        scheduled["retry_policy"] = cmd["retry_policy"]
    engine.append(run, "ChildWorkflowScheduled", scheduled)
    link = {"run_id": run["run_id"], "workflow_id": run["workflow_id"], "sequence": seq,
            "parallel": fields, **policies}
    engine.create_run(namespace=run["namespace"], workflow_id=child_id, workflow_type=child_type,
                      task_queue=cmd.get("queue") or cmd.get("task_queue") or run["task_queue"],
                      arguments=cmd.get("arguments"), start_accepted=False, parent=link, run_id=child_run_id,
                      execution_timeout_seconds=cmd.get("execution_timeout_seconds"),
                      run_timeout_seconds=cmd.get("run_timeout_seconds"), extra=_carried(engine, cmd))
    engine.append(run, "ChildRunStarted", {"sequence": seq, **ident, "child_run_number": 1, **policies, **fields})
    run["children"].append(child_id)
    engine.member_scheduled(run, fields, seq)


_LOCAL_OUTCOMES = {"completed": "ActivityCompleted", "failed": "ActivityFailed", "timed_out": "ActivityTimedOut",
                   "cancelled": "ActivityCancelled"}


def _local_activity(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    """A local activity already ran inside the workflow task: record its schedule and outcome."""
    seq = _next_seq(run)
    fields = engine.parallel_fields(cmd)
    raw_attempts = cmd.get("attempts")
    attempts: List[Any] = raw_attempts if isinstance(raw_attempts, list) else []
    last = attempts[-1] if attempts and isinstance(attempts[-1], dict) else {}
    base = {"sequence": seq, "activity_type": cmd["activity_type"], "activity_execution_id": new_id("local"),
            "execution_mode": "local", "local_activity": True, **fields}
    engine.append(run, "ActivityScheduled", {**base, "arguments": cmd.get("arguments"), "attempts": attempts})
    outcome: Dict[str, Any] = {**base, "activity_attempt_id": last.get("attempt_id"),
                               "attempt_number": last.get("attempt_number", len(attempts) or 1)}
    if cmd["outcome"] == "completed":
        outcome.update({"result": cmd.get("result"), "payload_codec": "avro"})
    else:
        message = cmd.get("message") or f"local activity {cmd['outcome']}"
        outcome.update({"message": message, "exception_type": cmd.get("exception_type"),
                        "exception": {"type": cmd.get("exception_type"), "message": message,
                                      "non_retryable": bool(cmd.get("non_retryable"))},
                        "non_retryable": bool(cmd.get("non_retryable"))})
        if cmd.get("timeout_kind"):
            outcome["timeout_kind"] = cmd["timeout_kind"]
    engine.append(run, _LOCAL_OUTCOMES[cmd["outcome"]], outcome)


def _side_effect(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    payload: Dict[str, Any] = {"sequence": _next_seq(run), "result": cmd.get("result"), "payload_codec": "avro"}
    engine.append(run, "SideEffectRecorded", payload)


def _version_marker(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    engine.append(run, "VersionMarkerRecorded", {
        "sequence": _next_seq(run), "change_id": cmd["change_id"], "version": int(cmd["version"]),
        "min_supported": int(cmd["min_supported"]), "max_supported": int(cmd["max_supported"])})


def _search_attributes(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    merged = dict(run.get("search_attributes") or {})
    for key, value in cmd["attributes"].items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    run["search_attributes"] = merged
    engine.append(run, "SearchAttributesUpserted", {"sequence": _next_seq(run), "attributes": cmd["attributes"],
                                                    "merged": merged})


def _upsert_memo(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    memo.upsert(engine, run, cmd, _next_seq(run))


def _open_wait(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    seq = _next_seq(run)
    wait: Dict[str, Any] = {"condition_wait_id": new_id("wait"), "sequence": seq}
    for key in ("condition_key", "condition_definition_fingerprint", "timeout_seconds"):
        if cmd.get(key) is not None:
            wait[key] = cmd[key]
    engine.append(run, "ConditionWaitOpened", dict(wait))
    if cmd.get("timeout_seconds") is not None:
        delay = max(0, int(cmd["timeout_seconds"]))
        timer = {"timer_id": ordered_id("timer"), "namespace": run["namespace"], "run_id": run["run_id"],
                 "state": "pending", "fire_at": engine.now() + delay, "sequence": seq, "delay_seconds": delay,
                 "timer_kind": "condition_timeout", "condition_wait_id": wait["condition_wait_id"],
                 "condition_key": wait.get("condition_key"), "parallel": {}}
        engine.store.put("timers", timer)
        wait["timer_id"] = timer["timer_id"]
    run["open_wait"] = wait


def _complete(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    run["output"] = cmd.get("result")
    close_run(engine, run, "completed", "WorkflowCompleted", {"output": cmd.get("result"), "payload_codec": "avro"})


def _fail(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    payload = {"message": cmd.get("message") or "workflow failed", "exception_type": cmd.get("exception_type"),
               "exception_class": cmd.get("exception_class"), "exception": cmd.get("exception"),
               "non_retryable": bool(cmd.get("non_retryable"))}
    for key in ("failed_step_sequence", "failed_activity_execution_id"):
        if cmd.get(key) is not None:
            payload[key] = cmd[key]
    run["failure"] = payload
    close_run(engine, run, "failed", "WorkflowFailed", payload, reason="failed")


def _carried(engine: Engine, cmd: Dict[str, Any]) -> Dict[str, Any]:
    """The new run's trace: the command's carrier (checked by ``validate``), else none."""
    carrier = trace_context.accepted(engine, cmd)
    return {trace_context.FIELD: carrier} if carrier is not None else {}


def _continue_as_new(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    new_run_id = ordered_id("run")
    queue = cmd.get("queue") or cmd.get("task_queue") or run["task_queue"]
    workflow_type = cmd.get("workflow_type") or run["workflow_type"]
    run["is_current"] = 0
    close_run(engine, run, "continued", "WorkflowContinuedAsNew", {
        "arguments": cmd.get("arguments"), "payload_codec": "avro", "workflow_type": workflow_type,
        "queue": queue, "task_queue": queue, "new_run_id": new_run_id, "continued_to_run_id": new_run_id},
        reason="continued")
    engine.create_run(namespace=run["namespace"], workflow_id=run["workflow_id"], workflow_type=workflow_type,
                      task_queue=queue, arguments=cmd.get("arguments"), start_accepted=False,
                      parent=run.get("parent"), continued_from=run["run_id"], memo=run.get("memo"),
                      search_attributes=run.get("search_attributes"), run_number=int(run["run_number"]) + 1,
                      extra={"execution_deadline": run.get("execution_deadline"),
                             "message_cursor_position": run.get("message_cursor_position") or 0,
                             **_carried(engine, cmd)},
                      execution_timeout_seconds=run.get("execution_timeout_seconds"),
                      run_timeout_seconds=run.get("run_timeout_seconds"), run_id=new_run_id)


def _update_result(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    from . import updates  # updates import commands' helpers lazily: keep the cycle out of import time

    updates.record_outcome(engine, run, cmd)


#: Commands that close the run (``lifecycle.close_run``).
_CLOSING = frozenset(("complete_workflow", "fail_workflow", "continue_as_new"))

_HANDLERS = {
    "schedule_activity": _schedule_activity,
    "start_timer": _start_timer,
    "start_child_workflow": _start_child,
    "record_side_effect": _side_effect,
    "record_version_marker": _version_marker,
    "upsert_search_attributes": _search_attributes,
    "open_condition_wait": _open_wait,
    "upsert_memo": _upsert_memo,
    "record_local_activity": _local_activity,
    "complete_workflow": _complete,
    "fail_workflow": _fail,
    "continue_as_new": _continue_as_new,
    "complete_update": _update_result,
    "fail_update": _update_result,
    "cancel_selection_operation": selection.cancel_member,
}
