"""``WorkflowEnvironment``: the published SDK's in-process harness, on sync_worker's replayer.

No server, no worker, no clock: ``execute_workflow`` replays the workflow class over a history
the harness grows itself, resolving each yielded command at once: activities and children
against registered mocks (with their retry policy, see ``mocks``), timers fired, side effects,
version markers, memo and search-attribute upserts recorded; queued signals are appended
before each iteration. A ``continue_as_new`` starts the next link of the chain (``runs``).

Names, defaults, errors and recorded events follow ``durable_workflow.testing`` (2.12), so a
test written for it runs after swapping ``durable_workflow`` for ``sync_worker`` in its imports.
Beyond it: a condition wait with a timeout that no queued signal satisfies times out (its
timer fires), and ``ctx.upsert_memo`` is recorded (the SDK's harness refuses both with a
``TypeError``). Nexus operations are not implemented by sync_worker, so there is no Nexus mock.

For the real thing (a dev server with a virtual clock, real workers) see
:meth:`WorkflowEnvironment.start_time_skipping`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .. import payloads
from ..errors import DuplicateRegistrationError, WorkflowCancelled, WorkflowFailed, WorkflowTerminated
from ..workflow import (
    CompleteWorkflow,
    ContinueAsNew,
    FailWorkflow,
    RecordSideEffect,
    RecordVersionMarker,
    ScheduleActivity,
    StartChildWorkflow,
    StartTimer,
    UpsertMemo,
    UpsertSearchAttributes,
    WaitCondition,
    WorkflowRegistry,
    replay,
)
from ..workflow.definition import workflow_name
from .mocks import MockCallRecord, canned, outcome_event, run_mock

if TYPE_CHECKING:  # pragma: no cover
    from .live import LiveEnvironment

__all__ = ["MockCallRecord", "WorkflowEnvironment", "WorkflowRunRecord"]

#: Terminal exceptions ``execute_workflow`` may raise, importable from here as in the SDK.
TERMINAL_EXCEPTIONS = (WorkflowFailed, WorkflowCancelled, WorkflowTerminated)


@dataclass
class WorkflowRunRecord:
    """One run of an ``execute_workflow`` chain: its type, input, history and terminal command.

    ``terminal`` is the ``CompleteWorkflow`` (or the ``WorkflowFailed`` raised) of the last
    link, and the ``ContinueAsNew`` command of every earlier one.
    """

    workflow_type: str
    input: List[Any]
    history: List[Dict[str, Any]] = field(default_factory=list)
    terminal: Any = None


_NOT_YET = object()  # no terminal command in this iteration


class WorkflowEnvironment:
    """Drives a workflow to completion against registered mocks, in this thread.

    ``iteration_limit`` bounds the replays of one run, ``continue_as_new_limit`` the links of a
    chain (the first run is link 1), ``mock_attempt_limit`` the calls of one mock (a retry
    policy asking for more fails loudly rather than pretending its budget ran out).

    ``WorkflowEnvironment.start_time_skipping()`` and ``start_local()`` build the environments
    that run real workers against a dev server (:class:`~sync_worker.testing.LiveEnvironment`).
    """

    def __init__(self, *, iteration_limit: int = 1000, continue_as_new_limit: int = 50,
                 mock_attempt_limit: int = 100) -> None:
        if type(mock_attempt_limit) is not int or mock_attempt_limit < 1:
            raise ValueError("mock_attempt_limit must be a positive integer")
        self._iteration_limit = iteration_limit
        self._continue_as_new_limit = continue_as_new_limit
        self._mock_attempt_limit = mock_attempt_limit
        self._activity_results: Dict[str, Any] = {}
        self._activity_fns: Dict[str, Callable[..., Any]] = {}
        self._child_results: Dict[str, Any] = {}
        self._child_fns: Dict[str, Callable[..., Any]] = {}
        self._pending_signals: List[Tuple[str, List[Any]]] = []
        self._signals_by_run: Dict[int, List[Tuple[str, List[Any]]]] = {}
        self._workflows = WorkflowRegistry()
        self._runs: List[WorkflowRunRecord] = []
        self._mock_calls: List[MockCallRecord] = []

    # -- the live environments -------------------------------------------------------------
    @staticmethod
    def start_time_skipping(**options: Any) -> LiveEnvironment:
        """An in-process dev server on a virtual clock, a client and workers on demand (see ``live``)."""
        from .live import LiveEnvironment

        return LiveEnvironment.start(time_skipping=True, **options)

    @staticmethod
    def start_local(**options: Any) -> LiveEnvironment:
        """The same environment on the real clock."""
        from .live import LiveEnvironment

        return LiveEnvironment.start(time_skipping=False, **options)

    # -- mocks and signals -------------------------------------------------------------------
    def register_activity_result(self, name: str, result: Any) -> None:
        """Every call of activity ``name`` returns ``result``."""
        self._activity_results[name] = result

    def register_activity(self, name: str, fn: Callable[..., Any]) -> None:
        """Each attempt of activity ``name`` calls ``fn(*arguments)`` (takes precedence over a result)."""
        self._activity_fns[name] = fn

    def register_child_workflow_result(self, workflow_type: str, result: Any) -> None:
        """Every child run of ``workflow_type`` completes with ``result`` (replaces a callable mock)."""
        self._child_results[workflow_type] = result
        self._child_fns.pop(workflow_type, None)

    def register_child_workflow(self, workflow_type: str, fn: Callable[..., Any]) -> None:
        """Each attempt of a child of ``workflow_type`` calls ``fn(*arguments)``; raising fails the child."""
        self._child_fns[workflow_type] = fn
        self._child_results.pop(workflow_type, None)

    def register_workflow(self, workflow_cls: type) -> None:
        """Make ``workflow_cls`` a target for ``continue_as_new(workflow_type=...)``."""
        name = getattr(workflow_cls, "__workflow_name__", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{workflow_cls!r} is not a workflow class; decorate it with @workflow.defn(name=...) "
                            "first.")
        existing = self._workflows.get(name)
        if existing is not None and existing is not workflow_cls:
            raise DuplicateRegistrationError("workflow", name, existing, workflow_cls)
        self._workflows.register(workflow_cls)

    def signal(self, name: str, args: Optional[List[Any]] = None, *, run: Optional[int] = None) -> None:
        """Queue a signal: for the chain's current run (``run=None``) or for link ``run`` (1 = the first)."""
        entry = (name, list(args) if args is not None else [])
        if run is None:
            self._pending_signals.append(entry)
            return
        if run < 1:
            raise ValueError("run number must be 1 or greater")
        self._signals_by_run.setdefault(run, []).append(entry)

    # -- what the last execution did -----------------------------------------------------------
    @property
    def runs(self) -> List[WorkflowRunRecord]:
        """The runs of the latest ``execute_workflow`` chain, first to last."""
        return list(self._runs)

    @property
    def run_count(self) -> int:
        return len(self._runs)

    @property
    def mock_calls(self) -> List[MockCallRecord]:
        """Every activity / child mock call of the latest chain, in order."""
        return list(self._mock_calls)

    # -- execution -----------------------------------------------------------------------------
    def execute_workflow(self, workflow_cls: type, *args: Any, run_id: str = "test-run") -> Any:
        """Run ``workflow_cls`` (and its continue-as-new chain) to the end; returns the last result.

        Raises ``WorkflowFailed`` when the run fails, ``KeyError`` for an activity or child
        without a mock, ``RuntimeError`` past ``iteration_limit`` or ``continue_as_new_limit``.
        """
        self._runs = []
        self._mock_calls = []
        self.register_workflow(workflow_cls)
        current_cls, current_args, current_run_id = workflow_cls, list(args), run_id
        for link in range(1, self._continue_as_new_limit + 1):
            record = WorkflowRunRecord(workflow_type=workflow_name(current_cls), input=list(current_args))
            self._runs.append(record)
            run = _RunState(record.history)
            if link == 1:
                self._drain_signals(run)
            for queued in self._signals_by_run.pop(link, []):
                run.append(_signal_event(*queued))
            terminal, continuation = self._drive(current_cls, current_args, current_run_id, run, record)
            if continuation is not None:
                record.terminal = continuation
                record.history.append(_continued_event(continuation))
                current_cls = self._next_class(continuation, current_cls)
                current_args = list(continuation.arguments)
                current_run_id = f"{current_run_id}-continued"
                continue
            record.terminal = terminal
            if isinstance(terminal, WorkflowFailed):
                raise terminal
            return terminal.result if isinstance(terminal, CompleteWorkflow) else terminal
        raise RuntimeError(f"workflow chained continue-as-new past the {self._continue_as_new_limit} link limit; "
                           "raise continue_as_new_limit or tighten the workflow's termination condition.")

    def _drive(self, cls: type, args: List[Any], run_id: str, run: _RunState,
               record: WorkflowRunRecord) -> Tuple[Any, Optional[ContinueAsNew]]:
        for _ in range(self._iteration_limit):
            self._drain_signals(run)
            outcome = replay(cls, list(run.history), list(args), run_id=run_id)
            terminal, continuation = self._apply(outcome.commands, run)
            if continuation is not None or terminal is not _NOT_YET:
                return terminal, continuation
        raise RuntimeError(f"workflow {record.workflow_type!r} did not terminate within {self._iteration_limit} "
                           "iterations; check for missing activity mocks or signals that never satisfy a wait.")

    def _apply(self, commands: List[Any], run: _RunState) -> Tuple[Any, Optional[ContinueAsNew]]:
        for command in commands:
            if isinstance(command, ContinueAsNew):
                return _NOT_YET, command
            if isinstance(command, FailWorkflow):
                return WorkflowFailed(command.message, command.exception_type), None
            if isinstance(command, CompleteWorkflow):
                return command, None
            self._resolve(command, run)
        return _NOT_YET, None

    def _resolve(self, command: Any, run: _RunState) -> None:
        if isinstance(command, ScheduleActivity):
            fn = self._activity_fns.get(command.activity_type)
            if fn is None:
                if command.activity_type not in self._activity_results:
                    raise KeyError(f"no mock registered for activity {command.activity_type!r}; call "
                                   "env.register_activity_result() or env.register_activity().")
                fn = canned(self._activity_results[command.activity_type])
            run.append(self._call("activity", command.activity_type, fn, command.arguments, command.retry_policy,
                                  run.next_sequence()))
        elif isinstance(command, StartChildWorkflow):
            fn = self._child_fns.get(command.workflow_type)
            if fn is None:
                if command.workflow_type not in self._child_results:
                    raise KeyError(f"no mock registered for child workflow {command.workflow_type!r}; call "
                                   "env.register_child_workflow_result() or env.register_child_workflow().")
                fn = canned(self._child_results[command.workflow_type])
            run.append(self._call("child_workflow", command.workflow_type, fn, command.arguments,
                                  command.retry_policy, run.next_sequence()))
        elif isinstance(command, StartTimer):
            run.append({"event_type": "TimerFired",
                        "payload": {"sequence": run.next_sequence(), "delay_seconds": command.delay_seconds}})
        elif isinstance(command, RecordSideEffect):
            run.append({"event_type": "SideEffectRecorded", "payload": {
                "sequence": run.next_sequence(), "result": payloads.envelope(command.result), "payload_codec": "avro"}})
        elif isinstance(command, UpsertSearchAttributes):
            run.append({"event_type": "SearchAttributesUpserted",
                        "payload": {"sequence": run.next_sequence(), "attributes": dict(command.attributes)}})
        elif isinstance(command, RecordVersionMarker):
            wire = command.to_wire("")
            run.append({"event_type": "VersionMarkerRecorded", "payload": {
                "sequence": run.next_sequence(), **{key: wire[key] for key in
                                                    ("change_id", "version", "min_supported", "max_supported")}}})
        elif isinstance(command, UpsertMemo):
            entries = command.to_wire("")["entries"]
            run.append({"event_type": "MemoUpserted", "payload": {"sequence": run.next_sequence(), "entries": entries}})
        elif isinstance(command, WaitCondition):
            self._time_out_wait(command, run)
        else:
            raise TypeError(f"unsupported command in test harness: {command!r}")

    def _call(self, kind: str, name: str, fn: Callable[..., Any], arguments: List[Any], retry_policy: Any,
              sequence: int) -> Dict[str, Any]:
        record = MockCallRecord(kind=kind, name=name, run_number=self.run_count)
        self._mock_calls.append(record)
        result, failure = run_mock(record, fn, list(arguments), retry_policy, self._mock_attempt_limit)
        return outcome_event(kind, name, sequence, result, failure)

    def _time_out_wait(self, command: WaitCondition, run: _RunState) -> None:
        """A wait no queued signal satisfied: with a timeout it times out, without one it never ends."""
        if command.timeout_seconds is None:
            raise RuntimeError("the workflow waits on a condition (no timeout) that no queued signal satisfies; "
                               "queue the signal with env.signal() before execute_workflow().")
        wire = command.to_wire("")
        sequence = run.next_sequence()
        wait_id = f"test-wait-{sequence}"
        opened = {key: wire[key] for key in ("condition_key", "condition_definition_fingerprint", "timeout_seconds")
                  if wire.get(key) is not None}
        run.append({"event_type": "ConditionWaitOpened",
                    "payload": {"condition_wait_id": wait_id, "sequence": sequence, **opened}})
        run.append({"event_type": "TimerFired", "payload": {
            "sequence": sequence, "timer_kind": "condition_timeout", "condition_wait_id": wait_id,
            "condition_key": wire.get("condition_key"), "delay_seconds": wire.get("timeout_seconds")}})

    def _drain_signals(self, run: _RunState) -> None:
        while self._pending_signals:
            run.append(_signal_event(*self._pending_signals.pop(0)))

    def _next_class(self, continuation: ContinueAsNew, current: type) -> type:
        target = continuation.workflow_type
        if not target or target == getattr(current, "__workflow_name__", None):
            return current
        found = self._workflows.get(target)
        if found is None:
            raise KeyError(f"continue_as_new targeted workflow type {target!r} but no matching class is registered; "
                           "call env.register_workflow(YourWorkflow) before execute_workflow().")
        return found


class _RunState:
    """The history of one run and its workflow sequence counter (each step takes the next one)."""

    def __init__(self, history: List[Dict[str, Any]]) -> None:
        self.history = history
        self._sequence = 0

    def next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence

    def append(self, event: Dict[str, Any]) -> None:
        self.history.append(event)


def _signal_event(name: str, args: List[Any]) -> Dict[str, Any]:
    return {"event_type": "SignalReceived",
            "payload": {"signal_name": name, "value": payloads.envelope(args), "payload_codec": "avro"}}


def _continued_event(command: ContinueAsNew) -> Dict[str, Any]:
    payload: Dict[str, Any] = {"arguments": payloads.envelope(list(command.arguments)), "payload_codec": "avro"}
    if command.workflow_type is not None:
        payload["workflow_type"] = command.workflow_type
    if command.task_queue is not None:
        payload["queue"] = command.task_queue
    return {"event_type": "WorkflowContinuedAsNew", "payload": payload}
