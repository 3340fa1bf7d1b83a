"""Resuming a suspended replay with only the new events (the engine of the sticky cache).

A cold replay (``replayer.replay``) runs the workflow from its first line over the whole
history, so a run of N steps costs O(N^2) over its life. When a task ends with the run
blocked -- on an activity, timer or child, a condition wait (``wait_condition``, or a
message stream's ``receive``) or a parallel group -- :func:`start` keeps the replay itself:
the instance, its suspended ``run`` generator, the history index and the reader's
bookkeeping, as a :class:`SuspendedRun`. :func:`resume` feeds the next task's *new* events
into that state and continues the generator from the yield it stopped at.

Resuming must give exactly what a cold replay of the whole history would give. The index is
extended as a cold read of the longer history would build it (``_extend``), and every
decision the suspended code already took must read the same from it; otherwise ``resume``
returns ``None`` and the caller replays cold (and drops the state). The hazards, and how
each one is handled:

* **Receiver bindings** (which wait a signal/update belongs to) can change with later
  events (a re-open takes over receivers recorded before it): the binder is fed in order
  (``wait_index``) and a receiver the code already applied must keep its binding.
* **Condition-wait decisions** read the recorded opens, their resolution (satisfied, timed
  out), where they ended and whether a re-open follows. Each is logged (``waiting``) and
  re-asked for the waits the new events touch; a wait that was true at once must not now
  meet a recorded open (a cold replay would match it there); new input bound to a wait the
  code already passed is refused. A wait that ended the task by re-opening is decided again
  from where that decision started (``rewait``). Predicates must be side-effect free.
* **Parallel groups**: a fully resolved group's results are put back in yielded order. The
  new events may complete a group; its results must all still be ahead of the cursor (they
  are, while the code waits on the group), and a group that was already complete must not
  gain members. A group the task ended on is re-emitted, as a cold replay does.
* **Message streams**: deliveries are receivers applied in history order into the stream
  inbox, like signals; a cursor *checkpoint* (applied before the workflow starts in a cold
  replay) refuses resume.
* Timers an older server recorded for a condition timeout (aliases) are found by the same
  in-order pass; an alias or a new open whose sequence the history already used refuses.

It also refuses when:

* a new event is a start, terminal or unknown kind, an unsupported feature, or a step
  event for a step that was already resolved;
* the commands the previous task sent are not the next recorded results, in order and with
  the same values (a side effect's recorded bytes, a version marker's recorded version);
* a receiver would have to be applied at a point the suspended code already ran past, or
  one was left unapplied when the task ended;
* the cancellation flag changed, or anything raises (workflow-code failures included: the
  cold replay then produces the failure with its own stack).

``tests/unit/workflow/test_incremental.py`` splits every golden and replay-regression history
(and histories recorded on the dev server: ``tests/e2e/test_sticky_shapes.py``) at every
event and every task boundary and checks both paths agree byte for byte.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import payloads
from ..errors import WorkflowCancelled
from .commands import RecordSideEffect, RecordVersionMarker, UpsertMemo, UpsertSearchAttributes, WaitCondition
from .history import (
    TERMINAL_RUN_EVENTS,
    UNSUPPORTED_PREFIXES,
    Digested,
    Receiver,
    RecordedStep,
    digest,
    event_payload,
    event_type,
)
from .local_activities import LocalActivityRunner, RecordLocalActivity
from .matching import check_step
from .messages import ResumeContext, current_message, message_id
from .reader import _validate_codecs, collect_resolved, collect_steps, reorder_parallel_groups
from .recorded import LIVE
from .replayer import ReplayResult, _is_stream, _Replay, _Stop
from .scopes import refuse_scoped_history
from .select import CancelDurableOperation
from .streams import is_cursor_checkpoint

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
_WAIT_EVENTS = frozenset({"ConditionWaitOpened", "ConditionWaitSatisfied", "ConditionWaitTimedOut"})
# A selection's verdict and cancellations: read into the index like a cold read does (``select``).
_SELECTION_EVENTS = frozenset({"SelectionResolved", "SelectionOperationCancelled"})
_NON_BLOCKING = (RecordSideEffect, RecordVersionMarker, UpsertMemo, UpsertSearchAttributes, RecordLocalActivity)


class SuspendedRun:
    """A replay paused at a blocking step (opaque to callers; see the module docstring)."""

    def __init__(self, replay: _Replay, cancel_requested: bool) -> None:
        self.replay = replay
        self.cancel_requested = cancel_requested
        self.workflow_class = replay.cls
        #: recorded mode: the message the last task carried (its record must come next)
        self.carried: Optional[str] = None

    @property
    def event_count(self) -> int:
        """How many history events the state has consumed."""
        return len(self.replay.history.events)


def _suspend(replay: _Replay, cancel_requested: bool) -> Optional[SuspendedRun]:
    if replay.blocked is None or replay.generator is None or replay.receivers or replay.history.has_terminal_event:
        return None
    return SuspendedRun(replay, cancel_requested)


def start(cls: type, history_events: List[Dict[str, Any]], start_input: List[Any], *,
          workflow_id: Optional[str] = None, run_id: str = "", payload_codec: Optional[str] = "avro",
          cancel_requested: bool = False, resume: Optional[ResumeContext] = None,
          local_activities: Optional[LocalActivityRunner] = None, command_identity: Optional[str] = None,
          ) -> Tuple[ReplayResult, Optional[SuspendedRun]]:
    """A cold replay (same result as ``replay``) plus its suspended state when it can be resumed."""
    state = _Replay(cls, list(history_events), start_input, workflow_id=workflow_id, run_id=run_id,
                    codec=payload_codec, cancel_requested=cancel_requested, resume=resume,
                    local_activities=local_activities, command_identity=command_identity)
    carried = current_message(state.history, resume) if state.recorded else None
    result = state.run()
    suspended = _suspend(state, cancel_requested)
    if suspended is not None and carried is not None:
        suspended.carried = carried.message_id
    return result, suspended


def _eligible(run: SuspendedRun, new_events: List[Digested]) -> bool:
    scanner = run.replay.scanner
    resolved, known, wait_ids = scanner.resolved, scanner.types_by_sequence, scanner.wait_ids
    for _, digested_kind, _, sequence in new_events:
        kind = digested_kind or ""
        if kind.startswith(UNSUPPORTED_PREFIXES) or kind in TERMINAL_RUN_EVENTS:
            return False
        if kind in _IGNORED_EVENTS or kind in _RECEIVER_EVENTS or kind in _SELECTION_EVENTS:
            continue
        if kind in _WAIT_EVENTS:
            # A new open must not take a sequence the history already used: that would change
            # how the earlier events of that sequence read.
            if kind == "ConditionWaitOpened" and sequence is not None and sequence in known:
                return False
            continue
        if kind not in _STEP_EVENTS:
            return False
        # A step without a sequence takes its place in the result queue (as in a cold read).
        if sequence is not None and (sequence in resolved or (sequence in wait_ids and not kind.startswith("Timer"))):
            return False
    return True


def _touched_waits(replay: _Replay, new_events: List[Digested], new_receivers: List[Receiver]) -> Set[str]:
    wait_ids = replay.scanner.wait_ids
    touched = {receiver.wait_id for receiver in new_receivers if receiver.wait_id is not None}
    for _, _, payload, sequence in new_events:
        wait_id = payload.get("condition_wait_id")
        if isinstance(wait_id, str) and wait_id:
            touched.add(wait_id)
        if sequence is not None and sequence in wait_ids:
            touched.add(wait_ids[sequence])
    return touched


def _extend(replay: _Replay, new_events: List[Dict[str, Any]],
            digested: Optional[List[Digested]] = None) -> Optional[List[Receiver]]:
    """Feed ``new_events`` (``digested``: their ``history.digest``) into the index exactly as a cold
    read of the whole history would; returns the new receivers, or None when the earlier events
    would now read differently."""
    scanner, history = replay.scanner, replay.history
    refuse_scoped_history(new_events)  # (caught by ``resume``: the cold replay then refuses the task)
    if digested is None:
        digested = digest(new_events)
    _validate_codecs(digested)
    known = scanner.types_by_sequence
    reused = {sequence for _, kind, _, sequence in digested
              if kind == "TimerScheduled" and sequence is not None and sequence in known}
    touched_sequences = {sequence for _, _, _, sequence in digested}
    collect_steps(digested, known, scanner.details_by_sequence, scanner.wait_ids)
    aliases = scanner.aliases.feed(digested, scanner.wait_ids)
    if reused & set(aliases):
        return None
    scanner.wait_ids.update(aliases)
    collect_resolved(digested, scanner.wait_ids, scanner.resolved)
    offset = len(history.events)
    # Receivers the code already applied must keep the wait they were bound to (legacy rules).
    unsettled = {index: scanner.binder.binding(index) for index in scanner.binder.unsettled()}
    scanner.binder.feed(digested, offset, scanner.wait_ids)
    if not replay.recorded and any(scanner.binder.binding(index) != wait_id for index, wait_id in unsettled.items()):
        return None
    for index, (_, kind, _, _) in enumerate(digested, offset):
        if kind in _RECEIVER_EVENTS:
            scanner.bindings[index] = scanner.binder.binding(index)
    # Pending steps carry the merged details of every event of their sequence: rebuild them.
    kept = [step for step in history.pending_steps if step.sequence not in scanner.resolved]
    scanner.pending_added = {step.sequence for step in kept}
    history.pending_steps = []
    for step in kept:
        history.pending_steps.append(_rebuilt(replay, step))
    for position in range(max(0, replay.wait_cursor - 1), len(history.wait_steps)):
        if history.wait_steps[position].sequence in touched_sequences:
            history.wait_steps[position] = _rebuilt(replay, history.wait_steps[position])
    receivers = len(history.receivers)
    results = len(history.results)
    history.events.extend(new_events)
    scanner.scan(digested, offset)
    new_receivers = history.receivers[receivers:]
    if any(_is_stream(receiver) and is_cursor_checkpoint(receiver.args) for receiver in new_receivers):
        return None  # a cold replay seeds checkpoints before the workflow starts
    groups = scanner.group_slots(results)
    for key, slots in groups.items():
        old = [slot for slot in slots if slot < results]
        if len(old) >= key[3] or min(slots) < replay.cursor:
            return None  # a complete group gaining members, or results the code already took
    reorder_parallel_groups(history, scanner.memberships, groups)
    for position in range(replay.cursor, results):
        if history.result_steps[position].sequence in touched_sequences:
            history.result_steps[position] = _rebuilt(replay, history.result_steps[position])
    if not replay.recorded:
        replay.receivers.extend(new_receivers)
    replay.reindex()
    return new_receivers


def _rebuilt(replay: _Replay, step: RecordedStep) -> RecordedStep:
    position = step.history_index if step.history_index is not None else 0
    event = replay.history.events[position]
    return replay.scanner.step(step.shape, position, event_payload(event), event_type(event) or "", step.sequence)


def _consume_issued(replay: _Replay, issued: List[Any]) -> bool:
    """Match the commands the last task sent with their recorded results, as a cold replay would."""
    history = replay.history
    for command in issued:
        if isinstance(command, CancelDurableOperation):
            # the cancellation a cold replay finds recorded (and then issues nothing)
            if replay.recorded_cancellation(command.handle) is None:
                return False
            continue
        if not isinstance(command, _NON_BLOCKING) or not _quiet_boundary(replay):
            return False
        if replay.cursor >= len(history.results):
            return False
        step = history.result_steps[replay.cursor]
        if replay.next_unconsumed() is not step:
            return False
        check_step(command, step)
        recorded = history.results[replay.cursor]
        if not _same_outcome(replay, command, step, recorded):
            return False
        replay.cursor += 1
        before = len(replay.receivers)
        if replay.recorded:
            replay.apply_before_yield()
        else:
            replay.apply_due_legacy(before_result=False)
        if len(replay.receivers) != before:
            return False
    return True


def _same_outcome(replay: _Replay, command: Any, step: RecordedStep, recorded: Any) -> bool:
    """Whether the recorded result is what the suspended code was given for ``command``."""
    if isinstance(command, RecordSideEffect):
        return payloads.encode(recorded) == payloads.encode(command.result)
    if isinstance(command, RecordVersionMarker):
        return replay.recorded_version(step) == replay.versions.get(command.change_id)
    if isinstance(command, RecordLocalActivity):
        return command.same_as_recorded(recorded)
    return True


def _quiet_boundary(replay: _Replay) -> bool:
    """The loop-top bookkeeping of a cold replay, when it applies no receiver."""
    replay.skip_duplicate_version_markers()
    if replay.recorded:
        return True
    before = len(replay.receivers)
    replay.apply_due_legacy(before_result=True)
    return len(replay.receivers) == before


def _abandons(error: BaseException) -> bool:
    return getattr(error, "abandon_task", False) is True


def resume(run: SuspendedRun, new_events: List[Dict[str, Any]], *, cancel_requested: bool = False,
           context: Optional[ResumeContext] = None, local_activities: Optional[LocalActivityRunner] = None,
           command_identity: Optional[str] = None) -> Optional[Tuple[ReplayResult, Optional[SuspendedRun]]]:
    """Continue ``run`` with ``new_events`` (the history after ``run.event_count``).

    Returns the result a cold replay of the whole history gives plus the new suspended
    state, or ``None`` when continuity cannot be shown (``run`` is then spent: drop it).
    ``context`` is the new task's resume context (the message it carries).
    """
    replay = run.replay
    if cancel_requested != run.cancel_requested or not new_events:
        return None
    digested = digest(new_events)
    if not _eligible(run, digested):
        return None
    # This task's runner (a kept state must never run a local activity under an old task's lease),
    # and this task's command identity (new workflow-stream directives carry it, as cold).
    replay.local_activities = local_activities
    replay.ctx.command_identity = command_identity
    if local_activities is not None:
        local_activities.begin_replay()
    if replay.recorded or context is not None:
        return resume_recorded(run, new_events, cancel_requested, context, digested)
    if any(kind == "SignalApplied" and message_id(payload, "signal_id") for _, kind, payload, _ in digested):
        return None  # the first application record: a cold replay now places messages by the records
    blocked = replay.blocked
    issued = replay.pending[:replay.blocked_mark]
    # A wait that ended the task by re-opening a recorded open is decided again from there.
    rewaiting = (isinstance(blocked, WaitCondition) and bool(replay.wait_visits)
                 and replay.wait_visits[-1].decision == "live" and replay.wait_visits[-1].command is blocked)
    replay.blocked = None
    try:
        old_waits = len(replay.history.waits)
        new_receivers = _extend(replay, new_events, digested)
        if new_receivers is None:
            return None
        # A new receiver placed by its position is applied, cold, at the first yield after its
        # results: that must be the suspended yield itself (legacy rules).
        if any(receiver.wait_id is None and (receiver.result_index < replay.cursor or (
                receiver.result_index == replay.cursor and replay.yields_since_result != 1))
               for receiver in new_receivers):
            return None
        touched = _touched_waits(replay, digested, new_receivers)
        if rewaiting:
            # The rerun open is decided below; keep it out of the re-asked log.
            last = replay.wait_visits[-1]
            replay.wait_visits.pop()
            ok = replay.waits_still_hold(old_waits, new_receivers, touched)
            replay.wait_visits.append(last)
        else:
            ok = replay.waits_still_hold(old_waits, new_receivers, touched)
        if not ok or not _consume_issued(replay, issued) or not _quiet_boundary(replay):
            return None
        replay.pending = []
        replay.ctx.logger.replaying = True
        if replay.next_unconsumed() is None:
            replay.go_live()
        before = len(replay.receivers)
        replay.apply_due_legacy(before_result=False)
        if rewaiting:
            if len(replay.receivers) != before:
                return None
            again = replay.rewait(blocked)
            if again is None:
                return None
            outcome = again
        else:
            outcome = replay.handle(blocked)
        if isinstance(outcome, _Stop):
            if outcome.commands is not None:
                return None
            replay.blocked = blocked
            replay.blocked_mark = 0
            commands = list(replay.pending)
        else:
            commands = replay.loop(outcome, first=False)
    except (Exception, WorkflowCancelled) as error:
        if _abandons(error):
            raise
        log.debug("sticky resume gave up (%s: %s); replaying cold", type(error).__name__, error)
        return None
    return replay.result(commands), _suspend(replay, cancel_requested)


def resume_recorded(run: SuspendedRun, new_events: List[Dict[str, Any]], cancel_requested: bool,
                    context: Optional[ResumeContext], digested: Optional[List[Digested]] = None,
                    ) -> Optional[Tuple[ReplayResult, Optional[SuspendedRun]]]:
    """Recorded mode (``messages``): every message sits where its record says, so a resume only
    has to see the last task's message recorded next, and every newer one due no earlier than
    the step the run was suspended at; then the suspended yield is handled again."""
    replay = run.replay
    if not replay.recorded:
        return None  # the state was built by the legacy rules: a cold replay switches over
    blocked, issued = replay.blocked, replay.pending[:replay.blocked_mark]
    replay.blocked = None
    try:
        before = len(replay.history.applied)
        if _extend(replay, new_events, digested) is None:
            return None
        added = list(replay.history.applied[before:])
        if run.carried is not None:
            if not added or added[0].message_id != run.carried:
                return None  # the last task's message was not recorded as applied by it
            added.pop(0)
        current = current_message(replay.history, context)
        if current is not None:
            added.append(current)
        # Each new message must be due at the suspended yield or later: the recorded step that
        # yield consumes (the open a live wait stopped at), or past every recorded step.
        if replay.live_wait is not None:
            here: float = replay.history.wait_steps[replay.live_wait[1]].sequence
        else:
            step = replay.next_unconsumed()
            here = step.sequence if step is not None else LIVE
        if any(receiver.due_sequence < here for receiver in added):
            return None
        replay.receivers.extend(added)
        if not _consume_issued(replay, issued) or not _quiet_boundary(replay):
            return None
        replay.pending = []
        replay.ctx.logger.replaying = True
        if replay.next_unconsumed() is None:
            replay.go_live()
        if isinstance(blocked, WaitCondition) and replay.live_wait is not None:
            outcome = replay.wait_again(blocked)
            if outcome is None:
                return None
        else:
            replay.live_wait = None
            replay.apply_before_yield()
            outcome = replay.handle(blocked)
        if isinstance(outcome, _Stop):
            if outcome.commands is not None:
                return None
            replay.blocked = blocked
            replay.blocked_mark = 0
            commands = list(replay.pending)
        else:
            commands = replay.loop(outcome, first=False)
    except (Exception, WorkflowCancelled) as error:
        if _abandons(error):
            raise
        log.debug("sticky resume gave up (%s: %s); replaying cold", type(error).__name__, error)
        return None
    suspended = _suspend(replay, cancel_requested)
    if suspended is not None:
        suspended.carried = current.message_id if current is not None else None
    return replay.result(commands), suspended
