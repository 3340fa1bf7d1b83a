"""Reading a run's history into what the replayer consumes (protocol §4.3 steps 1-3, §4.4).

``read_history`` scans the events once and builds:

* the **result queue**: resolved steps in history order (values, or the typed exceptions
  of §13.3 for failures), each with its shape and recorded details; members of a fully
  resolved parallel group are put back into yielded order using their group metadata;
* the **pending steps**: scheduled-but-unresolved activities, user timers and children;
* the **recorded condition waits** (Nth ``wait_condition`` yield <-> Nth open) and how
  each one ended (satisfied / timed out) and where;
* the **receivers** (``SignalReceived`` / ``UpdateApplied``) with the result-cursor
  position they were recorded at, or the condition wait they belong to;
* the clock (``WorkflowStarted`` time).

Pure: no I/O. Undecodable payloads raise ``WorkflowPayloadDecodeError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from .. import payloads
from ..errors import (
    ActivityFailed,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    DurableWorkflowError,
)
from .select import SelectionIndex

__all__ = ["HistoryIndex", "Receiver", "RecordedStep", "UnsupportedReplayHistory"]
TERMINAL_RUN_EVENTS = frozenset({"WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled",
                                 "WorkflowTerminated", "WorkflowContinuedAsNew", "WorkflowTimedOut"})
RESOLVED_EVENTS = frozenset({
    "ActivityCompleted", "ActivityFailed", "ActivityTimedOut", "ActivityCancelled", "ChildRunCompleted",
    "ChildRunFailed", "ChildRunCancelled", "ChildRunTerminated", "SideEffectRecorded", "VersionMarkerRecorded",
    "MemoUpserted", "SearchAttributesUpserted",
})
DEDUPLICATED_EVENTS = frozenset({
    "ActivityCompleted", "ActivityFailed", "ActivityTimedOut", "ActivityCancelled", "TimerFired",
    "ChildRunCompleted", "ChildRunFailed", "ChildRunCancelled", "ChildRunTerminated",
})
# Histories this replayer cannot execute faithfully (1.20 cooperative cancellation, durable
# selection, Nexus): refusing them is better than guessing.
UNSUPPORTED_PREFIXES = ("CancellationScope", "CooperativeCancellation", "ServiceCall", "SignalWait")


class UnsupportedReplayHistory(DurableWorkflowError):
    """The history uses a feature this replayer does not implement (reported as a task failure)."""


@dataclass
class RecordedStep:
    """One recorded durable step as replay compares it with a yielded command."""

    sequence: int
    shape: str
    event_types: List[str]
    details: Dict[str, Any]
    history_index: Optional[int] = None


@dataclass
class Receiver:
    """A recorded signal or update and where replay applies it.

    Legacy histories (no application records): at its history position (``result_index``
    results consumed) or at the condition wait it is bound to (``wait_id``). Recorded
    histories (``messages``): in the order of its application record, once the workflow has
    consumed ``result_index`` results (those recorded before it arrived) and reached the step
    of workflow sequence ``due_sequence`` (the step the run was blocked on when the task that
    applied it started; 0: the first yield).
    """

    history_index: int
    result_index: int
    kind: str
    name: str
    args: List[Any]
    wait_id: Optional[str] = None
    message_id: Optional[str] = None
    due_sequence: int = 0
    #: ``SelectionResolved`` markers recorded before it (it waits until replay consumed them)
    selection_index: int = 0


@dataclass
class HistoryIndex:
    results: List[Any] = field(default_factory=list)
    result_steps: List[RecordedStep] = field(default_factory=list)
    pending_steps: List[RecordedStep] = field(default_factory=list)
    wait_steps: List[RecordedStep] = field(default_factory=list)
    waits: List[Dict[str, Any]] = field(default_factory=list)
    wait_resolutions: Dict[str, str] = field(default_factory=dict)
    wait_terminal_index: Dict[str, int] = field(default_factory=dict)
    receivers: List[Receiver] = field(default_factory=list)
    start_time: Optional[datetime] = None
    clock_error: Optional[str] = None
    has_terminal_event: bool = False
    events: List[Dict[str, Any]] = field(default_factory=list)
    #: The highest step sequence read so far (kept by the reader, so it costs nothing to ask).
    known_max_sequence: int = 0
    #: Recorded mode (``messages``): the messages with an application record, in its order...
    applied: List[Receiver] = field(default_factory=list)
    #: ...the accepted messages without one yet, by message id, in arrival order...
    unapplied: Dict[str, Receiver] = field(default_factory=dict)
    #: ...the sequence of the blocking step recorded last (what the run waits on now; 0: none)...
    blocked_sequence: int = 0
    #: ...and whether the server records signal applications (``SignalApplied``) at all.
    records_applications: bool = False
    #: selection members (out of the result queue), verdicts and cancellations (``select``)
    selection: SelectionIndex = field(default_factory=SelectionIndex)

    def payload_at(self, position: Optional[int]) -> Dict[str, Any]:
        return event_payload(self.events[position]) if position is not None else {}

    def max_sequence(self) -> int:
        return self.known_max_sequence


# -- small readers ----------------------------------------------------------------


def event_type(event: Mapping[str, Any]) -> Optional[str]:
    value = event.get("event_type")
    if type(value) is str and value:  # (the common case)
        return value
    value = value or event.get("type")
    return value if isinstance(value, str) and value else None


def event_payload(event: Mapping[str, Any]) -> Dict[str, Any]:
    payload = event.get("payload")
    if type(payload) is dict:  # decoded JSON: skip the (slower) ABC check
        return payload.copy()
    return dict(payload) if isinstance(payload, Mapping) else {}


def payload_view(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event_payload`` for a reader that neither keeps nor changes it: decoded JSON's own dict, not a copy."""
    payload = event.get("payload")
    if type(payload) is dict:
        return payload
    return dict(payload) if isinstance(payload, Mapping) else {}


#: One event as the reader's passes see it: (event, type, payload for reading, sequence).
Digested = Tuple[Dict[str, Any], Optional[str], Mapping[str, Any], Optional[int]]


def digest(events: List[Dict[str, Any]]) -> List[Digested]:
    """Each event with its type, payload (``payload_view``) and sequence, worked out once for all the
    passes of one read (each is a pure function of the event)."""
    out: List[Digested] = []
    for event in events:
        payload = payload_view(event)
        out.append((event, event_type(event), payload, sequence_of(payload)))
    return out


def sequence_of(payload: Mapping[str, Any]) -> Optional[int]:
    value = payload.get("sequence") or payload.get("workflow_sequence")
    if type(value) is int:  # (the common case; a bool is not exactly an int)
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _int(payload: Mapping[str, Any], key: str) -> Optional[int]:
    value = payload.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def text(value: Any) -> Optional[str]:
    if value is None:  # (the common case: an absent key)
        return None
    return value if isinstance(value, str) and value else None


def event_id(event: Mapping[str, Any]) -> Optional[str]:
    for key in ("event_id", "id", "sequence"):
        if event.get(key) is not None:
            return str(event[key])
    return None


def decode_payload_value(raw: Any, payload: Mapping[str, Any], codec: Optional[str]) -> Any:
    """Decode an envelope or a bare blob whose codec is the payload's or the task's."""
    effective = payload.get("payload_codec", codec)
    if isinstance(raw, Mapping):
        return payloads.decode_envelope(dict(raw))
    if raw is None:
        if effective is not None and effective != payloads.CODEC:
            raise payloads.UnsupportedPayloadCodec(effective)
        return None
    return payloads.decode_envelope(raw, codec=effective)


def decode_arguments(raw: Any, payload: Mapping[str, Any], codec: Optional[str]) -> List[Any]:
    value = decode_payload_value(raw, payload, codec)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.utcoffset() is not None else None


def activity_type_of(payload: Mapping[str, Any]) -> Optional[str]:
    found = text(payload.get("activity_type")) or text(payload.get("activity_name"))
    snapshot = payload.get("activity")
    if found is None and isinstance(snapshot, Mapping):
        for key in ("activity_type", "activity_name", "type", "name"):
            found = found or text(snapshot.get(key))
    return found


_GROUP_KEYS = ("parallel_group_id", "parallel_group_kind", "parallel_group_base_sequence",
               "parallel_group_size", "parallel_group_index")


def _group_entry(source: Mapping[str, Any]) -> Optional[Tuple[str, str, int, int, int]]:
    group_id, kind = text(source.get("parallel_group_id")), text(source.get("parallel_group_kind"))
    if group_id is None or kind is None:  # (most steps are in no group)
        return None
    base = _int(source, "parallel_group_base_sequence")
    size = _int(source, "parallel_group_size")
    index = _int(source, "parallel_group_index")
    if base is None or size is None or index is None:
        return None
    if base < 1 or size < 1 or not 0 <= index < size:
        return None
    return group_id, kind, base, size, index


_DETAIL_KEYS = ("workflow_type", "child_workflow_type", "parent_close_policy", "cancellation_policy",
                "timer_kind", "change_id", "condition_key", "condition_definition_fingerprint")


#: Every payload key ``step_details`` reads.
_STEP_DETAIL_KEYS = frozenset({"activity_type", "activity_name", "activity", "execution_mode", "local_activity",
                               "delay_seconds", *_DETAIL_KEYS, "parallel_group_path", "parallel_group_id",
                               "parallel_group_kind"})
_ACTIVITY_TYPE_ONLY = frozenset({"activity_type"})


def step_details(payload: Mapping[str, Any]) -> Dict[str, Any]:
    present = _STEP_DETAIL_KEYS.intersection(payload)
    if not present:
        return {}
    if present == _ACTIVITY_TYPE_ONLY:  # (an activity's events): only its type can be read
        activity_type = text(payload["activity_type"])
        return {} if activity_type is None else {"activity_type": activity_type}
    details: Dict[str, Any] = {}
    activity_type = activity_type_of(payload)
    if activity_type is not None:
        details["activity_type"] = activity_type
    if payload.get("execution_mode") == "local" or payload.get("local_activity") is True:
        details["execution_mode"] = "local"
    if "delay_seconds" in payload:
        details["delay_seconds"] = payload["delay_seconds"]
    for key in _DETAIL_KEYS:
        value = payload.get(key)
        if value is not None and isinstance(value, str) and value:
            details[key] = value
    path = payload.get("parallel_group_path")
    if isinstance(path, list) and path and all(isinstance(entry, Mapping) for entry in path):
        details["parallel_group_path"] = [dict(entry) for entry in path]
    elif _group_entry(payload) is not None:
        details["parallel_group_path"] = [{key: payload[key] for key in _GROUP_KEYS}]
    return details


def group_membership(payload: Mapping[str, Any]) -> Optional[Tuple[Tuple[str, str, int, int], int, int]]:
    """(outer group key, size, sequence) when every path entry agrees with the sequence."""
    sequence = sequence_of(payload)
    if sequence is None:
        return None
    raw_path = payload.get("parallel_group_path")
    entries = []
    if isinstance(raw_path, list) and raw_path:
        for raw in raw_path:
            entry = _group_entry(raw) if isinstance(raw, Mapping) else None
            if entry is None:
                return None
            entries.append(entry)
        top = _group_entry(payload)
        if top is not None and top != entries[-1]:
            return None
    else:
        entry = _group_entry(payload)
        if entry is None:
            return None
        entries.append(entry)
    # The server-assigned sequence is the durable yielded position; refuse to reorder
    # metadata that contradicts it rather than guess from completion order.
    if any(base + index != sequence for _, _, base, _, index in entries):
        return None
    group_id, kind, base, size, _ = entries[0]
    return (group_id, kind, base, size), size, sequence


def activity_failure(payload: Mapping[str, Any]) -> ActivityFailed:
    """The ``ActivityFailed`` a failed / timed-out / cancelled activity event throws."""
    exception = payload.get("exception") if isinstance(payload.get("exception"), Mapping) else {}
    assert isinstance(exception, Mapping)
    neutral = {key: exception[key] for key in ("type", "message", "code", "details", "details_payload_codec",
                                               "non_retryable") if key in exception}
    for key in ("diagnostics", "runtime_diagnostics"):
        if isinstance(exception.get(key), Mapping):
            neutral[key] = dict(exception[key])
    sequence = payload.get("sequence")
    snapshot = payload.get("activity")
    return ActivityFailed(
        text(payload.get("message")) or text(exception.get("message")) or text(payload.get("closed_reason"))
        or "activity failed",
        activity_type=activity_type_of(payload),
        step_sequence=sequence if type(sequence) is int and sequence > 0 else None,
        activity_execution_id=text(payload.get("activity_execution_id")),
        activity_attempt_id=text(payload.get("activity_attempt_id")),
        failure_id=text(payload.get("failure_id")),
        failure_category=text(payload.get("failure_category")),
        exception_type=text(payload.get("exception_type")) or text(exception.get("type")),
        exception_class=text(payload.get("exception_class")) or text(exception.get("class")),
        non_retryable=payload.get("non_retryable") is True,
        code=payload.get("code"),
        exception_payload=neutral or None,
        activity=dict(snapshot) if isinstance(snapshot, Mapping) else None,
    )


def child_failure(payload: Mapping[str, Any], kind: str) -> ChildWorkflowFailed:
    """The ``ChildWorkflowFailed`` (or subclass) a failed child run event throws."""
    exception = payload.get("exception") if isinstance(payload.get("exception"), Mapping) else {}
    assert isinstance(exception, Mapping)
    message = text(payload.get("message")) or text(exception.get("message"))
    exception_class = (text(payload.get("exception_class")) or text(exception.get("class"))
                       or text(payload.get("exception_type")) or text(exception.get("type")))
    run_id = text(payload.get("child_workflow_run_id"))
    child_type = text(payload.get("child_workflow_type"))
    if kind == "ChildRunCancelled":
        return ChildWorkflowCancelled(message or "child workflow was cancelled", exception_class,
                                      child_workflow_run_id=run_id, child_workflow_type=child_type)
    if kind == "ChildRunTerminated":
        return ChildWorkflowTerminated(message or "child workflow was terminated", exception_class,
                                       child_workflow_run_id=run_id, child_workflow_type=child_type)
    return ChildWorkflowFailed(message or "child workflow failed", exception_class,
                               child_workflow_run_id=run_id, child_workflow_type=child_type)
