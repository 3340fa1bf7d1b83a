"""Outcomes of workflows and activities (client side and inside workflow code), and replay errors.

Part of the one exception hierarchy of :mod:`sync_worker.errors` (import them from there); kept in
its own module so each stays small. ``__module__`` says ``sync_worker.errors``, so class paths in
logs, pickles and Django task results stay what they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import DurableWorkflowError

__all__ = [
    "ActivityFailed",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowTerminated",
    "NonDeterministicReplayError",
    "SagaCompensationFailed",
    "StandaloneActivityFailed",
    "WorkflowEntryArgumentsMismatchError",
    "WorkflowFailed",
    "WorkflowPayloadDecodeError",
    "WorkflowTerminated",
    "WorkflowTimedOut",
]


# ---------------------------------------------------------------------------
# Workflow outcomes (client side and inside workflow code)


class WorkflowFailed(DurableWorkflowError):
    """A workflow (or standalone activity) finished in the ``failed`` state."""

    def __init__(self, message: str, exception_class: Optional[str] = None) -> None:
        super().__init__(message)
        self.exception_class = exception_class


class StandaloneActivityFailed(WorkflowFailed):
    """A standalone activity failed: its failure's type and message, not just "it failed".

    A :class:`WorkflowFailed` (what the published SDK raises here), carrying ``activity_id``,
    ``failure_type``, ``failure_message`` and the reported ``failure`` object when known.
    """

    def __init__(self, activity_id: str, failure_type: Optional[str], failure_message: Optional[str],
                 failure: Optional[Dict[str, Any]] = None) -> None:
        detail = ": ".join(part for part in (failure_type, failure_message) if part)
        super().__init__(f"standalone activity {activity_id} failed" + (f": {detail}" if detail else ""),
                         failure_type)
        self.activity_id = activity_id
        self.failure_type = failure_type
        self.failure_message = failure_message
        self.failure = failure


class WorkflowTerminated(DurableWorkflowError):
    """A workflow was terminated by an operator."""

    def __init__(self, message: str = "workflow was terminated") -> None:
        super().__init__(message)


class WorkflowTimedOut(DurableWorkflowError):
    """A workflow's run or execution deadline expired."""

    def __init__(self, message: str = "workflow execution timed out") -> None:
        super().__init__(message)


class ActivityFailed(DurableWorkflowError):
    """An activity failed terminally; raised inside the workflow that awaited it."""

    def __init__(
        self,
        message: str,
        *,
        activity_type: Optional[str] = None,
        step_sequence: Optional[int] = None,
        activity_execution_id: Optional[str] = None,
        activity_attempt_id: Optional[str] = None,
        failure_id: Optional[str] = None,
        failure_category: Optional[str] = None,
        exception_type: Optional[str] = None,
        exception_class: Optional[str] = None,
        non_retryable: bool = False,
        code: Any = None,
        exception_payload: Optional[Dict[str, Any]] = None,
        activity: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.activity_type = activity_type
        self.step_sequence = step_sequence
        self.activity_execution_id = activity_execution_id
        self.activity_attempt_id = activity_attempt_id
        self.failure_id = failure_id
        self.failure_category = failure_category
        self.exception_type = exception_type
        self.exception_class = exception_class
        self.non_retryable = non_retryable
        self.code = code
        self.exception_payload = exception_payload
        self.activity = activity


class ChildWorkflowFailed(DurableWorkflowError):
    """A child workflow failed; raised inside the parent that awaited it."""

    def __init__(
        self,
        message: str,
        exception_class: Optional[str] = None,
        *,
        failure_kind: Optional[str] = "child_workflow",
        child_workflow_run_id: Optional[str] = None,
        child_workflow_type: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.exception_class = exception_class
        self.failure_kind = failure_kind
        self.failure_category = failure_kind
        self.child_workflow_run_id = child_workflow_run_id
        self.child_workflow_type = child_workflow_type


class ChildWorkflowCancelled(ChildWorkflowFailed):
    """A child workflow was cancelled."""

    def __init__(
        self,
        message: str = "child workflow was cancelled",
        exception_class: Optional[str] = None,
        *,
        child_workflow_run_id: Optional[str] = None,
        child_workflow_type: Optional[str] = None,
    ) -> None:
        super().__init__(
            message,
            exception_class,
            failure_kind="cancelled",
            child_workflow_run_id=child_workflow_run_id,
            child_workflow_type=child_workflow_type,
        )


class ChildWorkflowTerminated(ChildWorkflowFailed):
    """A child workflow was terminated."""

    def __init__(
        self,
        message: str = "child workflow was terminated",
        exception_class: Optional[str] = None,
        *,
        child_workflow_run_id: Optional[str] = None,
        child_workflow_type: Optional[str] = None,
    ) -> None:
        super().__init__(
            message,
            exception_class,
            failure_kind="terminated",
            child_workflow_run_id=child_workflow_run_id,
            child_workflow_type=child_workflow_type,
        )


class SagaCompensationFailed(DurableWorkflowError):
    """A saga compensation failed after an earlier failure; both stay available."""

    def __init__(
        self,
        initiating_failure: BaseException,
        compensation_failure: BaseException,
        *,
        compensation_activity_type: str,
        compensation_registration_order: int,
    ) -> None:
        super().__init__(
            f"saga compensation {compensation_activity_type!r} failed after "
            f"{type(initiating_failure).__name__}: {initiating_failure}"
        )
        self.initiating_failure = initiating_failure
        self.compensation_failure = compensation_failure
        self.compensation_activity_type = compensation_activity_type
        self.compensation_registration_order = compensation_registration_order


# ---------------------------------------------------------------------------
# Replay


class NonDeterministicReplayError(DurableWorkflowError):
    """Workflow code no longer matches its recorded history.

    Reported as a workflow-task failure (the run stays open for a compatible deploy),
    never as a workflow failure.
    """

    def __init__(
        self,
        workflow_sequence: int,
        expected_shape: str,
        recorded_event_types: List[str],
        *,
        detail: Optional[str] = None,
    ) -> None:
        text = (
            f"workflow history at workflow sequence {workflow_sequence} recorded "
            f"{list(recorded_event_types)!r}, but the current workflow yielded {expected_shape}."
        )
        if detail:
            text += f" {detail}"
        text += " Keep yielded workflow steps stable across deployments or run this workflow on a compatible build."
        super().__init__(text)
        self.workflow_sequence = workflow_sequence
        self.expected_shape = expected_shape
        self.recorded_event_types = list(recorded_event_types)
        self.detail = detail
        #: Where the workflow code stood when replay diverged (set by the replayer).
        self.code_position: Optional[CodePosition] = None


@dataclass(frozen=True)
class CodePosition:
    """A place in workflow code: ``filename:lineno in function`` (``after``: the code had returned there)."""

    filename: str
    lineno: int
    function: str
    after: bool = False

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno} in {self.function}"
        return f"after {where} (run returned)" if self.after else where


class WorkflowPayloadDecodeError(DurableWorkflowError):
    """A payload in the workflow's history could not be decoded."""

    def __init__(self, message: str, *, event_id: Optional[str] = None, codec: Optional[str] = None):
        super().__init__(message)
        self.event_id = event_id
        self.codec = codec


class WorkflowEntryArgumentsMismatchError(DurableWorkflowError):
    """``run(self, ctx, ...)`` cannot bind the recorded start arguments."""

    reason = "workflow_entry_arguments_mismatch"

    def __init__(self, workflow_type: str, binding_reason: str) -> None:
        super().__init__(
            f"{self.reason}: {workflow_type}.run cannot bind the recorded arguments ({binding_reason}). "
            "Restore compatible code and repair the workflow task."
        )
        self.workflow_type = workflow_type
        self.binding_reason = binding_reason


for _name in __all__:
    globals()[_name].__module__ = "sync_worker.errors"
