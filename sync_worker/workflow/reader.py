"""``read_history``: one pass over the events into a :class:`HistoryIndex` (see ``history``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import payloads
from ..errors import NonDeterministicReplayError, PayloadError, WorkflowPayloadDecodeError
from .commands import canonical_memo_entries
from .history import (
    DEDUPLICATED_EVENTS,
    RESOLVED_EVENTS,
    TERMINAL_RUN_EVENTS,
    UNSUPPORTED_PREFIXES,
    Digested,
    HistoryIndex,
    Receiver,
    RecordedStep,
    UnsupportedReplayHistory,
    activity_failure,
    child_failure,
    decode_arguments,
    decode_payload_value,
    digest,
    event_id,
    event_payload,
    event_type,
    group_membership,
    parse_time,
    sequence_of,
    step_details,
    text,
)
from .messages import (
    message_id,
    note_application,
    note_arrival,
    note_blocking_step,
    note_update_accepted,
)
from .scopes import refuse_scoped_history
from .select import selection_entry
from .wait_index import TimerAliases, WaitBinder, timeout_kind

__all__ = ["Scanner", "collect_resolved", "collect_steps", "read_history", "read_history_scanner"]

_CHILD_EVENTS = frozenset(("ChildWorkflowScheduled", "ChildRunStarted", "ChildRunCompleted", "ChildRunFailed",
                           "ChildRunCancelled", "ChildRunTerminated"))
_ACTIVITY_EVENTS = frozenset(("ActivityScheduled", "ActivityStarted", "ActivityCompleted", "ActivityFailed",
                              "ActivityTimedOut", "ActivityCancelled"))


_timeout_kind = timeout_kind
_STEP_PREFIXES = ("Activity", "Timer", "Child", "ConditionWait")


def reorder_parallel_groups(index: HistoryIndex, memberships: List[Any], slots_by_group: Dict[Any, List[int]]) -> None:
    """Put the results of each fully resolved group of ``slots_by_group`` back into yielded order."""
    results, steps = index.results, index.result_steps
    for key, slots in slots_by_group.items():
        size = key[3]
        sequences = sorted(memberships[slot][2] for slot in slots)
        if len(slots) != size or sequences != list(range(key[2], key[2] + size)):
            continue
        by_sequence = sorted(slots, key=lambda slot: memberships[slot][2])
        moved = [(results[source], steps[source]) for source in by_sequence]
        for target, (value, step) in zip(sorted(slots), moved):
            results[target], steps[target] = value, step


# Events whose payload values replay decodes (plus the start event, whose declared codec
# tells a JSON-era run apart). Other events' payload_codec fields are never read.
_CODEC_CHECKED = frozenset({"WorkflowStarted", "ActivityCompleted", "ChildRunCompleted", "SideEffectRecorded",
                            "SignalReceived", "UpdateApplied"})


def _validate_codecs(events: List[Digested]) -> None:
    for event, kind, payload, _ in events:
        if kind not in _CODEC_CHECKED:
            continue
        if "payload_codec" in payload and payload["payload_codec"] != payloads.CODEC:
            error = payloads.UnsupportedPayloadCodec(payload["payload_codec"])
            raise WorkflowPayloadDecodeError(
                f"{kind or 'history event'} {event_id(event) or ''}: {error}".replace("  ", " "),
                event_id=event_id(event), codec=str(payload["payload_codec"]),
            ) from error


def _check_memo(payload: Mapping[str, Any], sequence: Optional[int], seen: Set[int]) -> str:
    """Validate a MemoUpserted payload strictly; return the replay identity of its entries."""
    if sequence is None:
        raise NonDeterministicReplayError(0, "memo upsert with positive workflow sequence", ["MemoUpserted"],
                                          detail="MemoUpserted history must retain its replay sequence.")
    if sequence in seen:
        raise NonDeterministicReplayError(sequence, "one MemoUpserted event", ["MemoUpserted", "MemoUpserted"],
                                          detail="A workflow sequence cannot record the same memo update twice.")
    identity = ""
    for key, require in (("entries", True), ("merged", False)):
        envelope = payload.get(key)
        try:
            if not isinstance(envelope, Mapping) or set(envelope) != {"codec", "blob"}:
                raise ValueError(f"{key} must be exactly a {{codec, blob}} Avro envelope")
            decoded = payloads.decode_envelope(dict(envelope))
            if not isinstance(decoded, dict):
                raise ValueError(f"{key} must decode to a string-keyed map")
            canonical = canonical_memo_entries(decoded, require_entries=require)
            if key == "entries":
                identity = payloads.encode(canonical)
        except (ValueError, TypeError) as error:
            raise NonDeterministicReplayError(sequence, "memo upsert with canonical Avro entries", ["MemoUpserted"],
                                              detail=f"MemoUpserted history has invalid {key}: {error}") from error
    seen.add(sequence)
    return identity



def _is_step_event(kind: Optional[str]) -> bool:
    """Events of a durable step. Messages carry a ``sequence`` too (``UpdateApplied``: the step
    the update was applied at, or -- the Rust server's rule -- the next one), but it is not
    theirs: it never makes an event of that step."""
    return kind is not None and (kind.startswith(_STEP_PREFIXES) or kind in RESOLVED_EVENTS)


def collect_steps(events: List[Digested], types_by_sequence: Dict[int, List[str]],
                  details_by_sequence: Dict[int, Dict[str, Any]], wait_ids: Dict[int, str]) -> None:
    """First pass: the event types and merged details of every workflow sequence, the waits' ids."""
    for _, kind, payload, sequence in events:
        if sequence is None or not _is_step_event(kind):
            continue
        if kind is not None:
            types_by_sequence.setdefault(sequence, []).append(kind)
        details = details_by_sequence.setdefault(sequence, {})
        details.update(step_details(payload))
        if kind in _CHILD_EVENTS:
            for policy in ("parent_close_policy", "cancellation_policy"):
                details.setdefault(policy, "abandon")
        if kind in _ACTIVITY_EVENTS:
            details.setdefault("cancellation_policy", "try_cancel")
        if kind == "ConditionWaitOpened" and text(payload.get("condition_wait_id")):
            wait_ids[sequence] = payload["condition_wait_id"]


def collect_resolved(events: List[Digested], wait_ids: Mapping[int, str], resolved: Set[int]) -> None:
    """Second pass: the sequences that have a result (they are never pending)."""
    for _, kind, payload, sequence in events:
        if sequence is not None and (kind in RESOLVED_EVENTS or (
                kind == "TimerFired" and _timeout_kind(payload, wait_ids) is None)):
            resolved.add(sequence)


def read_history(
    events: List[Dict[str, Any]], *, codec: Optional[str], workflow_id: Optional[str] = None, run_id: str = "",
) -> HistoryIndex:
    """Scan ``events`` (the complete history, oldest first) into a :class:`HistoryIndex`."""
    return read_history_scanner(events, codec=codec, workflow_id=workflow_id, run_id=run_id).index


def read_history_scanner(
    events: List[Dict[str, Any]], *, codec: Optional[str], workflow_id: Optional[str] = None, run_id: str = "",
) -> Scanner:
    """:func:`read_history`, returning the scanner (its ``index`` and the bookkeeping behind it)."""
    refuse_scoped_history(events)
    digested = digest(events)
    for _, kind, _, _ in digested:
        name = kind or ""
        if name.startswith(UNSUPPORTED_PREFIXES):
            raise UnsupportedReplayHistory(f"history event {name!r} needs a feature sync_worker does not replay")
    _validate_codecs(digested)

    types_by_sequence: Dict[int, List[str]] = {}
    details_by_sequence: Dict[int, Dict[str, Any]] = {}
    wait_ids: Dict[int, str] = {}
    collect_steps(digested, types_by_sequence, details_by_sequence, wait_ids)
    aliases = TimerAliases()
    wait_ids.update(aliases.feed(digested, wait_ids))
    resolved: Set[int] = set()
    collect_resolved(digested, wait_ids, resolved)

    index = HistoryIndex(events=events)
    for event, kind, payload, _ in digested:
        if kind == "WorkflowStarted":
            source = "payload.timestamp" if "timestamp" in payload else "recorded_at"
            index.start_time = parse_time(payload.get("timestamp") if "timestamp" in payload
                                           else event.get("recorded_at"))
            if index.start_time is None:
                index.clock_error = f"Workflow replay clock unavailable: invalid or missing WorkflowStarted.{source}"
            break
    else:
        index.clock_error = "Workflow replay clock unavailable: missing WorkflowStarted persisted start time"
    index.has_terminal_event = any(kind in TERMINAL_RUN_EVENTS for _, kind, _, _ in digested)

    scanner = Scanner(index, codec=codec, workflow_id=workflow_id, run_id=run_id, wait_ids=wait_ids,
                      types_by_sequence=types_by_sequence, details_by_sequence=details_by_sequence,
                      resolved=resolved, binder=WaitBinder(), aliases=aliases)
    scanner.binder.feed(digested, 0, wait_ids)
    scanner.bindings.update(scanner.binder.bindings())
    scanner.scan(digested, 0)
    reorder_parallel_groups(index, scanner.memberships, scanner.group_slots())
    return scanner


class Scanner:
    """The main pass of :func:`read_history`, kept as an object so the sticky cache can feed it
    further events (``incremental._extend``) with the same bookkeeping a cold read builds."""

    def __init__(self, index: HistoryIndex, *, codec: Optional[str], workflow_id: Optional[str], run_id: str,
                 wait_ids: Dict[int, str], types_by_sequence: Dict[int, List[str]],
                 details_by_sequence: Dict[int, Dict[str, Any]], resolved: Set[int],
                 binder: WaitBinder, aliases: TimerAliases) -> None:
        self.index = index
        self.codec, self.workflow_id, self.run_id = codec, workflow_id, run_id
        self.wait_ids = wait_ids
        self.types_by_sequence = types_by_sequence
        self.details_by_sequence = details_by_sequence
        self.resolved = resolved
        self.binder, self.aliases = binder, aliases
        self.bindings: Dict[int, Optional[str]] = {}
        self.memberships: List[Any] = []
        self.pending_added: Set[int] = set()
        self.memo_seen: Set[int] = set()
        self.delivered: Dict[Tuple[str, int], Dict[str, Any]] = {}

        self.slots_by_group: Dict[Any, List[int]] = {}

    def group_slots(self, first: int = 0) -> Dict[Any, List[int]]:
        """Result slots by parallel group, for the groups with a member at slot ``first`` or later."""
        wanted = {member[0] for member in self.memberships[first:] if member is not None}
        return {key: self.slots_by_group[key] for key in wanted}

    def step(self, shape: str, position: int, payload: Mapping[str, Any], kind: str, fallback: int) -> RecordedStep:
        sequence = sequence_of(payload) or fallback
        if sequence > self.index.known_max_sequence:
            self.index.known_max_sequence = sequence
        details = dict(self.details_by_sequence.get(sequence, {}))
        details.update(step_details(payload))
        return RecordedStep(sequence, shape, list(self.types_by_sequence.get(sequence) or [kind]), details, position)

    def add_result(self, value: Any, shape: str, position: int, payload: Mapping[str, Any], kind: str) -> None:
        index = self.index
        if selection_entry(payload) is not None:  # a selection member: bound to its sequence (``select``)
            sequence = sequence_of(payload) or len(index.result_steps) + 1
            index.selection.add_step(sequence, self.step(shape, position, payload, kind, sequence), payload,
                                     opening=False)
            index.selection.add_result(sequence, value, event_id(index.events[position]) if position < len(
                index.events) else None, kind, position)
            return
        index.result_steps.append(self.step(shape, position, payload, kind, len(index.result_steps) + 1))
        index.results.append(value)
        member = group_membership(payload)
        if member is not None:
            self.slots_by_group.setdefault(member[0], []).append(len(self.memberships))
        self.memberships.append(member)

    def add_pending(self, shape: str, position: int, payload: Mapping[str, Any], kind: str) -> None:
        sequence = sequence_of(payload)
        if sequence is not None and selection_entry(payload) is not None:
            self.index.selection.add_step(sequence, self.step(shape, position, payload, kind, sequence), payload,
                                          opening=kind in ("ActivityScheduled", "TimerScheduled",
                                                           "ChildWorkflowScheduled"))
            return
        if sequence is None or sequence in self.resolved or sequence in self.pending_added:
            return
        self.pending_added.add(sequence)
        self.index.pending_steps.append(self.step(shape, position, payload, kind, sequence))

    def scan(self, events: List[Digested], offset: int) -> None:
        """Scan ``events``, whose first one sits at history position ``offset``."""
        index, codec, wait_ids = self.index, self.codec, self.wait_ids
        add_result, add_pending, step = self.add_result, self.add_pending, self.step
        delivered, memo_seen = self.delivered, self.memo_seen
        for position, (event, digested_kind, _, sequence) in enumerate(events, offset):
            kind, payload = digested_kind or "", event_payload(event)  # (a copy: the index keeps payloads)
            if kind in DEDUPLICATED_EVENTS and sequence is not None:
                if delivered.get((kind, sequence)) == payload:
                    continue  # a byte-identical duplicate delivery of the same terminal event
                delivered[(kind, sequence)] = payload
            try:
                if kind == "ActivityCompleted":
                    value = decode_payload_value(payload.get("result", payload.get("output")), payload, codec)
                    add_result(value, "activity", position, payload, kind)
                elif kind in ("ActivityFailed", "ActivityTimedOut", "ActivityCancelled"):
                    add_result(activity_failure(payload), "activity", position, payload, kind)
                elif kind in ("ActivityScheduled", "ActivityStarted"):
                    add_pending("activity", position, payload, kind)
                    note_blocking_step(index, sequence)
                elif kind == "TimerScheduled":
                    if _timeout_kind(payload, wait_ids) is None:
                        add_pending("timer", position, payload, kind)
                        note_blocking_step(index, sequence)
                elif kind == "TimerFired":
                    timer_kind = _timeout_kind(payload, wait_ids)
                    if timer_kind is None:
                        add_result(None, "timer", position, payload, kind)
                    elif timer_kind == "condition_timeout":
                        wait_id = text(payload.get("condition_wait_id")) or wait_ids.get(sequence or -1)
                        if wait_id is not None:
                            index.wait_terminal_index.setdefault(wait_id, position)
                            index.wait_resolutions[wait_id] = "timed_out"
                elif kind in ("ChildWorkflowScheduled", "ChildRunStarted"):
                    add_pending("child workflow", position, payload, kind)
                    note_blocking_step(index, sequence)
                elif kind == "ChildRunCompleted":
                    value = decode_payload_value(payload.get("result", payload.get("output")), payload, codec)
                    add_result(value, "child workflow", position, payload, kind)
                elif kind in ("ChildRunFailed", "ChildRunCancelled", "ChildRunTerminated"):
                    add_result(child_failure(payload, kind), "child workflow", position, payload, kind)
                elif kind == "SideEffectRecorded":
                    value = decode_payload_value(payload.get("result", payload.get("output")), payload, codec)
                    add_result(value, "side effect", position, payload, kind)
                elif kind == "VersionMarkerRecorded":
                    add_result(payload.get("version", 0), "version marker", position, payload, kind)
                elif kind == "MemoUpserted":
                    identity = _check_memo(payload, sequence, memo_seen)
                    add_result(None, "memo upsert", position, payload, kind)
                    index.result_steps[-1].details["entries_identity"] = identity
                elif kind == "SearchAttributesUpserted":
                    add_result(None, "search attributes upsert", position, payload, kind)
                elif kind == "ConditionWaitOpened":
                    if text(payload.get("condition_wait_id")) is not None:
                        fallback = len(index.result_steps) + len(index.wait_steps) + 1
                        index.wait_steps.append(step("condition wait", position, payload, kind, fallback))
                        index.waits.append(payload)
                        note_blocking_step(index, index.wait_steps[-1].sequence)
                elif kind in ("ConditionWaitSatisfied", "ConditionWaitTimedOut"):
                    wait_id = text(payload.get("condition_wait_id"))
                    if wait_id is not None:
                        index.wait_terminal_index.setdefault(wait_id, position)
                        resolution = "satisfied" if kind == "ConditionWaitSatisfied" else "timed_out"
                        index.wait_resolutions[wait_id] = resolution
                elif kind in ("SignalReceived", "UpdateApplied"):
                    receiver = _add_receiver(index, event, position, self.bindings, wait_ids, codec,
                                             self.workflow_id, self.run_id)
                    if receiver is not None:
                        recorded = Receiver(receiver.history_index, receiver.result_index, receiver.kind,
                                            receiver.name, receiver.args,
                                            selection_index=receiver.selection_index)
                        if kind == "SignalReceived":
                            recorded.message_id = message_id(payload, "signal_id")
                            note_arrival(index, recorded)
                        else:
                            recorded.message_id = message_id(payload, "update_id")
                            note_application(index, recorded.message_id, recorded)
                elif kind == "SignalApplied":
                    note_application(index, message_id(payload, "signal_id"))
                elif kind == "SelectionResolved":
                    if isinstance(payload.get("selection_group_id"), str):
                        index.selection.add_marker(payload, position)
                elif kind == "SelectionOperationCancelled":
                    index.selection.add_cancellation(payload)
                elif kind in ("UpdateAccepted", "update_accepted"):
                    note_update_accepted(index, message_id(payload, "update_id"), len(index.results), position)
            except PayloadError as error:
                raise WorkflowPayloadDecodeError(
                    f"{kind} payload decode failed at history event {event_id(event) or position}: {error}",
                    event_id=event_id(event), codec=str(payload.get("payload_codec", codec)),
                ) from error


def _add_receiver(
    index: HistoryIndex, event: Dict[str, Any], position: int, bindings: Mapping[int, Optional[str]],
    wait_ids: Mapping[int, str], codec: Optional[str], workflow_id: Optional[str], run_id: str,
) -> Optional[Receiver]:
    kind = event_type(event)
    payload = event_payload(event)
    receiver_kind = "signal" if kind == "SignalReceived" else "update"
    name = text(payload.get("signal_name" if receiver_kind == "signal" else "update_name"))
    if name is None:
        return None
    if receiver_kind == "signal":
        raw = next((payload[key] for key in ("value", "input", "arguments") if payload.get(key) is not None), None)
    else:
        raw = payload.get("arguments")
    try:
        args = decode_arguments(raw, payload, codec)
    except PayloadError as error:
        raise WorkflowPayloadDecodeError(
            f"{receiver_kind} {name!r} payload decode failed (workflow {workflow_id or '?'}, run {run_id or '?'}, "
            f"event {event_id(event) or position}): {error}",
            event_id=event_id(event), codec=str(payload.get("payload_codec", codec)),
        ) from error
    if position in bindings:
        wait_id = bindings[position]
    else:
        sequence = sequence_of(payload)
        wait_id = wait_ids.get(sequence) if sequence is not None else None
    receiver = Receiver(position, len(index.results), receiver_kind, name, args, wait_id,
                        selection_index=len(index.selection.markers))
    index.receivers.append(receiver)
    return receiver
