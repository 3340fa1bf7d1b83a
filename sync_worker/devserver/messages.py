"""The workflow instance's ordered message stream: signals and updates, one per workflow task.

Sequence and cursor, as in the real engine (``MessageStreamCursor``): every accepted signal or
update command (message-stream deliveries included: they are runtime signals) reserves the
instance's next message sequence (``WorkflowCommand::record``); when the command is consumed the
run's cursor moves to that sequence, and ``MessageCursorAdvanced`` may be recorded with
``{stream_key: "instance:<workflow id>", previous_position, new_position}`` (a signal's just
before its ``SignalApplied``, an update's just after its ``UpdateCompleted``; see
:func:`signal_cursor_recorded` for when a signal's is). The cursor only moves forward and
survives continue-as-new; a duplicate request (same ``request_id``) reserves nothing.

One message per workflow task, in message order, as the engine's
``PendingMessageTask::createForRun`` and ``WorkflowTaskPayload::forSignal`` / ``forUpdate``: a
run has at most one outstanding workflow task; when it is claimed and the run has unapplied
signals or pending updates, it takes exactly one, the earliest by message sequence (an update
waits behind every earlier accepted signal, as ``UpdateCommandGate::blockingSignal`` holds it);
otherwise it is a plain task. The choice is stored on the task, so a repeated poll renders the
same task and a retried attempt (failure, lease expiry, deregistration) offers the same earliest
message again: a message leaves the run only when a task applied it (a completed signal or
update task, or a signal task the worker released as waiting for history, ``resume``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .engine import Engine
from .store import Row


def stream_key(run: Row) -> str:
    return f"instance:{run['workflow_id']}"


def reserve_sequence(engine: Engine, run: Row) -> int:
    """The next position of the instance stream (the counter outlives continue-as-new runs)."""
    key = f"{run['namespace']}\0msgseq\0{run['workflow_id']}"
    row = engine.store.get("kv", key) or {"key": key, "namespace": run["namespace"], "kind": "msgseq", "last": 0}
    row["last"] = int(row["last"]) + 1
    engine.store.put("kv", row)
    return int(row["last"])


def advance_cursor(engine: Engine, run: Row, position: Optional[int], *, record: bool = True) -> None:
    """Move the run's cursor to ``position`` (and record it if ``record``), unless it is already there or past."""
    if not isinstance(position, int):
        return
    previous = int(run.get("message_cursor_position") or 0)
    if position <= previous:
        return
    run["message_cursor_position"] = position
    if record:
        engine.append(run, "MessageCursorAdvanced", {"stream_key": stream_key(run), "previous_position": previous,
                                                     "new_position": position})


# -- one message per task -------------------------------------------------------------------------
def _position(entry: Dict[str, Any]) -> int:
    """Where a message stands in the order; one accepted by an older dev server (no sequence) goes first."""
    seq = entry.get("message_sequence")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


def pending(run: Row) -> List[Dict[str, Any]]:
    """The run's unconsumed messages in message order, each tagged with its ``kind``."""
    signals = [{**s, "kind": "signal"} for s in run.get("unapplied_signals") or []]
    updates = [{**u, "kind": "update"} for u in run.get("pending_updates") or []]
    return sorted(signals + updates, key=_position)  # stable: list order breaks ties


def has_messages(run: Row) -> bool:
    return bool(run.get("unapplied_signals") or run.get("pending_updates"))


def take(task: Row, run: Row) -> None:
    """Bind the claimed ``task`` to the run's earliest message, or make it a plain task."""
    queued = pending(run)
    first = queued[0] if queued else None
    message: Optional[Dict[str, Any]] = None
    if first is not None and first["kind"] == "signal":
        message = {"kind": "signal", "signal_id": first["signal_id"], "signal_name": first["signal_name"],
                   "workflow_command_id": first.get("workflow_command_id") or first["signal_id"],
                   "message_sequence": first.get("message_sequence")}
    elif first is not None:
        message = {"kind": "update", "update_id": first["update_id"], "update_name": first["update_name"],
                   "message_sequence": first.get("message_sequence")}
    if message is not None and first is not None and first.get("observability_context") is not None:
        message["observability_context"] = first["observability_context"]  # handed back as a link
    task["message"] = message
    task["workflow_update_id"] = message["update_id"] if message is not None and message["kind"] == "update" \
        else None
    run.pop("messages_parked", None)


def carried(task: Row) -> Optional[Dict[str, Any]]:
    """The message ``task`` was bound to at its claim (``None``: a plain task)."""
    message = task.get("message")
    return message if isinstance(message, dict) else None


def resume_context(task: Row, run: Row) -> Dict[str, Any]:
    """The poll's resume fields, as the PHP server's ``WorkflowTaskPoller::workflowTaskResumeContext``.

    Always ``resume_source_kind``; for a signal task the signal's ids as its ``SignalReceived``
    recorded them; for an update task the update id.
    """
    message = carried(task)
    if message is not None and message["kind"] == "signal":
        return {"resume_source_kind": "workflow_signal", "resume_source_id": message["signal_id"],
                "workflow_signal_id": message["signal_id"], "signal_name": message["signal_name"],
                "workflow_command_id": message["workflow_command_id"]}
    if message is not None:
        return {"resume_source_kind": "workflow_update", "resume_source_id": message["update_id"],
                "workflow_update_id": message["update_id"]}
    if run.get("first_task_id") == task["task_id"]:
        return {"resume_source_kind": "workflow_start"}
    return {"resume_source_kind": "workflow_history"}


def park(run: Row) -> None:
    """An update task was released with nothing to record (a worker always answers an update task
    with its outcome, so this is a worker that could not run it yet).

    The update stays pending and is offered again by the run's next task, which the next wake-up
    creates (an activity, timer or child resolving, another message, a cancellation).
    Re-offering it at once would spin a task per round trip.
    """
    run["messages_parked"] = True


def needs_task(run: Row) -> bool:
    """Whether an open run without an outstanding task is missing one (repair's "stranded")."""
    return run["status"] == "pending" or bool(run.get("dirty")) or \
        (has_messages(run) and not run.get("messages_parked"))


# -- the signal cursor event ----------------------------------------------------------------------
def signal_cursor_recorded(engine: Engine, run: Row, task: Row) -> bool:
    """Whether a signal applied by ``task`` records its ``MessageCursorAdvanced`` event.

    The cursor *position* always moves; the *event* for a signal is recorded only when the
    workflow type's command contract, as the completing worker registered it
    (``workflow_command_contracts[workflow_type]``, which our worker and the published SDK both
    send), declares at least one query or update. This is what the reference recordings show,
    not a rule found in the engine's code (which records it for every applied signal): the
    ServerParity ``one-signal`` and ``repeated-signal`` inventories (``parity.v1.signals``, which
    declares only signals) have no cursor event, while ``state-queries`` (declares the ``state``
    query) and ``state-updates`` (declares ``set_payload``) have one per applied message. An
    update's cursor event is always recorded.
    """
    from . import workers  # workers imports tasks, which imports this module

    worker = workers.lookup(engine, run["namespace"], task.get("lease_owner"))
    contracts = (worker or {}).get("workflow_command_contracts")
    contract = contracts.get(run["workflow_type"]) if isinstance(contracts, dict) else None
    if not isinstance(contract, dict):
        return False
    return bool(contract.get("queries")) or bool(contract.get("updates"))
