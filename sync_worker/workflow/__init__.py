"""Workflow authoring API and the deterministic replayer (pure: no I/O, no threads, no event loop).

Authoring (the published SDK's names; change ``from durable_workflow import workflow`` to
``from sync_worker import workflow``)::

    @workflow.defn(name="greeter")
    class Greeter:
        @workflow.signal("approve")
        def approve(self, who): self.who = who

        def run(self, ctx, name):
            greeting = yield ctx.schedule_activity("greet", [name])
            return greeting

Interface for the worker runtime (a fresh workflow instance per replay)::

    registry = WorkflowRegistry([Greeter])            # name -> class; DuplicateRegistrationError on clash
    outcome = execute_workflow_task(registry, task, history_events, task_queue="queue")
    outcome.commands   # list[dict]: complete the task with these (non-empty), or
    outcome.failure    # dict {"message", "type"?, "stack_trace"?, "reason"?}: fail the task with it
    # commands == [] and failure is None -> "waiting for history"
    #   (send the WorkflowTaskWaitingForHistory fail, protocol §4.5)
    outcome.message_stream_cursors, outcome.message_stream_waits   # lists; send with the commands

    answer = execute_query_task(registry, query_task)  # QueryTaskOutcome(value, failure, result_envelope)
    # failure = {"message", "reason", "type"?, "stack_trace"?}; reason is one of
    # rejected_unknown_query, query_rejected, query_workflow_state_unavailable,
    # query_payload_decode_failed, query_workflow_type_not_registered, query_result_encode_failed

    workflow_definition_fingerprint(cls) -> "sha256:<hex>"   # registration, protocol §3.1
    workflow_command_contract(cls) -> dict                    # registration, protocol §3.1

``task`` is the poll's task object (§4.2) and ``history_events`` the complete history
(the runtime pages it in first). Task failures cover §4.6: unknown type, bad codec or
undecodable start input, ``NonDeterministicReplayError``, ``WorkflowEntryArgumentsMismatchError``
(with ``reason``), ``WorkflowPayloadDecodeError``, unsupported history features and
unsupported cancellation policies. ``workflow.replay(cls, history, args)`` is the lower-level
replayer, handy in tests (see docs/workflows.md).
"""

from __future__ import annotations

from ..errors import (
    ActivityFailed,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    NonDeterministicReplayError,
    SagaCompensationFailed,
    WorkflowCancelled,
)
from .commands import (
    Command,
    CompleteUpdate,
    CompleteWorkflow,
    ContinueAsNew,
    FailUpdate,
    FailWorkflow,
    RecordSideEffect,
    RecordVersionMarker,
    ScheduleActivity,
    StartChildWorkflow,
    StartTimer,
    UpsertMemo,
    UpsertSearchAttributes,
    WaitCondition,
)
from .context import Saga, WorkflowContext
from .contract import workflow_command_contract, workflow_definition_fingerprint
from .definition import defn, query, signal, update, update_validator
from .history import UnsupportedReplayHistory
from .local_activities import RecordLocalActivity
from .output_streams import (
    WorkflowStreamAppendItem,
    WorkflowStreamAppendResult,
    WorkflowStreamDescription,
    WorkflowStreamItem,
    WorkflowStreamPage,
)
from .policies import ActivityRetryPolicy, CancellationPolicy, ChildWorkflowRetryPolicy, ParentClosePolicy
from .registry import WorkflowRegistry
from .replay_check import HistoryCheck, Replayer, ReplayReport
from .replayer import ReplayResult, replay
from .select import CancelDurableOperation, DurableOperationHandle, SelectGroup, SelectionResult
from .streams import MessageStream, MessageStreamMessage
from .task import QueryTaskOutcome, WorkflowTaskOutcome, apply_update, execute_query_task, execute_workflow_task

#: What the replayer implements, advertised at registration (in the published SDK's order).
WORKFLOW_CAPABILITIES = ("durable_selection", "local_activities")

__all__ = [
    "WORKFLOW_CAPABILITIES",
    "ActivityFailed",
    "ActivityRetryPolicy",
    "CancelDurableOperation",
    "DurableOperationHandle",
    "CancellationPolicy",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowRetryPolicy",
    "ChildWorkflowTerminated",
    "Command",
    "CompleteUpdate",
    "CompleteWorkflow",
    "ContinueAsNew",
    "FailUpdate",
    "FailWorkflow",
    "HistoryCheck",
    "MessageStream",
    "MessageStreamMessage",
    "NonDeterministicReplayError",
    "ParentClosePolicy",
    "QueryTaskOutcome",
    "RecordLocalActivity",
    "RecordSideEffect",
    "RecordVersionMarker",
    "ReplayReport",
    "ReplayResult",
    "Replayer",
    "Saga",
    "SelectGroup",
    "SelectionResult",
    "WorkflowStreamAppendItem",
    "WorkflowStreamAppendResult",
    "WorkflowStreamDescription",
    "WorkflowStreamItem",
    "WorkflowStreamPage",
    "SagaCompensationFailed",
    "ScheduleActivity",
    "StartChildWorkflow",
    "StartTimer",
    "UnsupportedReplayHistory",
    "UpsertMemo",
    "UpsertSearchAttributes",
    "WaitCondition",
    "WorkflowCancelled",
    "WorkflowContext",
    "WorkflowRegistry",
    "WorkflowTaskOutcome",
    "apply_update",
    "defn",
    "execute_query_task",
    "execute_workflow_task",
    "query",
    "replay",
    "signal",
    "update",
    "update_validator",
    "workflow_command_contract",
    "workflow_definition_fingerprint",
]
