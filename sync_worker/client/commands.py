"""Operator commands on a workflow: cancel, terminate, repair, redrive, archive.

``cancel``/``terminate`` return ``None`` as in ``durable_workflow.sync`` 2.12; the others return
a :class:`~sync_worker.client.WorkflowCommandResult` (``outcome``, ``command_status``...).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .base import ClientBase, segment
from .results import WorkflowCommandResult
from .results._common import body_of
from .transport import RetryMode


class CommandsMixin(ClientBase):
    """Workflow commands."""

    def cancel_workflow(self, workflow_id: str, *, reason: Optional[str] = None) -> None:
        """Close the workflow's current run as cancelled, at once."""
        self._command(workflow_id, "cancel", {"reason": reason} if reason is not None else {})

    def terminate_workflow(self, workflow_id: str, *, reason: Optional[str] = None) -> None:
        """Close the workflow's current run as terminated, at once."""
        self._command(workflow_id, "terminate", {"reason": reason} if reason is not None else {})

    def repair_workflow(self, workflow_id: str) -> WorkflowCommandResult:
        """Ask the server to repair a stalled run (re-create its missing task)."""
        return WorkflowCommandResult.from_dict(self._command(workflow_id, "repair", {}), workflow_id=workflow_id)

    def redrive_workflow(self, workflow_id: str, failed_run_id: str, *,
                         request_id: Optional[str] = None) -> WorkflowCommandResult:
        """Continue a failed run from its failure, reusing its completed activity results."""
        body = {"request_id": request_id} if request_id is not None else {}
        path = f"/workflows/{segment(workflow_id)}/runs/{segment(failed_run_id)}/redrive"
        response = self._call("control", "POST", path,
                              route="/workflows/{id}/runs/{runId}/redrive", body=body,
                              retry=RetryMode.CONNECT_ONLY, operation="workflow.redrive")
        return WorkflowCommandResult.from_dict(response, workflow_id=workflow_id)

    def archive_workflow(self, workflow_id: str, *, reason: Optional[str] = None) -> WorkflowCommandResult:
        """Move a closed workflow into the archive tier."""
        body = {"reason": reason} if reason is not None else {}
        return WorkflowCommandResult.from_dict(self._command(workflow_id, "archive", body), workflow_id=workflow_id)

    def _command(self, workflow_id: str, action: str, body: Dict[str, Any]) -> Dict[str, Any]:
        def send(sent: Dict[str, Any]) -> Any:
            return self._call("control", "POST", f"/workflows/{segment(workflow_id)}/{action}",
                              route=f"/workflows/{{id}}/{action}", body=sent, retry=RetryMode.CONNECT_ONLY,
                              operation=f"workflow.{action}")

        if action in ("cancel", "terminate"):  # what instrumentations see (the SDK carries cancel's context)
            return body_of(self._workflow_call(self._call_about(f"workflow.{action}", workflow_id, body), send))
        return body_of(send(body))
