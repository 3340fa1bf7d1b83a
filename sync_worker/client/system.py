"""System maintenance passes: repair, history retention and activity timeouts (status, run one pass).

Each returns the server's JSON object, as ``durable_workflow`` 2.12's async client does.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .base import ClientBase
from .results._common import body_of
from .transport import RetryMode


class SystemMixin(ClientBase):
    """``/system/...`` routes."""

    def repair_status(self) -> Dict[str, Any]:
        """Runs that need a repair (missing or stuck tasks), as the server scans them."""
        return self._system("GET", "/system/repair", None, "system.repair.status")

    def repair_pass(self, *, run_ids: Optional[List[str]] = None, instance_id: Optional[str] = None) -> Dict[str, Any]:
        """Repair now (all candidates, or the given runs / instance)."""
        body: Dict[str, Any] = {}
        if run_ids is not None:
            body["run_ids"] = list(run_ids)
        if instance_id is not None:
            body["instance_id"] = instance_id
        return self._system("POST", "/system/repair/pass", body, "system.repair.pass")

    def retention_status(self) -> Dict[str, Any]:
        """Closed runs past the namespace's retention."""
        return self._system("GET", "/system/retention", None, "system.retention.status")

    def retention_pass(self, *, run_ids: Optional[List[str]] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """Prune expired runs now."""
        body: Dict[str, Any] = {}
        if run_ids is not None:
            body["run_ids"] = list(run_ids)
        if limit is not None:
            body["limit"] = limit
        return self._system("POST", "/system/retention/pass", body, "system.retention.pass")

    def activity_timeout_status(self) -> Dict[str, Any]:
        """Activity executions past a deadline."""
        return self._system("GET", "/system/activity-timeouts", None, "system.activity_timeout.status")

    def activity_timeout_pass(self, *, execution_ids: Optional[List[str]] = None,
                              limit: Optional[int] = None) -> Dict[str, Any]:
        """Enforce activity timeouts now."""
        body: Dict[str, Any] = {}
        if execution_ids is not None:
            body["execution_ids"] = list(execution_ids)
        if limit is not None:
            body["limit"] = limit
        return self._system("POST", "/system/activity-timeouts/pass", body, "system.activity_timeout.pass")

    def _system(self, method: str, path: str, body: Optional[Dict[str, Any]], operation: str) -> Dict[str, Any]:
        return body_of(self._call("control", method, path, route=path, body=body,
                                  retry=RetryMode.SAFE if method == "GET" else RetryMode.CONNECT_ONLY,
                                  operation=operation))
