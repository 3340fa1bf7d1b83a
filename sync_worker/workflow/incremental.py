"""Resuming a suspended replay with only the new events (the engine of the sticky cache).

A cold replay (``replayer.replay``) runs the workflow from its first line over the whole
history, so a run of N steps costs O(N^2) over its life. When a task ends with the run
blocked on an activity, timer or child, :func:`start` keeps the replay itself -- the
instance, its suspended ``run`` generator, the history index and the reader's bookkeeping --
as a :class:`SuspendedRun`. :func:`resume` feeds the next task's *new* events into that
state and continues the generator from the yield it stopped at.

Resuming must give exactly what a cold replay of the whole history would give. It is only
attempted when that can be shown from the state and the new events; otherwise it returns
``None`` and the caller replays cold (and drops the state). It refuses when:

* the run uses condition waits, parallel groups, message streams, or a receiver is pending;
* a new event is not a plain step/receiver event (start, condition wait, terminal, unknown
  kinds, unsupported features), touches a step that was already resolved, or carries
  parallel-group metadata;
* the commands the previous task sent are not the next recorded results, in order and with
  the same values (a side effect's recorded bytes, a version marker's recorded version);
* a receiver would have to be applied at a point the suspended code already ran past;
* the cancellation flag changed, or anything raises (workflow-code failures included: the
  cold replay then produces the failure with its own stack).

``tests/unit/workflow/test_incremental.py`` splits every golden and replay-regression history
at every task boundary and checks both paths agree byte for byte.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple

from .. import payloads
from ..errors import WorkflowCancelled
from .commands import RecordSideEffect, RecordVersionMarker, UpsertMemo, UpsertSearchAttributes
from .definition import MESSAGE_STREAM_SIGNAL
from .history import (
    TERMINAL_RUN_EVENTS,
    UNSUPPORTED_PREFIXES,
    event_payload,
    event_type,
    group_membership,
    sequence_of,
)
from .matching import check_step
from .reader import _timeout_kind, _validate_codecs, collect_resolved, collect_steps
from .replayer import ReplayResult, _Replay, _Stop, _suffix_minima

__all__ = ["SuspendedRun", "resume", "start"]

log = logging.getLogger("sync_worker.workflow.sticky")

_STEP_EVENTS = frozenset({
    "ActivityScheduled", "ActivityStarted", "ActivityCompleted", "ActivityFailed", "ActivityTimedOut",
    "ActivityCancelled", "TimerScheduled", "TimerFired", "ChildWorkflowScheduled", "ChildRunStarted",
    "ChildRunCompleted", "ChildRunFailed", "ChildRunCancelled", "ChildRunTerminated", "SideEffectRecorded",
    "VersionMarkerRecorded", "MemoUpserted", "SearchAttributesUpserted",
})
_RECEIVER_EVENTS = frozenset({"SignalReceived", "UpdateApplied"})
# Recorded for the server's own bookkeeping; the reader never looks at them.
_IGNORED_EVENTS = frozenset({
    "ActivityRetryScheduled", "ActivityHeartbeatRecorded", "SignalApplied", "UpdateAccepted", "UpdateCompleted",
    "UpdateRejected", "MessageCursorAdvanced", "WorkflowCancelRequested", "WorkflowTaskScheduled",
    "WorkflowTaskStarted", "WorkflowTaskCompleted", "WorkflowTaskFailed", "SearchAttributesUpdated",
})
_NON_BLOCKING = (RecordSideEffect, RecordVersionMarker, UpsertMemo, UpsertSearchAttributes)


class SuspendedRun:
    """A replay paused at a blocking step (opaque to callers; see the module docstring)."""

    def __init__(self, replay: _Replay, cancel_requested: bool) -> None:
        self.replay = replay
        self.cancel_requested = cancel_requested
        self.workflow_class = replay.cls

    @property
    def event_count(self) -> int:
        """How many history events the state has consumed."""
        return len(self.replay.history.events)


def _suspend(replay: _Replay, cancel_requested: bool) -> Optional[SuspendedRun]:
    history = replay.history
    if (replay.blocked is None or replay.generator is None or history.waits or replay.scanner.wait_ids
            or replay.receivers or replay.trailing_wait is not None or history.has_terminal_event):
        return None
    return SuspendedRun(replay, cancel_requested)


def start(cls: type, history_events: List[Dict[str, Any]], start_input: List[Any], *,
          workflow_id: Optional[str] = None, run_id: str = "", payload_codec: Optional[str] = "avro",
          cancel_requested: bool = False) -> Tuple[ReplayResult, Optional[SuspendedRun]]:
    """A cold replay (same result as ``replay``) plus its suspended state when it can be resumed."""
    state = _Replay(cls, list(history_events), start_input, workflow_id=workflow_id, run_id=run_id,
                    codec=payload_codec, cancel_requested=cancel_requested)
    result = state.run()
    return result, _suspend(state, cancel_requested)


def _eligible(run: SuspendedRun, new_events: List[Dict[str, Any]]) -> bool:
    resolved = run.replay.scanner.resolved
    for event in new_events:
        kind = event_type(event) or ""
        if kind.startswith(UNSUPPORTED_PREFIXES) or kind in TERMINAL_RUN_EVENTS:
            return False
        payload = event_payload(event)
        if kind in _IGNORED_EVENTS:
            continue
        if kind in _RECEIVER_EVENTS:
            if payload.get("signal_name") == MESSAGE_STREAM_SIGNAL:
                return False
            continue
        if kind not in _STEP_EVENTS:
            return False
        sequence = sequence_of(payload)
        # A step without a sequence takes its place in the result queue (as in a cold read).
        if (sequence is not None and sequence in resolved) or group_membership(payload) is not None:
            return False
        if "parallel_group_id" in payload or "parallel_group_path" in payload:
            return False
        if kind.startswith("Timer") and _timeout_kind(payload, {}) is not None:
            return False
    return True


def _extend(replay: _Replay, new_events: List[Dict[str, Any]]) -> None:
    """Feed ``new_events`` into the index exactly as a cold read of the whole history would."""
    scanner, history = replay.scanner, replay.history
    _validate_codecs(new_events)
    collect_steps(new_events, scanner.types_by_sequence, scanner.details_by_sequence, scanner.wait_ids)
    collect_resolved(new_events, scanner.wait_ids, scanner.resolved)
    # Pending steps carry the merged details of every event of their sequence: rebuild them.
    kept = [step for step in history.pending_steps if step.sequence not in scanner.resolved]
    scanner.pending_added = {step.sequence for step in kept}
    history.pending_steps = []
    for step in kept:
        position = step.history_index if step.history_index is not None else 0
        event = history.events[position]
        history.pending_steps.append(scanner.step(step.shape, position, event_payload(event),
                                                  event_type(event) or "", step.sequence))
    offset = len(history.events)
    receivers = len(history.receivers)
    history.events.extend(new_events)
    scanner.scan(new_events, offset)
    replay.receivers.extend(history.receivers[receivers:])
    replay._result_base = replay.cursor
    replay._result_min = _suffix_minima(history.result_steps[replay.cursor:])
    replay._pending_min = min(history.pending_steps, key=lambda step: step.sequence, default=None)


def _consume_issued(replay: _Replay, issued: List[Any]) -> bool:
    """Match the commands the last task sent with their recorded results, as a cold replay would."""
    history = replay.history
    for command in issued:
        if not isinstance(command, _NON_BLOCKING) or not _quiet_boundary(replay):
            return False
        if replay.cursor >= len(history.results):
            return False
        step = history.result_steps[replay.cursor]
        if replay.next_unconsumed() is not step:
            return False
        check_step(command, step)
        recorded = history.results[replay.cursor]
        if isinstance(command, RecordSideEffect):
            if payloads.encode(recorded) != payloads.encode(command.result):
                return False
        elif (isinstance(command, RecordVersionMarker)
              and replay.recorded_version(step) != replay.versions.get(command.change_id)):
            return False
        replay.cursor += 1
        before = len(replay.receivers)
        replay.apply_due(before_result=False)
        if len(replay.receivers) != before:
            return False
    return True


def _quiet_boundary(replay: _Replay) -> bool:
    """The loop-top bookkeeping of a cold replay, when it applies no receiver."""
    replay.skip_duplicate_version_markers()
    before = len(replay.receivers)
    replay.apply_due(before_result=True)
    return len(replay.receivers) == before


def resume(run: SuspendedRun, new_events: List[Dict[str, Any]], *,
           cancel_requested: bool = False) -> Optional[Tuple[ReplayResult, Optional[SuspendedRun]]]:
    """Continue ``run`` with ``new_events`` (the history after ``run.event_count``).

    Returns the result a cold replay of the whole history gives plus the new suspended
    state, or ``None`` when continuity cannot be shown (``run`` is then spent: drop it).
    """
    replay = run.replay
    if cancel_requested != run.cancel_requested or not new_events or not _eligible(run, new_events):
        return None
    blocked = replay.blocked
    issued = [command for command in replay.pending if command is not blocked]
    replay.blocked = None
    try:
        _extend(replay, new_events)
        if not _consume_issued(replay, issued) or not _quiet_boundary(replay):
            return None
        replay.pending = []
        replay.ctx.logger.replaying = True
        if replay.next_unconsumed() is None:
            replay.go_live()
        replay.apply_due(before_result=False)
        outcome = replay.handle(blocked)
        if isinstance(outcome, _Stop):
            if outcome.commands is not None:
                return None
            replay.blocked = blocked
            commands = list(replay.pending)
        else:
            commands = replay.loop(outcome, first=False)
    except (Exception, WorkflowCancelled) as error:
        log.debug("sticky resume gave up (%s: %s); replaying cold", type(error).__name__, error)
        return None
    return replay.result(commands), _suspend(replay, cancel_requested)
