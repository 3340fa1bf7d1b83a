"""Result dataclasses of the workflow routes, field for field those of ``durable_workflow`` 2.12.

Each one is built from the server's JSON body with ``from_dict`` and keeps that body as
``raw`` (not part of equality or ``repr``) for fields a newer server adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._common import RawAccess, body_of, decode_first, mapping, opt_int, opt_str

TERMINAL_STATUSES = frozenset({"completed", "failed", "terminated", "canceled", "cancelled", "timed_out"})


@dataclass
class WorkflowExecution(RawAccess):
    """The server's view of a workflow's newest run (``describe``), or one row of a listing."""

    workflow_id: str
    run_id: Optional[str]
    workflow_type: str
    status: Optional[str] = None
    namespace: Optional[str] = None
    task_queue: Optional[str] = None
    input: Any = None
    output: Any = None
    payload_codec: Optional[str] = None
    memo: Optional[Dict[str, Any]] = None
    search_attributes: Optional[Dict[str, Any]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, workflow_id: Optional[str] = None, decode: bool = True) -> WorkflowExecution:
        raw = body_of(data)
        return cls(
            workflow_id=str(raw.get("workflow_id") or workflow_id or ""),
            run_id=opt_str(raw.get("run_id")),
            workflow_type=str(raw.get("workflow_type") or ""),
            status=opt_str(raw.get("status")),
            namespace=opt_str(raw.get("namespace")),
            task_queue=opt_str(raw.get("task_queue")),
            input=decode_first(raw, "input_envelope", "input") if decode else None,
            output=decode_first(raw, "output_envelope", "output") if decode else None,
            payload_codec=opt_str(raw.get("payload_codec")),
            memo=mapping(raw.get("memo")),
            search_attributes=mapping(raw.get("search_attributes")),
            raw=raw,
        )

    @property
    def is_terminal(self) -> bool:
        """Whether the run has closed (completed, failed, cancelled, terminated, timed out)."""
        return self.status in TERMINAL_STATUSES


@dataclass
class WorkflowList:
    """One page of workflow visibility results (``executions``, as the SDK names them)."""

    executions: List[WorkflowExecution]
    next_page_token: Optional[str] = None

    @property
    def workflows(self) -> List[WorkflowExecution]:
        """The page's executions (the name sync_worker 0.1 used)."""
        return self.executions


@dataclass
class WorkflowRun(RawAccess):
    """One durable run of a workflow execution chain (``describe_workflow_run``)."""

    workflow_id: str
    run_id: str
    workflow_type: str
    status: Optional[str] = None
    namespace: Optional[str] = None
    task_queue: Optional[str] = None
    run_number: Optional[int] = None
    run_count: Optional[int] = None
    is_current_run: Optional[bool] = None
    status_bucket: Optional[str] = None
    business_key: Optional[str] = None
    compatibility: Optional[str] = None
    payload_codec: Optional[str] = None
    input: Any = None
    output: Any = None
    memo: Optional[Dict[str, Any]] = None
    search_attributes: Optional[Dict[str, Any]] = None
    actions: Optional[Dict[str, Any]] = None
    started_at: Optional[str] = None
    closed_at: Optional[str] = None
    last_progress_at: Optional[str] = None
    closed_reason: Optional[str] = None
    wait_kind: Optional[str] = None
    wait_reason: Optional[str] = None
    execution_timeout_seconds: Optional[int] = None
    run_timeout_seconds: Optional[int] = None
    execution_deadline_at: Optional[str] = None
    run_deadline_at: Optional[str] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, workflow_id: Optional[str] = None,
                  run_id: Optional[str] = None) -> WorkflowRun:
        raw = body_of(data)
        current = raw.get("is_current_run")
        return cls(
            workflow_id=str(raw.get("workflow_id") or workflow_id or ""),
            run_id=str(raw.get("run_id") or run_id or ""),
            workflow_type=str(raw.get("workflow_type") or ""),
            status=opt_str(raw.get("status")),
            namespace=opt_str(raw.get("namespace")),
            task_queue=opt_str(raw.get("task_queue")),
            run_number=opt_int(raw.get("run_number")),
            run_count=opt_int(raw.get("run_count")),
            is_current_run=current if isinstance(current, bool) else None,
            status_bucket=opt_str(raw.get("status_bucket")),
            business_key=opt_str(raw.get("business_key")),
            compatibility=opt_str(raw.get("compatibility")),
            payload_codec=opt_str(raw.get("payload_codec")),
            input=decode_first(raw, "input_envelope", "input"),
            output=decode_first(raw, "output_envelope", "output"),
            memo=mapping(raw.get("memo")),
            search_attributes=mapping(raw.get("search_attributes")),
            actions=mapping(raw.get("actions")),
            started_at=opt_str(raw.get("started_at")),
            closed_at=opt_str(raw.get("closed_at")),
            last_progress_at=opt_str(raw.get("last_progress_at")),
            closed_reason=opt_str(raw.get("closed_reason")),
            wait_kind=opt_str(raw.get("wait_kind")),
            wait_reason=opt_str(raw.get("wait_reason")),
            execution_timeout_seconds=opt_int(raw.get("execution_timeout_seconds")),
            run_timeout_seconds=opt_int(raw.get("run_timeout_seconds")),
            execution_deadline_at=opt_str(raw.get("execution_deadline_at")),
            run_deadline_at=opt_str(raw.get("run_deadline_at")),
            raw=raw,
        )


@dataclass
class WorkflowRunList:
    """Every durable run of one workflow execution, oldest first."""

    workflow_id: str
    run_count: int
    runs: List[WorkflowRun]

    @classmethod
    def from_dict(cls, data: object, *, workflow_id: str) -> WorkflowRunList:
        raw = body_of(data)
        owner = str(raw.get("workflow_id") or workflow_id)
        runs = [WorkflowRun.from_dict(item, workflow_id=owner) for item in raw.get("runs") or []
                if isinstance(item, dict)]
        count = opt_int(raw.get("run_count"))
        return cls(workflow_id=owner, run_count=count if count is not None else len(runs), runs=runs)


@dataclass
class WorkflowCommandResult(RawAccess):
    """The machine-readable outcome of repair, redrive and archive."""

    workflow_id: str
    outcome: str
    command_status: Optional[str] = None
    command_id: Optional[str] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)
    run_id: Optional[str] = None

    @classmethod
    def from_dict(cls, data: object, *, workflow_id: Optional[str] = None) -> WorkflowCommandResult:
        raw = body_of(data)
        return cls(
            workflow_id=str(raw.get("workflow_id") or workflow_id or ""),
            outcome=str(raw.get("outcome") or ""),
            command_status=opt_str(raw.get("command_status")),
            command_id=opt_str(raw.get("command_id")),
            raw=raw,
            run_id=opt_str(raw.get("run_id")),
        )
