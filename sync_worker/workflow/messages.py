"""Where each signal and update is applied: the history's own record (recorded mode).

The server applies messages (signals, updates, message-stream deliveries) one per workflow
task, in the order they were accepted, and records each application: ``SignalApplied`` when
the task that carried the signal completes, ``UpdateApplied`` when the update task completes
(the engine's ``PendingMessageTask`` / ``DefaultWorkflowTaskBridge``; protocol §4.9). The
poll tells the worker which message a task carries (``resume_source_kind`` and
``workflow_signal_id`` / ``workflow_update_id``). A message that arrives while a task runs
is recorded (``SignalReceived``) before that task's completion, but it is not that task's:
it is applied by a later task, at the point *that* task reached.

So a message is applied, in every replay, exactly where the task that applied it applied it:

* in the order of the application records;
* once the workflow has consumed the results recorded before the message arrived (the
  results the applying task saw first, as the published SDK orders receivers), and
* not before the step the run was blocked on when that task started: the blocking step
  recorded last before the application record (``due_sequence``; 0 = the first yield).

All three are read from events before the application record, so a longer history never
moves a message; a message that has no record yet is applied only by the task that carries
it (the *current* message). Histories with no application records at all (older servers,
the SDK's golden corpus) keep the SDK's position and wait-binding rules (``wait_index``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .history import HistoryIndex, Receiver, text

__all__ = ["BLOCKING_STEP_EVENTS", "ResumeContext", "current_message", "message_id", "note_application",
           "note_arrival", "note_blocking_step", "note_update_accepted", "update_arrival"]

#: Events that record a step the run blocks on (the timer only when it is a user timer).
BLOCKING_STEP_EVENTS = frozenset({"ActivityScheduled", "ActivityStarted", "TimerScheduled", "ChildWorkflowScheduled",
                                  "ChildRunStarted", "ConditionWaitOpened"})


@dataclass(frozen=True)
class ResumeContext:
    """What the poll says a workflow task carries (the server's resume context).

    ``kind`` is ``resume_source_kind`` (``workflow_signal``, ``workflow_update``, ...);
    ``signal_id`` the carried signal (``workflow_signal_id``, else ``resume_source_id``);
    ``update_id`` the carried update (``workflow_update_id``).
    """

    kind: Optional[str]
    signal_id: Optional[str] = None
    update_id: Optional[str] = None

    @classmethod
    def from_task(cls, task: Mapping[str, Any]) -> Optional[ResumeContext]:
        """The task's context, or None when the server sends none (then replay is legacy)."""
        if "resume_source_kind" not in task:
            return None
        kind = text(task.get("resume_source_kind"))
        signal_id = text(task.get("workflow_signal_id"))
        if signal_id is None and kind == "workflow_signal":
            signal_id = text(task.get("resume_source_id"))
        return cls(kind, signal_id, text(task.get("workflow_update_id")))


def message_id(payload: Mapping[str, Any], key: str) -> Optional[str]:
    """A signal's id (``signal_id``, else ``workflow_command_id``) or an update's (``update_id``)."""
    if key == "update_id":
        return text(payload.get("update_id"))
    return text(payload.get("signal_id")) or text(payload.get("workflow_command_id"))


def note_blocking_step(index: HistoryIndex, sequence: Optional[int]) -> None:
    if sequence is not None and sequence > index.blocked_sequence:
        index.blocked_sequence = sequence


def note_arrival(index: HistoryIndex, receiver: Receiver) -> None:
    """A signal was accepted (``SignalReceived``): unapplied until its record."""
    if receiver.message_id is not None and receiver.message_id not in index.unapplied:
        index.unapplied[receiver.message_id] = receiver


def note_update_accepted(index: HistoryIndex, update_id: Optional[str], results_before: int,
                         position: int) -> None:
    """An update was accepted (``UpdateAccepted``): it arrived after ``results_before`` results."""
    if update_id is not None and update_id not in index.unapplied:
        index.unapplied[update_id] = Receiver(position, results_before, "update", "", [], message_id=update_id)


def note_application(index: HistoryIndex, identifier: Optional[str], update: Optional[Receiver] = None) -> None:
    """``SignalApplied`` (``update`` None) or ``UpdateApplied`` (``update`` built from it)."""
    if update is None:
        if identifier is None:
            return  # a record that names no signal (older servers): the legacy rules place signals
        index.records_applications = True
        receiver = index.unapplied.pop(identifier, None)
        if receiver is None:
            return  # applied twice, or never accepted in this run: nothing to apply again
    else:
        arrived = index.unapplied.pop(identifier, None) if identifier is not None else None
        receiver = update
        if arrived is not None:
            receiver.result_index = arrived.result_index
    receiver.due_sequence = index.blocked_sequence
    receiver.wait_id = None
    index.applied.append(receiver)


def current_message(index: HistoryIndex, resume: Optional[ResumeContext]) -> Optional[Receiver]:
    """The signal this task carries (not recorded yet), placed at the run's blocked step.

    A signal task names its signal; a server that says only ``workflow_signal`` carries the
    earliest unapplied signal (its queue order). Other tasks carry none; an update task's
    update is the task's own handler call (``task.apply_update``, placed by
    :func:`update_arrival`).
    """
    if resume is None or resume.kind != "workflow_signal":
        return None
    signals = [receiver for receiver in index.unapplied.values() if receiver.kind == "signal"]
    if resume.signal_id is not None:
        wanted = next((receiver for receiver in signals if receiver.message_id == resume.signal_id), None)
    else:
        wanted = signals[0] if signals else None
    if wanted is None:
        return None
    return Receiver(wanted.history_index, wanted.result_index, wanted.kind, wanted.name, wanted.args,
                    message_id=wanted.message_id, due_sequence=index.blocked_sequence)


def update_arrival(index: HistoryIndex, update_id: str) -> Optional[Receiver]:
    """The accepted, not yet applied update ``update_id``: results before it, the blocked step."""
    arrived = index.unapplied.get(update_id)
    if arrived is None or arrived.kind != "update":
        return None
    return Receiver(arrived.history_index, arrived.result_index, "update", arrived.name, arrived.args,
                    message_id=update_id, due_sequence=index.blocked_sequence)
