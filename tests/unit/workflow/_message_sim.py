"""A model of the server's message handling, to drive the replayer through random timings.

``Simulation`` records history the way the dev server does (and the engine:
``PendingMessageTask``, ``DefaultWorkflowTaskBridge``): a run has one workflow task at a time;
a task carries at most one message, the earliest unapplied one (signals and updates in
acceptance order); completing a signal task records ``SignalApplied`` for it and
``ConditionWaitSatisfied`` for the open wait before the commands' events; an update task
records ``UpdateApplied``/``UpdateCompleted``; an identical re-open on a task that carries no
signal records nothing. Messages may arrive while a task runs: they are recorded before its
completion but carried by a later task. Every task is executed by the real worker code
(``execute_workflow_task``), cold and, with ``sticky``, through the sticky cache's resume, and
both must agree. Pure: no sockets, no threads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from sync_worker import payloads
from sync_worker.workflow.registry import WorkflowRegistry
from sync_worker.workflow.task import execute_workflow_task, resume_workflow_task, start_workflow_task

from ._helpers import STARTED_AT

QUEUE = "q"


@dataclass
class Message:
    message_id: str
    kind: str  # "signal" | "update"
    name: str
    args: List[Any]


@dataclass
class Simulation:
    workflow_class: type
    rng: random.Random
    sticky: bool = False
    events: List[Dict[str, Any]] = field(default_factory=list)
    pending: List[Message] = field(default_factory=list)
    activities: Dict[int, Any] = field(default_factory=dict)  # sequence -> result to record
    next_sequence: int = 0
    open_wait: Optional[Dict[str, Any]] = None
    dirty: bool = True
    result: Any = None
    done: bool = False
    update_results: Dict[str, Any] = field(default_factory=dict)
    tasks: int = 0
    _ids: int = 0
    _state: Any = None
    _state_events: int = 0

    def __post_init__(self) -> None:
        self.registry = WorkflowRegistry([self.workflow_class])
        self.workflow_type = self.registry.names()[0]
        self.append("WorkflowStarted", workflow_type=self.workflow_type, timestamp=STARTED_AT)

    # -- recording -------------------------------------------------------------------------

    def append(self, kind: str, **payload: Any) -> None:
        self.events.append({"event_type": kind, "sequence": len(self.events) + 1, "payload": payload})

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    def send(self, kind: str, name: str, *args: Any) -> str:
        """A client sends a signal or an update (accepted at once, applied by a later task)."""
        message = Message(self._id("sig" if kind == "signal" else "upd"), kind, name, list(args))
        if kind == "signal":
            self.append("SignalReceived", signal_name=name, signal_id=message.message_id,
                        workflow_command_id=message.message_id, arguments=payloads.envelope(list(args)))
        else:
            self.append("UpdateAccepted", update_id=message.message_id, update_name=name,
                        arguments=payloads.envelope(list(args)))
        self.pending.append(message)
        return message.message_id

    def complete_activity(self) -> bool:
        if not self.activities:
            return False
        sequence = self.rng.choice(sorted(self.activities))
        value = self.activities.pop(sequence)
        self.append("ActivityCompleted", sequence=sequence, activity_type="echo", result=payloads.envelope(value))
        self.dirty = True
        return True

    # -- one workflow task -----------------------------------------------------------------

    def has_task(self) -> bool:
        return not self.done and (self.dirty or bool(self.pending))

    def run_task(self, during: Optional[List[Tuple[str, str, List[Any]]]] = None) -> None:
        """Lease a task, run the worker on the history it sees, record its completion."""
        carried = self.pending.pop(0) if self.pending else None
        self.dirty = False
        self.tasks += 1
        seen = list(self.events)
        task: Dict[str, Any] = {"task_id": f"t{self.tasks}", "workflow_type": self.workflow_type,
                                "workflow_id": "wf", "run_id": "run", "payload_codec": "avro",
                                "arguments": payloads.envelope([]),
                                "resume_source_kind": "workflow_history" if carried is None else
                                ("workflow_signal" if carried.kind == "signal" else "workflow_update")}
        if carried is not None and carried.kind == "signal":
            task["workflow_signal_id"] = carried.message_id
        if carried is not None and carried.kind == "update":
            task["workflow_update_id"] = carried.message_id
        commands = self._execute(task, seen)
        for kind, name, args in during or []:  # accepted while the task ran
            self.send(kind, name, *args)
        self._record(carried, commands)

    def _execute(self, task: Dict[str, Any], seen: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        cold = execute_workflow_task(self.registry, task, seen, task_queue=QUEUE)
        assert cold.failure is None, cold.failure
        if not self.sticky or task.get("workflow_update_id"):
            return cold.commands
        resumed = None
        if self._state is not None:
            resumed = resume_workflow_task(self.registry, task, self._state, seen[self._state_events:],
                                           task_queue=QUEUE)
        if resumed is None:
            outcome, self._state = start_workflow_task(self.registry, task, seen, task_queue=QUEUE)
        else:
            outcome, self._state = resumed
        self._state_events = len(seen)
        assert outcome.failure is None, outcome.failure
        assert outcome.commands == cold.commands, (outcome.commands, cold.commands)
        return outcome.commands

    def _record(self, carried: Optional[Message], commands: List[Dict[str, Any]]) -> None:
        if carried is not None and carried.kind == "update":
            (command,) = commands
            assert command["type"] in ("complete_update", "fail_update") and command["update_id"] == carried.message_id
            self.append("UpdateApplied", update_id=carried.message_id, update_name=carried.name,
                        arguments=payloads.envelope(carried.args), sequence=self.next_sequence + 1)
            self.append("UpdateCompleted", update_id=carried.message_id, update_name=carried.name,
                        sequence=self.next_sequence + 1)
            self.update_results[carried.message_id] = (
                payloads.decode_envelope(command["result"]) if command["type"] == "complete_update" else command)
            if self.open_wait is not None:
                self.dirty = True  # the handler may have satisfied the wait: wake the run
            return
        wait = self.open_wait
        reopen = next((c for c in commands if c["type"] == "open_condition_wait"), None)
        same = (wait is not None and reopen is not None and reopen.get("condition_key") == wait["condition_key"]
                and reopen.get("condition_definition_fingerprint") == wait["condition_definition_fingerprint"])
        if carried is not None:
            self.append("SignalApplied", signal_id=carried.message_id, workflow_command_id=carried.message_id,
                        signal_name=carried.name)
        if wait is not None and (carried is not None or not same):
            self.append("ConditionWaitSatisfied", **wait)
            self.open_wait = None
        for command in commands:
            kind = command["type"]
            if kind == "open_condition_wait":
                if self.open_wait is not None:
                    continue  # an identical re-open of a still-open wait records nothing
                self.next_sequence += 1
                self.open_wait = {"condition_wait_id": self._id("w"), "sequence": self.next_sequence,
                                  "condition_key": command.get("condition_key"),
                                  "condition_definition_fingerprint": command.get("condition_definition_fingerprint")}
                self.append("ConditionWaitOpened", **self.open_wait)
            elif kind == "schedule_activity":
                self.next_sequence += 1
                self.append("ActivityScheduled", sequence=self.next_sequence, activity_type=command["activity_type"])
                self.activities[self.next_sequence] = payloads.decode_envelope(command["arguments"])[0]
            elif kind == "start_timer":
                self.next_sequence += 1
                self.append("TimerScheduled", sequence=self.next_sequence, delay_seconds=command["delay_seconds"])
                self.append("TimerFired", sequence=self.next_sequence)  # timers fire at once here
                self.dirty = True
            elif kind == "complete_workflow":
                self.append("WorkflowCompleted", output=command["result"])
                self.result = payloads.decode_envelope(command["result"])
                self.done = True
            else:
                raise AssertionError(f"unexpected command {command}")

    # -- random driving --------------------------------------------------------------------

    def step(self, arrivals: List[Tuple[str, str, List[Any]]]) -> None:
        """One random move: a message arrives, an activity completes, or a task runs (and
        maybe some arrivals land while it runs)."""
        moves = []
        if arrivals:
            moves.append("arrive")
        if self.activities:
            moves.append("complete")
        if self.has_task():
            moves.append("task")
        move = self.rng.choice(moves)
        if move == "arrive":
            kind, name, args = _head(arrivals)
            self.send(kind, name, *args)
        elif move == "complete":
            self.complete_activity()
        else:
            during = [_head(arrivals) for _ in range(self.rng.randint(0, min(2, len(arrivals))))]
            self.run_task(during)

    def drive(self, arrivals: List[Tuple[str, str, List[Any]]], limit: int = 500) -> Any:
        arrivals = list(arrivals)
        for _ in range(limit):
            if self.done:
                return self.result
            if not arrivals and not self.activities and not self.has_task():
                raise AssertionError(f"run stranded: {[e['event_type'] for e in self.events]}")
            self.step(arrivals)
        raise AssertionError("run did not finish")


def _head(arrivals: List[Tuple[str, str, List[Any]]]) -> Tuple[str, str, List[Any]]:
    kind, name, args = arrivals.pop(0)
    return kind, name, args
