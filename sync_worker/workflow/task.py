"""Entry points the worker runtime calls: one workflow task, one query task (pure).

``execute_workflow_task`` returns either the commands to complete the task with, or the
body of a workflow-task *failure* (protocol §4.6) — never both. An empty command list
with no failure means "waiting for history" (the runtime sends the benign
``WorkflowTaskWaitingForHistory`` fail). Workflow-code exceptions are not task failures:
they are a ``fail_workflow`` command.

``execute_query_task`` replays committed history (no commands) and runs the
``@workflow.query`` handler; its failure carries one of the §6.3 reasons.
"""

from __future__ import annotations

import inspect
import json
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .. import payloads
from ..errors import (
    NonDeterministicReplayError,
    PayloadError,
    RuntimeCapabilityUnsupported,
    WorkflowEntryArgumentsMismatchError,
)
from .commands import (
    CompleteUpdate,
    FailUpdate,
    FailWorkflow,
    ScheduleActivity,
    StartChildWorkflow,
)
from .failures import fail_update_from_exception
from .history import event_payload, event_type
from .incremental import SuspendedRun, resume, start
from .local_activities import LocalActivityRunner
from .messages import ResumeContext
from .recorded import UpdateCall
from .registry import WorkflowRegistry
from .replayer import ReplayResult, _Replay, replay

__all__ = [
    "QueryTaskOutcome", "WorkflowTaskOutcome", "apply_update", "execute_query_task", "execute_workflow_task",
    "resume_workflow_task", "start_workflow_task",
]

log = logging.getLogger("sync_worker.workflow")


@dataclass
class WorkflowTaskOutcome:
    """``commands`` to complete the task with, or ``failure`` (the task-fail body).

    ``message_stream_cursors`` (``[{stream_name, through_position}]``) and
    ``message_stream_waits`` (``[{stream_name, after_position}]``) go into the completion
    body next to ``commands`` (protocol §4.5); both are empty unless the run uses streams.
    """

    commands: List[Dict[str, Any]]
    failure: Optional[Dict[str, Any]] = None
    message_stream_cursors: List[Dict[str, Any]] = field(default_factory=list)
    message_stream_waits: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class QueryTaskOutcome:
    """``value`` (and its Avro envelope) to answer the query with, or ``failure``."""

    value: Any = None
    failure: Optional[Dict[str, Any]] = None
    result_envelope: Optional[Dict[str, str]] = None


def _failure(message: str, error: Optional[BaseException] = None, **extra: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"message": message}
    if error is not None:
        body["type"] = type(error).__name__
        body["stack_trace"] = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


def _check_codec(codec: Any) -> str:
    if codec != payloads.CODEC:
        raise payloads.UnsupportedPayloadCodec(codec)
    return payloads.CODEC


def _capability_problem(commands: List[Any]) -> Optional[RuntimeCapabilityUnsupported]:
    # Cancellation policies need the 1.20 cooperative-cancellation machinery, which this
    # worker does not negotiate; refuse them instead of silently dropping them.
    for command in commands:
        if isinstance(command, ScheduleActivity) and command.cancellation_policy is not None:
            return RuntimeCapabilityUnsupported(
                "activity_cancellation_policy_not_supported",
                "Activity cancellation policies need cooperative cancellation, which sync_worker does not negotiate.")
        if isinstance(command, StartChildWorkflow) and (
                command.cancellation_policy is not None
                or command.policies().get("parent_close_policy") == "request_cancellation"):
            return RuntimeCapabilityUnsupported(
                "child_cancellation_policy_not_supported",
                "Child cancellation policies need cooperative cancellation, which sync_worker does not negotiate.")
    return None


def apply_update(
    cls: type, history: List[Dict[str, Any]], start_input: List[Any], update_id: str, *,
    workflow_id: Optional[str] = None, run_id: str = "", payload_codec: Optional[str] = "avro",
    resume: Optional[ResumeContext] = None,
) -> Any:
    """Replay to the current state and run the accepted update ``update_id`` (§4.9).

    In recorded mode (``messages``) the handler runs where the update's record will place it
    on every later replay: once the results recorded before it was accepted are consumed, at
    the step the run is blocked on. Otherwise (legacy) it runs on the replayed end state.
    Returns a ``CompleteUpdate`` or ``FailUpdate``; ``NonDeterministicReplayError`` propagates.
    """
    accepted = next((event_payload(event) for event in reversed(history)
                     if event_type(event) in ("UpdateAccepted", "update_accepted")
                     and event_payload(event).get("update_id") == update_id), None)
    if accepted is None:
        return FailUpdate(update_id, f"accepted update {update_id!r} was not present in workflow history",
                          exception_type="UpdateNotFound")
    name = accepted.get("update_name")
    if not isinstance(name, str) or not name:
        return FailUpdate(update_id, f"accepted update {update_id!r} is missing an update name",
                          exception_type="InvalidUpdate")
    try:
        codec = accepted.get("payload_codec", payload_codec)
        raw = accepted.get("arguments")
        args = [] if raw is None else payloads.decode_arguments(raw, codec=codec)
    except Exception as error:
        return fail_update_from_exception(update_id, "update argument decode failed", error)
    method = (getattr(cls, "__workflow_updates__", {}) or {}).get(name)
    if not method:
        return FailUpdate(update_id, f"unknown update {name!r}", exception_type="UnknownUpdate")
    call = UpdateCall(update_id, name, args)
    try:
        state = _Replay(cls, list(history), start_input, workflow_id=workflow_id, run_id=run_id,
                        codec=payload_codec, cancel_requested=False, resume=resume, update_call=call).run()
    except NonDeterministicReplayError:
        raise
    except Exception as error:
        return fail_update_from_exception(update_id, "workflow replay failed before update", error)
    if not call.applied:
        if state.commands and isinstance(state.commands[0], FailWorkflow):
            return FailUpdate(update_id, f"workflow replay failed before update: {state.commands[0].message}",
                              exception_type=state.commands[0].exception_type)
        handler = getattr(state.instance, method, None)
        if handler is None:
            return FailUpdate(update_id, f"unknown update {name!r}", exception_type="UnknownUpdate")
        try:
            call.result = handler(*args)
        except Exception as error:
            call.error = error
    if call.error is not None:
        return fail_update_from_exception(update_id, "update handler failed", call.error)
    result = call.result
    if inspect.isawaitable(result) or inspect.isgenerator(result):
        getattr(result, "close", lambda: None)()
        return fail_update_from_exception(update_id, "update handler failed", TypeError(
            f"update handler {name!r} must return a plain value, not an async or generator value"))
    return CompleteUpdate(update_id, result)


def _prepare(registry: WorkflowRegistry, task: Dict[str, Any]) -> Any:
    """``(cls, start_input, codec)`` for the task, or the ``WorkflowTaskOutcome`` failing it."""
    workflow_type = str(task.get("workflow_type") or "")
    codec = task.get("payload_codec")
    try:
        codec = _check_codec(codec)
        start_input = payloads.decode_arguments(task.get("arguments"), codec=codec)
    except (PayloadError, ValueError, TypeError) as error:
        return WorkflowTaskOutcome([], _failure(
            f"cannot decode workflow start input with codec {codec!r}: {error}. "
            "Verify the start input bytes match the declared codec and writer schema.", error))
    cls = registry.get(workflow_type)
    if cls is None:
        # (the runtime logs this once per type, naming what the worker registers)
        return WorkflowTaskOutcome([], {"message": f"no workflow registered for type {workflow_type!r}"})
    return cls, start_input, codec


def _update_outcome(cls: type, task: Dict[str, Any], history_events: List[Dict[str, Any]], update_id: str,
                    start_input: List[Any], codec: str, task_queue: str) -> WorkflowTaskOutcome:
    try:
        command = apply_update(cls, history_events, start_input, update_id, workflow_id=task.get("workflow_id"),
                               run_id=str(task.get("run_id") or ""), payload_codec=codec,
                               resume=ResumeContext.from_task(task))
        return WorkflowTaskOutcome([command.to_wire(task_queue)])
    except NonDeterministicReplayError as error:
        return WorkflowTaskOutcome([], _failure(f"workflow replay failed before update {update_id!r}: {error}",
                                                error))
    except Exception as error:
        return WorkflowTaskOutcome([], _failure(f"unhandled workflow task execution error: {error}", error))


def _result_outcome(result: ReplayResult, task_queue: str) -> WorkflowTaskOutcome:
    problem = _capability_problem(result.commands)
    if problem is not None:
        return WorkflowTaskOutcome([], _failure(str(problem), problem))
    try:
        commands = [command.to_wire(task_queue) for command in result.commands]
    except Exception as error:
        return WorkflowTaskOutcome([], _failure(f"unhandled workflow task execution error: {error}", error))
    return WorkflowTaskOutcome(commands, message_stream_cursors=result.message_stream_cursors,
                               message_stream_waits=result.message_stream_waits)


def _update_id(task: Dict[str, Any]) -> Optional[str]:
    update_id = task.get("workflow_update_id")
    return update_id if isinstance(update_id, str) and update_id else None


def _abandons(error: BaseException) -> bool:
    """The task must end unreported (its lease is gone): the runtime abandons it."""
    return getattr(error, "abandon_task", False) is True


def start_workflow_task(
    registry: WorkflowRegistry, task: Dict[str, Any], history_events: List[Dict[str, Any]], *, task_queue: str,
    local_activities: Optional[LocalActivityRunner] = None,
) -> Tuple[WorkflowTaskOutcome, Optional[SuspendedRun]]:
    """:func:`execute_workflow_task`, plus the suspended run a sticky cache may keep (or None)."""
    prepared = _prepare(registry, task)
    if isinstance(prepared, WorkflowTaskOutcome):
        return prepared, None
    cls, start_input, codec = prepared
    update_id = _update_id(task)
    if update_id is not None:
        return _update_outcome(cls, task, history_events, update_id, start_input, codec, task_queue), None
    try:
        result, state = start(cls, history_events, start_input, workflow_id=task.get("workflow_id"),
                              run_id=str(task.get("run_id") or ""), payload_codec=codec,
                              cancel_requested=task.get("cancel_requested") is True,
                              resume=ResumeContext.from_task(task), local_activities=local_activities,
                              command_identity=_command_identity(task))
    except Exception as error:
        if _abandons(error):
            raise
        log.warning("workflow task %s replay failed: %s", task.get("task_id"), error)
        reason = error.reason if isinstance(error, WorkflowEntryArgumentsMismatchError) else None
        return WorkflowTaskOutcome([], _failure(f"replay failed: {error}", error, reason=reason)), None
    outcome = _result_outcome(result, task_queue)
    return outcome, (state if outcome.failure is None else None)


def resume_workflow_task(
    registry: WorkflowRegistry, task: Dict[str, Any], state: SuspendedRun, new_events: List[Dict[str, Any]], *,
    task_queue: str, local_activities: Optional[LocalActivityRunner] = None,
) -> Optional[Tuple[WorkflowTaskOutcome, Optional[SuspendedRun]]]:
    """Run the task on a suspended run fed only ``new_events``; None: replay it cold instead.

    Update tasks, another workflow class, a task failure or anything unprovable give None.
    """
    if _update_id(task) is not None or registry.get(str(task.get("workflow_type") or "")) is not state.workflow_class:
        return None
    resumed = resume(state, new_events, cancel_requested=task.get("cancel_requested") is True,
                     context=ResumeContext.from_task(task), local_activities=local_activities,
                     command_identity=_command_identity(task))
    if resumed is None:
        return None
    outcome = _result_outcome(resumed[0], task_queue)
    return (outcome, resumed[1]) if outcome.failure is None else None


def execute_workflow_task(
    registry: WorkflowRegistry, task: Dict[str, Any], history_events: List[Dict[str, Any]], *, task_queue: str,
    local_activities: Optional[LocalActivityRunner] = None,
) -> WorkflowTaskOutcome:
    """Run one workflow task over its complete history; see the module docstring.

    ``local_activities`` runs the local activities the workflow reaches for the first time; a
    :class:`~sync_worker.errors.LocalActivityExecutionAborted` marked ``abandon_task`` (the
    task's lease is gone) propagates: nothing may be reported for the task.
    """
    prepared = _prepare(registry, task)
    if isinstance(prepared, WorkflowTaskOutcome):
        return prepared
    cls, start_input, codec = prepared
    update_id = _update_id(task)
    if update_id is not None:
        return _update_outcome(cls, task, history_events, update_id, start_input, codec, task_queue)
    try:
        result: ReplayResult = replay(cls, history_events, start_input, workflow_id=task.get("workflow_id"),
                                      run_id=str(task.get("run_id") or ""), payload_codec=codec,
                                      cancel_requested=task.get("cancel_requested") is True,
                                      resume=ResumeContext.from_task(task), local_activities=local_activities,
                                      command_identity=_command_identity(task))
    except Exception as error:
        if _abandons(error):
            raise
        log.warning("workflow task %s replay failed: %s", task.get("task_id"), error)
        reason = error.reason if isinstance(error, WorkflowEntryArgumentsMismatchError) else None
        return WorkflowTaskOutcome([], _failure(f"replay failed: {error}", error, reason=reason))
    return _result_outcome(result, task_queue)


def _command_identity(task: Dict[str, Any]) -> Optional[str]:
    """The task's durable command identity (workflow-stream directives): ``workflow_command_id``,
    else the task id, as the server forms it (``WorkflowStreamCommandProcessor``)."""
    for name in ("workflow_command_id", "task_id"):
        value = task.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _query_history(task: Dict[str, Any]) -> List[Dict[str, Any]]:
    events = list(task.get("history_events") or [])
    export = task.get("history_export")
    if isinstance(export, dict):
        exported = export.get("history_events") or export.get("events")
        if isinstance(exported, list) and len(exported) > len(events):
            events = list(exported)
    return events


def execute_query_task(registry: WorkflowRegistry, task: Dict[str, Any]) -> QueryTaskOutcome:
    """Answer one query task (§6.2/6.3) by replaying history and running the handler."""
    query_name = str(task.get("query_name") or "")
    codec = task.get("payload_codec")
    try:
        codec = _check_codec(codec)
    except PayloadError as error:
        return QueryTaskOutcome(failure=_failure(f"cannot decode query payload with codec {codec!r}: {error}.",
                                                 error, reason="query_payload_decode_failed"))
    workflow_type = str(task.get("workflow_type") or "")
    cls = registry.get(workflow_type)
    if cls is None:
        return QueryTaskOutcome(failure={"message": f"no workflow registered for type {workflow_type!r}",
                                         "reason": "query_workflow_type_not_registered",
                                         "type": "WorkflowTypeNotRegistered"})
    try:
        start_input = payloads.decode_arguments(task.get("workflow_arguments"), codec=codec)
        query_args = payloads.decode_arguments(task.get("query_arguments"), codec=codec)
    except PayloadError as error:
        return QueryTaskOutcome(failure=_failure(f"cannot decode query payload: {error}", error,
                                                 reason="query_payload_decode_failed"))
    try:
        state = replay(cls, _query_history(task), start_input, workflow_id=task.get("workflow_id"),
                       run_id=str(task.get("run_id") or ""), payload_codec=codec)
    except Exception as error:
        return QueryTaskOutcome(failure=_failure(f"workflow replay failed before query: {error}", error,
                                                 reason="query_workflow_state_unavailable"))
    if state.commands and isinstance(state.commands[0], FailWorkflow):
        return QueryTaskOutcome(failure={"message": f"workflow replay failed before query: {state.commands[0].message}",
                                         "reason": "query_workflow_state_unavailable", "type": "QueryFailed"})
    method = (getattr(cls, "__workflow_queries__", {}) or {}).get(query_name)
    handler = getattr(state.instance, method, None) if method else None
    if handler is None:
        return QueryTaskOutcome(failure={"message": f"unknown query {query_name!r}",
                                         "reason": "rejected_unknown_query", "type": "QueryFailed"})
    try:
        value = _run_handler(handler(*query_args))
    except Exception as error:
        return QueryTaskOutcome(failure=_failure(str(error) or f"query {query_name!r} failed", error,
                                                 reason="query_rejected"))
    try:
        json.dumps(value, allow_nan=False)
        envelope = payloads.envelope(value)
    except (TypeError, ValueError) as error:
        return QueryTaskOutcome(failure=_failure(f"cannot encode query result with codec 'avro': {error}", error,
                                                 reason="query_result_encode_failed"))
    return QueryTaskOutcome(value=value, result_envelope=envelope)


def _run_handler(result: Any) -> Any:
    """Finish an ``async def`` query handler that never really suspends, without an event loop."""
    if not inspect.iscoroutine(result):
        return result
    try:
        result.send(None)
    except StopIteration as done:
        return done.value
    result.close()
    raise TypeError("async query handlers may not await real I/O on sync_worker (no event loop runs here)")
