"""Completing a workflow task: what is recorded for the message or wait it resumed, before its commands.

A task is a signal task, an update task or a plain task (``messages.take`` decided at its
claim). Before a completion's command events the server records:

* the message-stream cursors the completion reports (``message_stream_cursors``, the dev
  server's record of durable message streams), see :func:`_record_stream_cursors`;
* on a signal task, as the engine's ``DefaultWorkflowTaskBridge::complete`` does
  (``recordAppliedSignalForSignalResume`` then ``recordSatisfiedConditionWaitForSignalResume``,
  before ``applyNonTerminalCommand``): the instance cursor advance (``messages``), then
  ``SignalApplied`` for that one signal, then ``ConditionWaitSatisfied`` for the open condition
  wait, if any. Always, even when the completion re-opens the same wait: the current engine
  records the satisfaction and the re-open is a fresh ``ConditionWaitOpened`` with a new id
  (``applyOpenConditionWait``; commit ``eba8c8ae`` removed the guard that skipped it);
* on a plain task with an open condition wait: nothing when the completion re-emits the same
  wait (same ``condition_key`` and fingerprint) -- the wait stays open with its timeout, as the
  real server does not re-record an open wait -- else ``ConditionWaitSatisfied`` (the wait's
  timeout, when it fired, already closed it);
* on an update task nothing: its completion is exactly one ``complete_update`` / ``fail_update``
  for the task's update (:func:`check_commands`, the Rust port's ``update_task_mismatch``), and
  the open wait stays open.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import messages
from .engine import Engine
from .store import Row
from .util import ApiError

_UPDATE_COMMANDS = ("complete_update", "fail_update")


def check_commands(task: Row, commands: List[Dict[str, Any]]) -> None:
    """Refuse (409 ``update_task_mismatch``, nothing recorded) an update outcome on the wrong task.

    As the Rust port's ``complete_workflow`` (and the engine's ``applyCompleteUpdate`` applying
    only the task's update): an update task completes with exactly one ``complete_update`` or
    ``fail_update`` for its ``workflow_update_id``; any other task carries no update outcome.
    """
    update_id = task.get("workflow_update_id")
    outcomes = [c for c in commands if c.get("type") in _UPDATE_COMMANDS]
    if update_id:
        if len(commands) == 1 and outcomes and outcomes[0].get("update_id") == update_id:
            return
        kinds = [c.get("type") for c in commands]
        raise ApiError(409, "update_task_mismatch",
                       f"workflow task {task['task_id']} applies update {update_id}: its completion must be exactly "
                       f"one complete_update or fail_update for that update, not {kinds}",
                       task_id=task["task_id"], workflow_update_id=update_id, command_types=kinds)
    if outcomes:
        raise ApiError(409, "update_task_mismatch",
                       f"workflow task {task['task_id']} carries no update; update {outcomes[0].get('update_id')} is "
                       "applied by its own update task (workflow_update_id)",
                       task_id=task["task_id"], workflow_update_id=None,
                       command_types=[c.get("type") for c in commands])


def record_before_commands(engine: Engine, run: Row, task: Row, commands: List[Dict[str, Any]],
                           body: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Record what precedes the completion's own events; returns the commands still to apply."""
    message = messages.carried(task)
    declared: Optional[bool] = None
    if (message is not None and message["kind"] == "signal") or body.get("message_stream_cursors"):
        declared = messages.signal_cursor_recorded(engine, run, task)
    _record_stream_cursors(engine, run, body, record=not declared)
    if message is not None and message["kind"] == "update":
        return commands
    if message is not None:
        _apply_signal(engine, run, message, record_cursor=bool(declared))
        wait = run.get("open_wait")
        if wait:
            _satisfy(engine, run, wait, message)
        return commands
    wait = run.get("open_wait")
    if not wait:
        return commands
    for index, cmd in enumerate(commands):
        if cmd.get("type") == "open_condition_wait":
            if cmd.get("condition_key") == wait.get("condition_key") and \
                    cmd.get("condition_definition_fingerprint") == wait.get("condition_definition_fingerprint"):
                return commands[:index] + commands[index + 1:]  # the same wait, still open: nothing to record
            break
    _satisfy(engine, run, wait, None)
    return commands


def record_release(engine: Engine, run: Row, task: Row) -> None:
    """A task released with ``WorkflowTaskWaitingForHistory``: a signal task's signal is applied.

    The worker acknowledged the signal and had nothing to record yet (the run is blocked on an
    activity, timer or child). The newer PHP server answers such an acknowledgment with
    ``outcome: "waiting_for_history"``, marks the signal applied (``SignalApplied`` recorded) and
    creates the next message task at once (its feature test
    ``test_waiting_for_history_acknowledgments_advance_declared_signals_then_an_update``); the
    engine's ``DefaultWorkflowTaskBridge::complete`` likewise accepts an empty completion for a
    signal-resume task only. So the signal does not block the messages behind it (an update would
    otherwise wait for the activity). The open condition wait, if any, stays open: the worker
    did not say the run moved on. An update task's update stays pending (``messages.park``).
    """
    message = messages.carried(task)
    if message is not None and message["kind"] == "signal":
        _apply_signal(engine, run, message, record_cursor=messages.signal_cursor_recorded(engine, run, task))


def _record_stream_cursors(engine: Engine, run: Row, body: Dict[str, Any], *, record: bool) -> None:
    """Keep the completion's message-stream cursors; record ``MessageCursorAdvanced{stream_name,
    through_position}`` only where the instance cursor does not already record the deliveries.

    Every durable-stream delivery is a runtime signal with its own instance message sequence, so
    when the instance cursor event is recorded for signals (``messages.signal_cursor_recorded``)
    each delivery already has its ``MessageCursorAdvanced{stream_key, ...}`` on its own signal
    task: recording the stream cursor too would record one delivery twice. Then only the
    position is kept.
    """
    cursors = body.get("message_stream_cursors")
    if not isinstance(cursors, list):
        return
    known = run.setdefault("stream_cursors", {})
    for cursor in cursors:
        if not isinstance(cursor, dict) or not isinstance(cursor.get("stream_name"), str):
            continue
        name, position = cursor["stream_name"], cursor.get("through_position")
        if isinstance(position, int) and not isinstance(position, bool) and position > int(known.get(name, 0)):
            known[name] = position
            if record:
                engine.append(run, "MessageCursorAdvanced", {"stream_name": name, "through_position": position})


def _apply_signal(engine: Engine, run: Row, message: Dict[str, Any], *, record_cursor: bool) -> None:
    """The task's one signal: cursor, then ``SignalApplied`` (never a signal the task did not carry)."""
    signal_id = message["signal_id"]
    if not any(s.get("signal_id") == signal_id for s in run.get("unapplied_signals") or []):
        return  # already applied (cannot happen while one task carries it; never record it twice)
    messages.advance_cursor(engine, run, message.get("message_sequence"), record=record_cursor)
    engine.append(run, "SignalApplied", {
        "workflow_command_id": message["workflow_command_id"], "signal_id": signal_id,
        "signal_name": message["signal_name"], "workflow_instance_id": run["workflow_id"],
        "workflow_run_id": run["run_id"]})
    run["unapplied_signals"] = [s for s in run["unapplied_signals"] if s.get("signal_id") != signal_id]


def _satisfy(engine: Engine, run: Row, wait: Dict[str, Any], signal: Optional[Dict[str, Any]]) -> None:
    """``ConditionWaitSatisfied`` for the open wait (naming the signal on a signal task); cancel its timeout."""
    payload: Dict[str, Any] = {
        "condition_wait_id": wait["condition_wait_id"], "condition_key": wait.get("condition_key"),
        "condition_definition_fingerprint": wait.get("condition_definition_fingerprint"),
        "sequence": wait["sequence"], "timeout_seconds": wait.get("timeout_seconds"), "timer_id": wait.get("timer_id")}
    if signal is not None:
        payload.update({"workflow_signal_id": signal["signal_id"], "signal_name": signal["signal_name"]})
    engine.append(run, "ConditionWaitSatisfied", payload)
    cancel_wait_timer(engine, wait)
    run["open_wait"] = None


def cancel_wait_timer(engine: Engine, wait: Dict[str, Any]) -> None:
    timer_id = wait.get("timer_id")
    if timer_id:
        timer = engine.store.get("timers", timer_id)
        if timer is not None and timer["state"] == "pending":
            timer["state"] = "cancelled"
            engine.store.put("timers", timer)
