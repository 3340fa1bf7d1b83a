"""Handles: one workflow, standalone activity or schedule, bound to a :class:`~sync_worker.Client`.

Methods, parameters and defaults are those of ``durable_workflow.sync``'s ``SyncWorkflowHandle``,
``SyncStandaloneActivityHandle`` and ``SyncScheduleHandle`` (2.12), so a script written for the
published facade runs unchanged. Arguments of signals, queries and updates are one *list*, as in
the SDK: ``handle.signal("approve", ["ann"])``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from .results import (
    ScheduleAction,
    ScheduleBackfillResult,
    ScheduleDescription,
    ScheduleHistoryEvent,
    ScheduleHistoryPage,
    ScheduleSpec,
    ScheduleTriggerResult,
    StandaloneActivityExecution,
    WorkflowCommandResult,
    WorkflowExecution,
    WorkflowRun,
    WorkflowRunList,
)

if TYPE_CHECKING:  # pragma: no cover
    from . import Client


class WorkflowHandle:
    """A workflow by id (optionally pinned to one run)."""

    def __init__(self, client: Client, workflow_id: str, run_id: Optional[str] = None,
                 workflow_type: str = "") -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.workflow_type = workflow_type

    def __repr__(self) -> str:
        return f"WorkflowHandle({self.workflow_id!r}, run_id={self.run_id!r})"

    def _run_id(self, what: str) -> str:
        if self.run_id is None:
            raise ValueError(f"run_id is required to {what} from a handle")
        return self.run_id

    def result(self, *, poll_interval: float = 0.5, timeout: Optional[float] = 30.0) -> Any:
        """Block until the workflow closes and return its result (``timeout=None``: no deadline)."""
        return self.client.get_result(self, poll_interval=poll_interval, timeout=timeout)

    def describe(self) -> WorkflowExecution:
        return self.client.describe_workflow(self.workflow_id)

    def get_history(self, *, page_size: Optional[int] = None, next_page_token: Optional[str] = None) -> Any:
        return self.client.get_history(self.workflow_id, self._run_id("fetch workflow history"),
                                       page_size=page_size, next_page_token=next_page_token)

    def export_history(self) -> Any:
        return self.client.export_history(self.workflow_id, self._run_id("export workflow history"))

    def list_runs(self) -> WorkflowRunList:
        return self.client.list_workflow_runs(self.workflow_id)

    def describe_run(self, run_id: Optional[str] = None) -> WorkflowRun:
        selected = run_id or self._run_id("describe a workflow run")
        return self.client.describe_workflow_run(self.workflow_id, selected)

    def signal(self, signal_name: str, args: Optional[List[Any]] = None, *,
               request_id: Optional[str] = None) -> Dict[str, Any]:
        return self.client.signal_workflow(self.workflow_id, signal_name, args=args, request_id=request_id,
                                           run_id=self.run_id)

    def query(self, query_name: str, args: Optional[List[Any]] = None) -> Any:
        return self.client.query_workflow(self.workflow_id, query_name, args=args)

    def update(self, update_name: str, args: Optional[List[Any]] = None, *, wait_for: Optional[str] = None,
               wait_timeout_seconds: Optional[int] = None, request_id: Optional[str] = None) -> Any:
        return self.client.update_workflow(self.workflow_id, update_name, args=args, wait_for=wait_for,
                                           wait_timeout_seconds=wait_timeout_seconds, request_id=request_id)

    def append_message(self, stream_name: str, message_id: str, args: Optional[List[Any]] = None) -> Dict[str, Any]:
        return self.client.append_message_stream(self.workflow_id, stream_name, *(args or []), message_id=message_id)

    def cancel(self, *, reason: Optional[str] = None) -> None:
        self.client.cancel_workflow(self.workflow_id, reason=reason)

    def terminate(self, *, reason: Optional[str] = None) -> None:
        self.client.terminate_workflow(self.workflow_id, reason=reason)

    def repair(self) -> WorkflowCommandResult:
        return self.client.repair_workflow(self.workflow_id)

    def redrive(self, *, request_id: Optional[str] = None) -> WorkflowCommandResult:
        return self.client.redrive_workflow(self.workflow_id, self._run_id("redrive a workflow"),
                                            request_id=request_id)

    def archive(self, *, reason: Optional[str] = None) -> WorkflowCommandResult:
        return self.client.archive_workflow(self.workflow_id, reason=reason)


class StandaloneActivityHandle:
    """A standalone activity (a top-level durable job): describe, result, cancel.

    ``handle["activity_id"]`` and friends read the server's start receipt, as the dict that
    ``start_activity`` returned in sync_worker 0.1 did.
    """

    def __init__(self, client: Client, activity_id: str, *, workflow_run_id: Optional[str] = None,
                 activity_execution_id: Optional[str] = None, workflow_type: str = "", activity_type: str = "",
                 receipt: Optional[Dict[str, Any]] = None) -> None:
        self.client = client
        self.activity_id = activity_id
        self.workflow_run_id = workflow_run_id
        self.activity_execution_id = activity_execution_id
        self.workflow_type = workflow_type
        self.activity_type = activity_type
        self.receipt: Dict[str, Any] = dict(receipt or {})
        self.receipt.setdefault("activity_id", activity_id)

    def __repr__(self) -> str:
        return f"StandaloneActivityHandle({self.activity_id!r}, activity_type={self.activity_type!r})"

    def __getitem__(self, key: str) -> Any:
        return self.receipt[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.receipt.get(key, default)

    def describe(self) -> StandaloneActivityExecution:
        return self.client.describe_activity(self.activity_id)

    def result(self, *, poll_interval: float = 0.5, timeout: Optional[float] = 30.0) -> Any:
        return self.client.get_activity_result(self, poll_interval=poll_interval, timeout=timeout)

    def cancel(self, *, reason: Optional[str] = None) -> None:
        self.client.cancel_activity(self.activity_id, reason=reason)


class ScheduleHandle:
    """A schedule by id: describe, update, pause, resume, trigger, backfill, delete, history."""

    def __init__(self, client: Client, schedule_id: str) -> None:
        self.client = client
        self.schedule_id = schedule_id

    def __repr__(self) -> str:
        return f"ScheduleHandle({self.schedule_id!r})"

    def describe(self) -> ScheduleDescription:
        return self.client.describe_schedule(self.schedule_id)

    def update(self, *, spec: Optional[ScheduleSpec] = None, action: Optional[ScheduleAction] = None,
               overlap_policy: Optional[str] = None, jitter_seconds: Optional[int] = None,
               max_runs: Optional[int] = None, memo: Optional[Dict[str, Any]] = None,
               search_attributes: Optional[Dict[str, Any]] = None, note: Optional[str] = None) -> None:
        self.client.update_schedule(self.schedule_id, spec=spec, action=action, overlap_policy=overlap_policy,
                                    jitter_seconds=jitter_seconds, max_runs=max_runs, memo=memo,
                                    search_attributes=search_attributes, note=note)

    def pause(self, *, note: Optional[str] = None) -> None:
        self.client.pause_schedule(self.schedule_id, note=note)

    def resume(self, *, note: Optional[str] = None) -> None:
        self.client.resume_schedule(self.schedule_id, note=note)

    def trigger(self, *, overlap_policy: Optional[str] = None) -> ScheduleTriggerResult:
        return self.client.trigger_schedule(self.schedule_id, overlap_policy=overlap_policy)

    def delete(self) -> None:
        self.client.delete_schedule(self.schedule_id)

    def backfill(self, *, start_time: str, end_time: str,
                 overlap_policy: Optional[str] = None) -> ScheduleBackfillResult:
        return self.client.backfill_schedule(self.schedule_id, start_time=start_time, end_time=end_time,
                                             overlap_policy=overlap_policy)

    def history(self, *, limit: Optional[int] = None, after_sequence: Optional[int] = None) -> ScheduleHistoryPage:
        return self.client.get_schedule_history(self.schedule_id, limit=limit, after_sequence=after_sequence)

    def iter_history(self, *, limit: Optional[int] = None,
                     after_sequence: Optional[int] = None) -> Iterator[ScheduleHistoryEvent]:
        return self.client.iter_schedule_history(self.schedule_id, limit=limit, after_sequence=after_sequence)
