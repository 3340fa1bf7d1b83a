"""Durable selections (``ctx.select``): the first member to finish wins, as the real server decides it.

From ``durable-workflow/workflow`` ``src/V2/Support/ParallelChildGroup.php`` (a revision newer than
the local mirror, whose copy predates selections)
(``shouldWakeParentOnClosure``, ``selectionWinnerIs``, ``persistSelectionWinner``,
``resolutionEventForMember``, ``operationIdentityForMember``):

* a step whose path carries a ``parallel_group_mode: "select"`` entry is a selection member
  (a nested list member adds its own ``all`` entry inside); the ordinary barrier does not apply;
* when a member leaf closes, the nested ``all`` groups between it and the selection must be
  complete and successful for a success to count (a failure counts at once). An eligible member is
  the winner when the group has none yet: ``SelectionResolved`` is recorded --
  ``selection_group_id`` / ``_base_sequence`` / ``_size``, ``member_key`` / ``_index`` /
  ``_base_sequence`` / ``_size``, ``operation_kind``, ``operation_identity`` (the opening's
  ``activity_execution_id`` / ``timer_id`` / ``child_workflow_run_id``; ``group:<base>:<size>``),
  ``outcome`` (``completed`` / ``failed``) and the event that made it terminal
  (``resolution_event_id`` / ``_type``: the last success, or the first failure) -- and the run
  wakes;
* a member closing after the winner wakes the run when it waits with no task outstanding (it
  may be awaiting that member through its handle); during a leased task the dev server gives
  the run one more task after it (the dirty flag): that task's history may predate the closing;
* ``cancel_selection_operation`` cancels what of the member is still open (``ActivityCancelled``,
  ``TimerCancelled``, the child run cancelled) and records ``SelectionOperationCancelled`` with
  the member's identity; the run then gets one more task (the dev server's rule: the code that
  went on past the cancel may be awaiting the member, and must see the cancellation recorded).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .engine import Engine
from .store import Row
from .util import TERMINAL_STATUSES, ApiError, iso

__all__ = ["cancel_member", "member_closed", "selection_entry"]

_SUCCESS = ("ActivityCompleted", "ChildRunCompleted", "TimerFired", "SignalApplied", "ConditionWaitSatisfied",
            "ConditionWaitTimedOut")
_FAILURE = ("ActivityFailed", "ActivityCancelled", "ActivityTimedOut", "ChildRunFailed", "ChildRunCancelled",
            "ChildRunTerminated")
_OPENINGS = {"ActivityScheduled": "activity_execution_id", "ChildWorkflowScheduled": "child_workflow_run_id",
             "TimerScheduled": "timer_id"}
_KIND_FIELD = {"activity": "activity_execution_id", "child": "child_workflow_run_id", "timer": "timer_id"}


def _path(fields: Dict[str, Any]) -> List[Dict[str, Any]]:
    raw = fields.get("parallel_group_path")
    if isinstance(raw, list) and raw:
        return [entry for entry in raw if isinstance(entry, dict)]
    return [fields] if fields.get("parallel_group_id") else []


def selection_entry(fields: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``select`` entry of a member's path (None: not a selection member)."""
    return next((entry for entry in _path(fields) if entry.get("parallel_group_mode") == "select"), None)


def _member(entry: Dict[str, Any]) -> Tuple[int, int]:
    base = entry.get("selection_member_base_sequence")
    if type(base) is not int:
        base = int(entry["parallel_group_base_sequence"]) + int(entry["parallel_group_index"])
    size = entry.get("selection_member_size")
    return base, size if type(size) is int else 1


def _events(engine: Engine, run: Row) -> List[Row]:
    return engine.history(run["run_id"])


def _completed(events: List[Row], base: int, size: int) -> bool:
    done = {(e.get("payload") or {}).get("sequence") for e in events if e["event_type"] in _SUCCESS}
    return all(sequence in done for sequence in range(base, base + size))


def _resolution(events: List[Row], base: int, size: int, outcome: str) -> Optional[Row]:
    kinds = _FAILURE if outcome == "failed" else _SUCCESS
    found = [e for e in events if e["event_type"] in kinds
             and base <= ((e.get("payload") or {}).get("sequence") or 0) < base + size]
    if not found:
        return None
    return found[0] if outcome == "failed" else found[-1]


def _identity(events: List[Row], kind: str, base: int, size: int, resolution: Optional[Row]) -> str:
    if kind == "group":
        return f"group:{base}:{size}"
    name = _KIND_FIELD.get(kind, "timer_id")
    for event in events:
        payload = event.get("payload") or {}
        if event["event_type"] in _OPENINGS and payload.get("sequence") == base and isinstance(payload.get(name), str):
            return str(payload[name])
    found = (resolution or {}).get("payload", {}).get(name) if resolution else None
    return str(found) if found else f"{kind}:{base}"


def member_closed(engine: Engine, run: Row, fields: Dict[str, Any], sequence: int) -> bool:
    """A step closed (its terminal event just recorded). True when it was a selection member (the
    caller's ordinary barrier does not apply); wakes the run when the rules above say so."""
    path = _path(fields)
    select_at = next((i for i, entry in enumerate(path) if entry.get("parallel_group_mode") == "select"), None)
    if select_at is None:
        return False
    root = path[0].get("parallel_group_id")
    if root in run.get("groups", {}):
        left = [s for s in run["groups"][root] if s != sequence]
        if left:
            run["groups"][root] = left
        else:
            del run["groups"][root]
    events = _events(engine, run)
    closing = events[-1] if events else {}
    successful = closing.get("event_type") in _SUCCESS
    eligible = True
    for entry in reversed(path[select_at + 1:]):  # the nested all-groups around the leaf, innermost first
        base, size = int(entry["parallel_group_base_sequence"]), int(entry["parallel_group_size"])
        if successful and not _completed(events, base, size):
            eligible = False
    if not eligible:
        return True
    select = path[select_at]
    group_id = str(select["parallel_group_id"])
    decided: Dict[str, Any] = run.setdefault("selections", {})
    if group_id in decided:
        # The code may be awaiting this member through its handle. The real server wakes a waiting
        # run with no task outstanding; when a task is leased (its history may predate this event)
        # the dev server also gives the run one more task after it (``engine.wake``: the dirty
        # flag), so the last loser to close during a lease is never missed.
        if run["status"] not in TERMINAL_STATUSES:
            engine.wake(run)
        return True
    base, size = _member(select)
    kind = str(select.get("selection_member_kind") or ("group" if len(path) > select_at + 1 else "activity"))
    outcome = "completed" if successful else "failed"
    resolution = _resolution(events, base, size, outcome)
    key = select.get("selection_member_key", select.get("parallel_group_index"))
    payload = {
        "selection_group_id": group_id, "selection_group_base_sequence": select["parallel_group_base_sequence"],
        "selection_group_size": select["parallel_group_size"], "member_key": key,
        "member_index": select.get("selection_member_index", select.get("parallel_group_index")),
        "member_base_sequence": base, "member_size": size, "operation_kind": kind,
        "operation_identity": _identity(events, kind, base, size, resolution), "outcome": outcome,
    }
    if resolution is not None:
        payload.update({"resolution_event_id": resolution["id"], "resolution_event_type": resolution["event_type"]})
    engine.append(run, "SelectionResolved", payload)
    decided[group_id] = {"member_key": key, "outcome": outcome}
    engine.wake(run)
    return True


_CANCEL_FIELDS = ("selection_group_id", "member_key", "member_index", "member_base_sequence", "member_size",
                  "operation_kind", "operation_identity")


def validate_cancel(cmd: Dict[str, Any], index: int) -> None:
    for name in _CANCEL_FIELDS:
        value = cmd.get(name)
        ok = (isinstance(value, str) and bool(value)) if name in ("selection_group_id", "operation_kind",
                                                                   "operation_identity") else \
            (isinstance(value, (str, int)) and not isinstance(value, bool)) if name == "member_key" else \
            (type(value) is int and value >= (1 if name != "member_index" else 0))
        if not ok:
            message = f"{name} is required for cancel_selection_operation"
            raise ApiError(422, "validation_failed", f"commands.{index}: {message}",
                           errors={f"commands.{index}.{name}": [message]},
                           validation_errors={f"commands.{index}.{name}": [message]})


def cancel_member(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    """``cancel_selection_operation``: cancel what is still open of the member, then record it."""
    base, size = int(cmd["member_base_sequence"]), int(cmd["member_size"])
    wanted = set(range(base, base + size))
    for timer in engine.store.select("timers", "run_id = ? AND state = 'pending'", (run["run_id"],)):
        if timer.get("sequence") in wanted and timer.get("timer_kind") is None:
            timer["state"] = "cancelled"
            engine.store.put("timers", timer)
            engine.append(run, "TimerCancelled", {
                "sequence": timer["sequence"], "timer_id": timer["timer_id"],
                "delay_seconds": timer.get("delay_seconds"), "fire_at": iso(timer["fire_at"]), "timer_kind": None,
                "reason": "selection_operation_cancelled",
                **timer.get("parallel", {})})
    for act in engine.store.select("activities", "run_id = ? AND state IN ('ready', 'backoff', 'leased')",
                                   (run["run_id"],)):
        if act.get("sequence") not in wanted:
            continue
        act.update({"state": "cancelled", "due_at": None, "cancel_reason": "selection_operation_cancelled"})
        engine.store.put("activities", act)
        engine.append(run, "ActivityCancelled", {
            "sequence": act["sequence"], "activity_type": act["activity_type"],
            "activity_execution_id": act["execution_id"], "activity_attempt_id": act["attempt_id"],
            "attempt_number": act["attempt_number"], "message": "selection operation cancelled",
            "reason": "selection_operation_cancelled", **act.get("parallel", {})})
    for child_id in list(run.get("children", [])):
        child = engine.current_run(run["namespace"], child_id)
        link = (child or {}).get("parent") or {}
        if child is not None and child["status"] not in TERMINAL_STATUSES and link.get("sequence") in wanted \
                and link.get("run_id") == run["run_id"]:
            from .lifecycle import cancel_run

            cancel_run(engine, child, "selection_operation_cancelled")
    engine.append(run, "SelectionOperationCancelled", {name: cmd[name] for name in _CANCEL_FIELDS})
    # The dev server's own rule: the workflow code went on past the cancel and may be awaiting the
    # member; its next task replays the recorded cancellation (the completion's task ends first).
    run["dirty"] = True
