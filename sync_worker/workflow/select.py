"""Durable selection: ``yield ctx.select({...})`` waits for the first of several operations.

Members are activities, timers, child workflows or nested parallel lists, keyed by the mapping's
keys (or a sequence's indexes). Yielding the group starts every member in one task, each tagged
as the published SDK tags it: the outer path entry is ``parallel_group_mode: "select"`` of group
``select-calls:<base>:<size>`` with the member's ``selection_member_{key,index,base_sequence,
size,kind}``; a nested list member keeps its own group entry inside. The server commits the first
member to finish (success or failure) as a ``SelectionResolved`` event and wakes the run; replay
resumes the yield there with a :class:`SelectionResult` (the winner's key, index, kind, durable
identity, value or failure, and a :class:`DurableOperationHandle` per member). A loser keeps
running: ``yield handle`` waits for its result, ``yield handle.cancel()`` cancels it
(``cancel_selection_operation``; the server records ``SelectionOperationCancelled``, and awaiting
it then raises :class:`~sync_worker.errors.DurableOperationCancelled`).

Member events never enter the ordinary result queue: they are bound to their sequences
(``HistoryIndex.selection``), so a loser finishing before or after later work changes nothing.
Condition waits as members (which the SDK allows) are refused here: ``TypeError``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import ActivityFailed, ChildWorkflowFailed, NonDeterministicReplayError
from .commands import ScheduleActivity, StartChildWorkflow, StartTimer, WaitCondition

__all__ = ["CancelDurableOperation", "DurableOperationHandle", "SelectGroup", "SelectionIndex", "SelectionResult",
           "select_group", "selection_entry"]

Key = Union[int, str]
_IDENTITY_FIELDS = {"activity": "activity_execution_id", "timer": "timer_id", "child": "child_workflow_run_id",
                    "condition": "condition_wait_id", "signal": "signal_wait_id"}
_SUCCESS = frozenset({"ActivityCompleted", "ChildRunCompleted", "TimerFired", "SignalApplied",
                      "ConditionWaitSatisfied", "ConditionWaitTimedOut"})
_FAILURE = frozenset({"ActivityFailed", "ActivityCancelled", "ActivityTimedOut", "ChildRunFailed",
                      "ChildRunCancelled", "ChildRunTerminated"})


def valid_key(value: Any) -> bool:
    return (isinstance(value, str) and bool(value)) or (type(value) is int and value >= 0)


@dataclass(frozen=True)
class SelectGroup:
    """What ``ctx.select(...)`` returns: yield it to start every member and wait for one winner."""

    operations: Tuple[Tuple[Key, Any], ...]

    shape = "selection"
    blocking = True

    def describe(self) -> str:
        return f"selection:{[key for key, _ in self.operations]}"


def select_group(operations: Union[Mapping[Key, Any], Sequence[Any]]) -> SelectGroup:
    """The SDK's checks: at least one member, string or non-negative integer keys, unique."""
    entries = tuple(operations.items()) if isinstance(operations, Mapping) else tuple(enumerate(operations))
    if not entries:
        raise ValueError("durable selection requires at least one operation")
    keys = [key for key, _ in entries]
    if any(isinstance(key, bool) or not isinstance(key, (int, str)) for key in keys):
        raise TypeError("durable selection member keys must be strings or integers")
    if any(not valid_key(key) for key in keys):
        raise ValueError("durable selection member keys must be non-empty strings or non-negative integers")
    if len(set(keys)) != len(keys):
        raise ValueError("durable selection member keys must be unique")
    return SelectGroup(entries)


@dataclass(frozen=True)
class DurableOperationHandle:
    """One member of a selection: ``yield handle`` awaits it, ``yield handle.cancel()`` cancels it."""

    key: Key
    index: int
    kind: str
    identity: str
    base_sequence: int
    size: int
    selection_group_id: str
    operation: Any = field(compare=False, repr=False)

    shape = "selection handle"
    blocking = True

    def await_result(self) -> DurableOperationHandle:
        return self

    def cancel(self) -> CancelDurableOperation:
        return CancelDurableOperation(self)

    def describe(self) -> str:
        return f"selection member {self.key!r}"


@dataclass(frozen=True)
class CancelDurableOperation:
    """Explicitly cancel a still-running selection member (resolves ``None``)."""

    handle: DurableOperationHandle

    shape = "selection cancel"
    blocking = False

    def describe(self) -> str:
        return f"cancel selection member {self.handle.key!r}"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        handle = self.handle
        return {"type": "cancel_selection_operation", "selection_group_id": handle.selection_group_id,
                "member_key": handle.key, "member_index": handle.index, "member_base_sequence": handle.base_sequence,
                "member_size": handle.size, "operation_kind": handle.kind, "operation_identity": handle.identity}


@dataclass(frozen=True)
class SelectionResult:
    """The one winner the server committed for a selection."""

    key: Key
    index: int
    kind: str
    identity: str
    value: Any
    failure: Optional[BaseException]
    winner: DurableOperationHandle
    handles: Mapping[Key, DurableOperationHandle]

    @property
    def succeeded(self) -> bool:
        return self.failure is None

    def result(self) -> Any:
        if self.failure is not None:
            raise self.failure
        return self.value

    def remaining(self) -> Dict[Key, DurableOperationHandle]:
        return {key: handle for key, handle in self.handles.items() if key != self.key}


# -- what the history holds ------------------------------------------------------------------


def selection_entry(payload: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """The outer ``parallel_group_mode: "select"`` entry of a member event's path, if any."""
    path = payload.get("parallel_group_path")
    if not isinstance(path, list) and payload.get("parallel_group_mode") != "select":
        return None  # (most steps: no path, and the event itself is no selection member)
    candidates: List[Mapping[str, Any]] = [entry for entry in path if isinstance(entry, Mapping)] \
        if isinstance(path, list) else []
    candidates.append(payload)
    for candidate in candidates:
        if candidate.get("parallel_group_mode") == "select" and isinstance(candidate.get("parallel_group_id"), str):
            if not valid_key(candidate.get("selection_member_key")):
                base = candidate.get("parallel_group_base_sequence")
                raise NonDeterministicReplayError(
                    base if isinstance(base, int) else 0,
                    "non-empty string or non-negative integer selection member key",
                    ["SelectionGroupMetadata"], detail="selection history contains an invalid member key")
            return candidate
    return None


@dataclass
class SelectionIndex:
    """Selection member events by sequence, the committed winners and cancellations (reader-fed)."""

    #: sequence -> the recorded steps of that member leaf (opening and terminal)
    steps: Dict[int, List[Any]] = field(default_factory=dict)
    #: sequence -> the payloads of its events (the first opening payload is ``openings``)
    payloads: Dict[int, List[Dict[str, Any]]] = field(default_factory=dict)
    openings: Dict[int, Dict[str, Any]] = field(default_factory=dict)
    #: sequence -> its terminal value or failure, and the terminal events ``(id, type, history position)``
    results: Dict[int, Any] = field(default_factory=dict)
    terminals: Dict[int, List[Tuple[Optional[str], str, int]]] = field(default_factory=dict)
    markers: List[Dict[str, Any]] = field(default_factory=list)
    marker_positions: List[int] = field(default_factory=list)
    cancellations: Dict[Tuple[str, int], Dict[str, Any]] = field(default_factory=dict)

    def add_step(self, sequence: int, step: Any, payload: Mapping[str, Any], *, opening: bool) -> None:
        self.steps.setdefault(sequence, []).append(step)
        self.payloads.setdefault(sequence, []).append(dict(payload))
        if opening:
            self.openings.setdefault(sequence, dict(payload))

    def add_result(self, sequence: int, value: Any, event_id: Optional[str], kind: str, position: int) -> None:
        self.results.setdefault(sequence, value)
        self.terminals.setdefault(sequence, []).append((event_id, kind, position))

    def add_marker(self, payload: Mapping[str, Any], position: int) -> None:
        base = payload.get("selection_group_base_sequence")
        where = sum(1 for marker in self.markers
                    if _int(marker.get("selection_group_base_sequence")) <= _int(base))
        self.markers.insert(where, dict(payload))
        self.marker_positions.insert(where, position)

    def add_cancellation(self, payload: Mapping[str, Any]) -> None:
        group, base = payload.get("selection_group_id"), payload.get("member_base_sequence")
        if not isinstance(group, str) or type(base) is not int:
            return
        existing = self.cancellations.get((group, base))
        if existing is not None and existing != dict(payload):
            raise NonDeterministicReplayError(base, "one stable SelectionOperationCancelled marker",
                                              ["SelectionOperationCancelled"],
                                              detail="conflicting cancellation markers target the same durable member")
        self.cancellations[(group, base)] = dict(payload)

    def identity(self, kind: str, sequence: int, size: int) -> str:
        """A member's durable identity: its opening's id field (a group: ``group:<base>:<size>``)."""
        if kind == "group":
            return f"group:{sequence}:{size}"
        name = _IDENTITY_FIELDS.get(kind, "")
        found = self.openings.get(sequence, {}).get(name)
        if not isinstance(found, str) or not found:
            raise NonDeterministicReplayError(
                sequence, f"durable {kind} resource identity from scheduled/open history", ["SelectionResolved"],
                detail="selection member history is missing its canonical operation identity")
        for payload in self.payloads.get(sequence, []):
            other = payload.get(name)
            if isinstance(other, str) and other and other != found:
                raise NonDeterministicReplayError(sequence, f"stable durable {kind} operation identity",
                                                  ["SelectionResolved"], detail="selection opening and later history "
                                                  "disagree on the canonical operation identity")
        return found

    def member_value(self, base: int, size: int, shape: Optional[List[Any]], *, outcome: Optional[str] = None,
                     resolved_at: Optional[int] = None) -> Tuple[bool, Any, Optional[BaseException]]:
        """``(resolved, value, failure)`` of a member (a group: its leaves in yielded order)."""
        if outcome == "failed":
            value = self.results.get(resolved_at) if resolved_at is not None else None
            return (True, None, value) if isinstance(value, BaseException) else (False, None, None)
        if outcome is None:
            for sequence in range(base, base + size):
                value = self.results.get(sequence)
                if isinstance(value, BaseException):
                    return True, None, value
        values: List[Any] = []
        for sequence in range(base, base + size):
            if sequence not in self.results:
                return False, None, None
            value = self.results[sequence]
            if isinstance(value, BaseException):
                return True, None, value
            values.append(value)
        if shape is None:
            return True, values[0], None
        from .matching import reshape

        return True, reshape(shape, values), None

    def resolution(self, marker: Mapping[str, Any], handle: DurableOperationHandle) -> int:
        """Check that the winner's resolution event is the one that made it terminal; its sequence."""
        outcome = marker.get("outcome")
        wanted = _FAILURE if outcome == "failed" else _SUCCESS
        found = sorted(((position, event_id, kind, sequence)
                        for sequence in range(handle.base_sequence, handle.base_sequence + handle.size)
                        for event_id, kind, position in self.terminals.get(sequence, []) if kind in wanted))
        chosen = (found[0] if outcome == "failed" else found[-1]) if found else None
        if chosen is None or chosen[1] != marker.get("resolution_event_id") or chosen[2] != marker.get(
                "resolution_event_type"):
            raise NonDeterministicReplayError(handle.base_sequence,
                                              "SelectionResolved referencing the event that made its member terminal",
                                              ["SelectionResolved"])
        return int(chosen[3])


def _int(value: Any) -> int:
    return value if type(value) is int else 0


# -- annotation --------------------------------------------------------------------------------


def member_kind(operation: Any) -> str:
    if isinstance(operation, list):
        return "group"
    if isinstance(operation, ScheduleActivity) or getattr(operation, "shape", None) == "activity":
        return "activity"
    if isinstance(operation, StartTimer):
        return "timer"
    if isinstance(operation, StartChildWorkflow):
        return "child"
    if isinstance(operation, WaitCondition):
        raise TypeError("durable selection of condition waits is not supported by sync_worker; select activities, "
                        "timers, child workflows or nested lists of them")
    raise TypeError(f"durable selection members are activities, timers, child workflows and nested lists, "
                    f"not {operation!r}")


def annotate(group: SelectGroup, base: int) -> Tuple[List[Any], Dict[Key, DurableOperationHandle],
                                                     Dict[Key, Optional[List[Any]]], Dict[Key, Tuple[int, int, str]]]:
    """The group's leaves with their select paths, and per member its handle shape and span."""
    from .matching import annotate_group, group_leaves

    specs: List[Tuple[Key, int, int, str, Any, Optional[List[Any]], List[Any]]] = []
    cursor = 0
    kinds: List[str] = []
    for member_index, (key, operation) in enumerate(group.operations):
        kind = member_kind(operation)
        if isinstance(operation, list):
            annotated, shape = annotate_group(operation, base + cursor)
            kinds.extend(member_kind(leaf) for leaf in group_leaves(operation, nested=True))
        else:
            leaf = copy.copy(operation)
            leaf.parallel_path = []
            annotated, shape = [leaf], None
            kinds.append(kind)
        if not annotated:
            raise ValueError("durable selection members must contain at least one operation")
        specs.append((key, member_index, base + cursor, kind, operation, shape, annotated))
        cursor += len(annotated)
    size = cursor
    group_kind = kinds[0] if len(set(kinds)) == 1 else "mixed"
    group_id = f"select-calls:{base}:{size}"
    leaves: List[Any] = []
    shapes: Dict[Key, Optional[List[Any]]] = {}
    spans: Dict[Key, Tuple[int, int, str]] = {}
    operations: Dict[Key, Any] = {}
    flat = 0
    for key, member_index, member_base, kind, operation, shape, annotated in specs:
        for offset, leaf in enumerate(annotated):
            leaf.parallel_path.insert(0, {
                "parallel_group_id": group_id, "parallel_group_kind": group_kind, "parallel_group_mode": "select",
                "parallel_group_base_sequence": base, "parallel_group_size": size,
                "parallel_group_index": flat + offset, "selection_member_key": key,
                "selection_member_index": member_index, "selection_member_base_sequence": member_base,
                "selection_member_size": len(annotated), "selection_member_kind": kind,
            })
            leaves.append(leaf)
        shapes[key] = shape
        spans[key] = (member_base, len(annotated), kind)
        operations[key] = (member_index, operation)
        flat += len(annotated)
    handles = {key: DurableOperationHandle(key, operations[key][0], spans[key][2], f"{spans[key][2]}:{spans[key][0]}",
                                           spans[key][0], spans[key][1], group_id, operations[key][1])
               for key in spans}
    return leaves, handles, shapes, spans


def failure_of(value: Any) -> Optional[BaseException]:
    return value if isinstance(value, (ActivityFailed, ChildWorkflowFailed)) else None
