"""The deterministic replayer: history in, commands out (protocol §4.3, §13.3, §13.4).

``replay(cls, events, start_input, ...)`` builds a fresh instance, runs its ``run``
generator against the recorded history and returns the commands of this task:

* each yielded step is matched with the next recorded one (shape and recorded details);
  a recorded result is sent back in, a recorded failure is thrown in;
* past the end of history, non-blocking commands (side effect, version marker, memo and
  search-attribute upserts) are collected and the code continues; the first blocking
  command (activity, timer, child, condition wait, parallel group) ends the task;
* a step that is already scheduled but unresolved is not issued again: the task ends
  with what it has, often an empty list ("waiting for history");
* signals/updates are applied in history order (see ``reader``); message-stream deliveries
  (the reserved signal) go to ``ctx``'s stream inbox, cursor checkpoints also up front;
* when the workflow returns or raises, every recorded step must have been consumed.

A mismatch raises ``NonDeterministicReplayError`` (a workflow-*task* failure); an
exception escaping workflow code becomes a ``FailWorkflow`` command.
"""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from ..errors import (
    ActivityFailed,
    ChildWorkflowFailed,
    InvalidWorkflowDefinition,
    LocalActivityExecutionAborted,
    NonDeterministicReplayError,
    WorkflowCancelled,
    WorkflowEntryArgumentsMismatchError,
)
from .commands import (
    Command,
    CompleteWorkflow,
    ContinueAsNew,
    RecordSideEffect,
    RecordVersionMarker,
    ScheduleActivity,
    StartChildWorkflow,
    StartTimer,
    UpsertMemo,
    UpsertSearchAttributes,
    WaitCondition,
)
from .context import WorkflowContext
from .definition import MESSAGE_STREAM_SIGNAL, validate_entrypoint, workflow_name
from .failures import fail_workflow_from_exception
from .history import HistoryIndex, Receiver, RecordedStep, UnsupportedReplayHistory
from .local_activities import LocalActivityRunner, RecordLocalActivity, refuse_local_in_group
from .matching import annotate_group, check_step, first_failure, group_leaves, reshape
from .messages import ResumeContext, current_message, update_arrival
from .positions import code_position
from .reader import read_history_scanner
from .recorded import LIVE, RecordedWaits, UpdateCall
from .select import CancelDurableOperation, DurableOperationHandle, SelectGroup
from .selection_replay import Selections
from .streams import is_cursor_checkpoint
from .unyielded import forgotten_yield
from .versions import VersionMarkers
from .waiting import Action, ConditionWaits, Stop, WaitVisit

__all__ = ["BLOCKING_COMMANDS", "ReplayResult", "replay"]

#: The commands a suspended run can wait on and be resumed from (``incremental``), besides
#: a parallel group (a list).
BLOCKING_COMMANDS = (ScheduleActivity, StartTimer, StartChildWorkflow, WaitCondition, SelectGroup,
                     DurableOperationHandle)

@dataclass
class ReplayResult:
    """The commands of this task plus the replayed instance (for queries and updates)."""

    commands: List[Command]
    instance: Any
    context: WorkflowContext

    @property
    def message_stream_cursors(self) -> List[Dict[str, Any]]:
        return self.context.stream_inbox.cursor_report()

    @property
    def message_stream_waits(self) -> List[Dict[str, Any]]:
        return self.context.stream_inbox.wait_report()


_Stop = Stop
_Action = Action


class _Replay(ConditionWaits, RecordedWaits, VersionMarkers, Selections):
    def __init__(self, cls: type, events: List[Dict[str, Any]], start_input: List[Any], *,
                 workflow_id: Optional[str], run_id: str, codec: Optional[str], cancel_requested: bool,
                 resume: Optional[ResumeContext] = None, update_call: Optional[UpdateCall] = None,
                 local_activities: Optional[LocalActivityRunner] = None,
                 command_identity: Optional[str] = None) -> None:
        validate_entrypoint(cls)
        #: runs local activities on first execution (None: a replay that must not run them)
        self.local_activities = local_activities
        self.cls = cls
        self.start_input = list(start_input)
        self.scanner = read_history_scanner(events, codec=codec, workflow_id=workflow_id, run_id=run_id)
        self.history: HistoryIndex = self.scanner.index
        start = self.history.start_time if events else datetime.now(timezone.utc)
        self.ctx = WorkflowContext(workflow_id=workflow_id or _workflow_id_from(events), run_id=run_id,
                                   start_time=start, clock_error=self.history.clock_error,
                                   cancel_requested=cancel_requested)
        self.ctx.command_identity = command_identity  # workflow-stream directives (``output_streams``)
        self.instance = cls()
        # Recorded mode (``messages``): the server tells us what each task applied. Legacy
        # histories keep the SDK's position and wait-binding rules (``waiting``).
        self.recorded = resume is not None or self.history.records_applications
        self.update_call = update_call
        self.live_wait: Optional[Tuple[WaitCondition, int]] = None
        self._warned_fingerprints: Dict[str, bool] = {}
        self.receivers: List[Receiver] = self._message_queue(resume) if self.recorded else list(self.history.receivers)
        #: yields since the result cursor last moved (1: the current yield is the first after it)
        self.yields_since_result = 0
        self._last_cursor = 0
        for receiver in self.receivers:
            # Checkpoints predate this run (continue-as-new): seed them before the first wait.
            if _is_stream(receiver) and is_cursor_checkpoint(receiver.args):
                self.ctx.stream_inbox.accept(receiver.args)
        self.cursor = 0
        self.wait_cursor = 0
        self.selection_cursor = 0
        self.consumed_selections: Set[int] = set()
        self.authored_handles: Dict[int, DurableOperationHandle] = {}
        self.pending: List[Command] = []
        self.versions: Dict[str, int] = {}
        self.trailing_wait: Optional[WaitCondition] = None
        self.trailing_epoch = 0
        self.reindex()
        # Where the run is suspended (the sticky cache resumes it there, see ``incremental``).
        self.generator: Any = None
        self.blocked: Any = None
        self.blocked_mark = 0  # pending[:blocked_mark] came before the blocked command
        self.last_line: Optional[Tuple[Any, int]] = None  # (code, line) of run()'s latest yield
        # What the condition-wait decisions read (see ``waiting``).
        self.wait_visits: List[WaitVisit] = []
        self.visits_by_id: Dict[str, List[int]] = {}
        self.unrecorded_true: List[Tuple[int, WaitCondition]] = []

    def _message_queue(self, resume: Optional[ResumeContext]) -> List[Receiver]:
        """Recorded mode: the applied messages in order, then the one this task carries."""
        queue = list(self.history.applied)
        current = current_message(self.history, resume)
        if current is not None:
            queue.append(current)
        call = self.update_call
        if call is not None:  # (legacy mode runs it on the end state instead: ``task.apply_update``)
            arrived = update_arrival(self.history, call.update_id)
            if arrived is not None:
                arrived.name, arrived.args = call.name, list(call.args)
                queue.append(arrived)
        return queue

    # -- recorded-step bookkeeping --------------------------------------------------

    def reindex(self) -> None:
        """Rebuild the lookup of the earliest unconsumed step from the cursors (after history grew)."""
        history = self.history
        self._result_base = self.cursor  # _result_min[i] covers result_steps[_result_base + i:]
        self._result_min = _suffix_minima(history.result_steps[self.cursor:])
        self._wait_base = max(0, self.wait_cursor - 1)  # likewise for _wait_min and wait_steps
        self._wait_min = _suffix_minima(history.wait_steps[self._wait_base:])
        pending_min: Optional[RecordedStep] = None  # the lowest sequence, the earliest on ties (as ``min`` picks)
        for step in history.pending_steps:
            if pending_min is None or step.sequence < pending_min.sequence:
                pending_min = step
        self._pending_min = pending_min

    def unconsumed(self) -> List[RecordedStep]:
        """Every recorded step not consumed yet, lowest sequence first (results, waits, pending on ties)."""
        history = self.history
        steps = (history.result_steps[self.cursor:] + history.wait_steps[self.wait_cursor:]
                 + history.pending_steps)
        return sorted(steps, key=lambda step: step.sequence)

    def next_unconsumed(self) -> Optional[RecordedStep]:
        """``unconsumed()[0]`` in constant time (it is asked on every yield)."""
        best = self._result_min[self.cursor - self._result_base]
        # the lowest sequence, the earliest of results, waits, pending on ties (as ``min`` picks)
        for step in (self._wait_min[self.wait_cursor - self._wait_base], self._pending_min):
            if step is not None and (best is None or step.sequence < best.sequence):
                best = step
        return best

    def check_new(self, command: Any, offset: int = 0) -> None:
        """A command past the result queue must still agree with any recorded open step."""
        if offset == 0:
            step = self.next_unconsumed()
            if step is not None:
                check_step(command, step)
            return
        steps = self.unconsumed()
        if offset < len(steps):
            check_step(command, steps[offset])

    def take_result(self, command: Any) -> Any:
        check_step(command, self.history.result_steps[self.cursor])
        value = self.history.results[self.cursor]
        self.cursor += 1
        return value

    def go_live(self) -> None:
        self.ctx.logger.replaying = False

    # -- receivers ------------------------------------------------------------------

    def apply(self, receiver: Receiver) -> None:
        if _is_stream(receiver):
            self.ctx.stream_inbox.accept(receiver.args)
            return
        registry = getattr(self.cls, "__workflow_signals__" if receiver.kind == "signal" else "__workflow_updates__",
                           {}) or {}
        method = registry.get(receiver.name)
        handler = getattr(self.instance, method, None) if method else None
        call = self.update_call
        if call is not None and receiver.kind == "update" and receiver.message_id == call.update_id:
            if handler is None:
                call.applied = True
                call.error = LookupError(f"unknown update {receiver.name!r}")
                return
            self.call_update(handler, receiver)
            return
        if handler is None:
            if receiver.kind == "signal":
                return  # an unknown signal is ignored, as the contract says
            raise TypeError(f"unknown update {receiver.name!r} in workflow history")
        result = handler(*receiver.args)
        if inspect.isawaitable(result) or inspect.isgenerator(result):
            getattr(result, "close", lambda: None)()
            raise InvalidWorkflowDefinition(
                f"unsupported_workflow_handler_result: {self.cls.__qualname__}.{method} returned an async or "
                "generator value; handlers must return plain values."
            )

    def apply_due_legacy(self, *, before_result: bool) -> None:
        while self.receivers:
            head = self.receivers[0]
            if head.wait_id is not None:
                return
            if head.result_index > self.cursor or (before_result and head.result_index == self.cursor):
                return
            if head.selection_index > self.selection_cursor or (
                    before_result and head.selection_index and head.selection_index == self.selection_cursor):
                return  # recorded after a selection's verdict: once the code took it
            self.apply(self.receivers.pop(0))

    def apply_for_wait(self, wait_id: Optional[str]) -> None:
        if wait_id is None:
            return
        terminal = self.history.wait_terminal_index.get(wait_id)
        if terminal is not None:
            while self.receivers and self.receivers[0].history_index < terminal:
                self.apply(self.receivers.pop(0))
            return
        bound = [i for i, receiver in enumerate(self.receivers) if receiver.wait_id == wait_id]
        if bound:
            boundary = bound[0] + 1
            while boundary < len(self.receivers) and self.receivers[boundary].wait_id == wait_id:
                boundary += 1
            for _ in range(boundary):
                self.apply(self.receivers.pop(0))

    # -- the drive loop -------------------------------------------------------------

    def run(self) -> ReplayResult:
        name = workflow_name(self.cls)
        try:
            signature = _run_signature(self.instance.run)
        except (TypeError, ValueError):
            raise WorkflowEntryArgumentsMismatchError(name, "signature_unavailable") from None
        # Positional arguments bind by count alone: a count that bound once for this function binds again.
        function = getattr(self.instance.run, "__func__", None)
        counts = _BOUND_COUNTS.get(function) if function is not None else None
        if counts is None or len(self.start_input) not in counts:
            try:
                signature.bind(self.ctx, *self.start_input)
            except TypeError:
                raise WorkflowEntryArgumentsMismatchError(name, "argument_binding_failed") from None
            if function is not None:
                _BOUND_COUNTS.setdefault(function, set()).add(len(self.start_input))
        try:
            return self.result(self.drive())
        except NonDeterministicReplayError as error:
            if error.code_position is None:
                error.code_position = code_position(self.generator, self.last_line, self.cls)
            raise
        except (InvalidWorkflowDefinition, UnsupportedReplayHistory, LocalActivityExecutionAborted):
            raise
        except (Exception, WorkflowCancelled) as error:
            return self.result([*self.pending, fail_workflow_from_exception(error)])

    def result(self, commands: List[Command]) -> ReplayResult:
        return ReplayResult(commands, self.instance, self.ctx)

    def drive(self) -> List[Command]:
        if self.local_activities is not None:
            self.local_activities.begin_replay()
        generator = self.instance.run(self.ctx, *self.start_input)
        if not inspect.isgenerator(generator):
            return self.finish(generator)
        self.generator = generator
        return self.loop(("send", None), first=True)

    def loop(self, action: Tuple[str, Any], *, first: bool) -> List[Command]:
        generator = self.generator
        while True:
            self.skip_duplicate_version_markers()
            if not first and not self.recorded:
                self.apply_due_legacy(before_result=True)
            if self.next_unconsumed() is None:
                # Nothing recorded is left: the code about to run executes for the first time.
                self.go_live()
            try:
                command = generator.throw(action[1]) if action[0] == "throw" else generator.send(action[1])
            except StopIteration as stop:
                return self.finish(stop.value)
            frame = generator.gi_frame
            self.last_line = (frame.f_code, frame.f_lineno)  # where run() ended, if it ends with a mismatch
            self.ctx.issued_commands.release(command)
            first = False
            if self.cursor != self._last_cursor:
                self._last_cursor, self.yields_since_result = self.cursor, 0
            self.yields_since_result += 1
            if self.recorded:
                self.apply_before_yield()
            else:
                self.apply_due_legacy(before_result=False)
            mark = len(self.pending)
            outcome = self.handle(command)
            if isinstance(outcome, _Stop):
                resumable = outcome.commands is None and isinstance(command, (list, *BLOCKING_COMMANDS))
                self.blocked = command if resumable else None
                self.blocked_mark = mark
                return outcome.commands if outcome.commands is not None else list(self.pending)
            action = outcome

    def finish(self, value: Any) -> List[Command]:
        if inspect.isawaitable(value) or inspect.isasyncgen(value):
            getattr(value, "close", lambda: None)()
            raise InvalidWorkflowDefinition(
                f"unsupported_workflow_result: {self.cls.__qualname__}.run returned an async value; "
                "use a plain result or yield durable commands."
            )
        forgotten = forgotten_yield(value, self.ctx.issued_commands.leftovers(), self.cls.__qualname__)
        if forgotten is not None:
            raise InvalidWorkflowDefinition(forgotten)
        if self.recorded:
            self.apply_at_step(LIVE)
        else:
            self.apply_due_legacy(before_result=False)
            self.skip_trailing_reopens()
        terminal: Command = value if isinstance(value, ContinueAsNew) else CompleteWorkflow(result=value)
        step = self.next_unconsumed()
        shape = "continue as new" if isinstance(value, ContinueAsNew) else "complete workflow"
        if step is not None:
            raise NonDeterministicReplayError(step.sequence, shape, step.event_types)
        members = self.unconsumed_selections()
        if members:
            left = self.history.selection.steps[members[0]][0]
            raise NonDeterministicReplayError(left.sequence, shape, left.event_types)
        return [*self.pending, terminal]

    def handle(self, command: Any) -> _Action:
        if isinstance(command, RecordVersionMarker):
            return ("send", self.resolve_version(command))
        if isinstance(command, list):
            return self.parallel(command)
        if isinstance(command, ContinueAsNew):
            return _Stop(self.finish(command))
        if isinstance(command, (RecordSideEffect, UpsertMemo, UpsertSearchAttributes)):
            return self.non_blocking(command)
        if isinstance(command, RecordLocalActivity):
            return self.local_activity(command)
        if isinstance(command, SelectGroup):
            return self.select(command)
        if isinstance(command, DurableOperationHandle):
            return self.await_member(command)
        if isinstance(command, CancelDurableOperation):
            return self.cancel_member(command)
        if isinstance(command, WaitCondition):
            return self.wait_in_order(command) if self.recorded else self.wait(command)
        if isinstance(command, (ScheduleActivity, StartTimer, StartChildWorkflow)):
            if self.cursor < len(self.history.results):
                self.at_step(self.history.result_steps[self.cursor])
                value = self.take_result(command)
                return ("throw", value) if isinstance(value, (ActivityFailed, ChildWorkflowFailed)) else ("send", value)
            self.go_live()
            self.check_new(command)
            step = self.next_unconsumed()
            self.at_step(step)
            if step is None:
                self.pending.append(command)
            # Otherwise it is already scheduled and unresolved: never issue it twice.
            return _Stop()
        raise TypeError(f"workflow yielded unsupported command: {command!r}")

    def at_step(self, step: Optional[RecordedStep], last: Optional[int] = None) -> None:
        """Recorded mode: the messages due at the step this yield consumes (None: a new command)."""
        if self.recorded:
            self.apply_at_step(None if step is None else (last if last is not None else step.sequence))

    def non_blocking(self, command: Union[RecordSideEffect, UpsertMemo, UpsertSearchAttributes]) -> _Action:
        if self.cursor < len(self.history.results):
            self.at_step(self.history.result_steps[self.cursor])
            return ("send", self.take_result(command))
        self.go_live()
        self.at_step(None)
        self.check_new(command)
        if isinstance(command, RecordSideEffect):
            if command.effect is not None:
                try:
                    command.result = command.effect()
                except Exception as error:
                    return ("throw", error)
                command.effect = None
            self.pending.append(command)
            return ("send", command.result)
        self.pending.append(command)
        return ("send", None)

    def local_activity(self, command: RecordLocalActivity) -> _Action:
        """A recorded local activity replays its outcome; a new one runs now, in this task."""
        command.check_admissible()
        if self.cursor < len(self.history.results):
            self.at_step(self.history.result_steps[self.cursor])
            value = self.take_result(command)
            return ("throw", value) if isinstance(value, ActivityFailed) else ("send", value)
        self.go_live()
        self.at_step(None)
        self.check_new(command)
        self.pending.append(command)
        if self.local_activities is None:
            return _Stop()  # a query or update replay: the state before it
        value = command.observed = self.local_activities.run(command)
        return ("throw", value) if isinstance(value, ActivityFailed) else ("send", value)

    def parallel(self, group: List[Any]) -> _Action:
        leaves = group_leaves(group)
        if not leaves:
            return ("send", [])
        steps = self.unconsumed()
        base = steps[0].sequence if steps else self.history.max_sequence() + len(self.pending) + 1
        annotated, shape = annotate_group(group, base)
        needed = len(annotated)
        for leaf in leaves:
            if isinstance(leaf, RecordLocalActivity):
                leaf.check_admissible()
        if self.cursor + needed > len(self.history.results):
            refuse_local_in_group(leaves)
        if self.cursor + needed <= len(self.history.results):
            members = self.history.result_steps[self.cursor:self.cursor + needed]
            self.at_step(members[0], max(step.sequence for step in members))
            for offset, leaf in enumerate(annotated):
                check_step(leaf, self.history.result_steps[self.cursor + offset])
            values = self.history.results[self.cursor:self.cursor + needed]
            self.cursor += needed
            failure = first_failure(values)
            return ("throw", failure) if failure is not None else ("send", reshape(shape, values))
        self.go_live()
        self.at_step(steps[0] if steps else None, base + needed - 1)
        for offset, leaf in enumerate(annotated):
            self.check_new(leaf, offset)
        # A partly resolved group re-emits every member with the same group metadata;
        # the server ignores members it already recorded (protocol §4.5.1).
        self.pending.extend(annotated)
        return _Stop()


def _is_stream(receiver: Receiver) -> bool:
    return receiver.kind == "signal" and receiver.name == MESSAGE_STREAM_SIGNAL


def _suffix_minima(steps: List[RecordedStep]) -> List[Optional[RecordedStep]]:
    """``out[i]`` is the lowest-sequence step of ``steps[i:]`` (the earliest one on ties)."""
    out: List[Optional[RecordedStep]] = [None] * (len(steps) + 1)
    for index in range(len(steps) - 1, -1, -1):
        best = out[index + 1]
        out[index] = steps[index] if best is None or steps[index].sequence <= best.sequence else best
    return out


def _workflow_id_from(events: List[Dict[str, Any]]) -> str:
    for event in events:
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        assert isinstance(payload, dict)
        found = payload.get("workflow_id") or event.get("workflow_id")
        if found is not None:
            return str(found)
    return ""


def replay(
    cls: type,
    history_events: List[Dict[str, Any]],
    start_input: List[Any],
    *,
    workflow_id: Optional[str] = None,
    run_id: str = "",
    payload_codec: Optional[str] = "avro",
    cancel_requested: bool = False,
    resume: Optional[ResumeContext] = None,
    local_activities: Optional[LocalActivityRunner] = None,
    command_identity: Optional[str] = None,
) -> ReplayResult:
    """Replay ``cls`` over the complete history; see the module docstring.

    ``resume`` is the task's resume context (``messages.ResumeContext.from_task``): which
    message the task carries. Without one, and with no application record in the history,
    messages are placed by the legacy rules. ``local_activities`` runs the local activities the
    workflow reaches for the first time (``local_activities``); without it the replay stops there.
    ``command_identity`` is the task's durable command identity (workflow-stream directives);
    without one, the run id.
    """
    return _Replay(cls, list(history_events), start_input, workflow_id=workflow_id, run_id=run_id,
                   codec=payload_codec, cancel_requested=cancel_requested, resume=resume,
                   local_activities=local_activities, command_identity=command_identity).run()


#: ``run``'s signature per workflow class's function (computed once, not on every replay)
_SIGNATURES: weakref.WeakKeyDictionary[Any, inspect.Signature] = weakref.WeakKeyDictionary()


#: the start-input lengths ``run``'s signature was seen to bind, per workflow class's function
_BOUND_COUNTS: weakref.WeakKeyDictionary[Any, Set[int]] = weakref.WeakKeyDictionary()


def _run_signature(run: Any) -> inspect.Signature:
    function = getattr(run, "__func__", None)
    if function is None:
        return inspect.signature(run)
    found = _SIGNATURES.get(function)
    if found is None:
        found = _SIGNATURES[function] = inspect.signature(run)
    return found
