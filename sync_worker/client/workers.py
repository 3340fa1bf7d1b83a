"""Worker records, as an operator sees them: list, describe, deregister."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .base import ClientBase, segment
from .results import WorkerDescription, WorkerList
from .results._common import body_of
from .transport import RetryMode


class WorkersMixin(ClientBase):
    """Operator routes over the worker roster (a worker's own registration is the worker plane)."""

    def list_workers(self, *, task_queue: Optional[str] = None, status: Optional[str] = None) -> WorkerList:
        """Registered workers of the namespace, optionally of one queue or status."""
        body = self._call("control", "GET", "/workers", route="/workers",
                          params={"task_queue": task_queue, "status": status}, operation="worker.list")
        return WorkerList.from_dict(body)

    def describe_worker(self, worker_id: str) -> WorkerDescription:
        """One worker's runtime, capacity, heartbeat and supported types."""
        body = self._call("control", "GET", f"/workers/{segment(worker_id)}", route="/workers/{id}",
                          operation="worker.describe")
        return WorkerDescription.from_dict(body, worker_id=worker_id)

    def deregister_worker(self, worker_id: str) -> Dict[str, Any]:
        """Retire a stale worker record (not what a worker's own shutdown uses)."""
        return body_of(self._call("control", "DELETE", f"/workers/{segment(worker_id)}", route="/workers/{id}",
                                  retry=RetryMode.NEVER, operation="worker.deregister"))
