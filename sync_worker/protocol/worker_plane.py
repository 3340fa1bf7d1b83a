"""``WorkerPlane``: what the runtime needs from a client, as a typed protocol.

:class:`sync_worker.Client` implements it (its worker-plane mixin; mypy checks that wherever a
Client is handed to the runtime); a test double or another front end may pass anything with these
methods. The runtime depends on this protocol, never on ``Any``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol

from ..cancel import CancelToken

__all__ = ["WorkerPlane"]


class WorkerPlane(Protocol):
    """The worker-plane calls of protocol §3-§6 plus the connection housekeeping they need."""

    namespace: str

    def clone(self, **overrides: object) -> WorkerPlane: ...

    def validate_worker_compatibility(self, *, refresh: bool = True) -> Dict[str, Any]: ...
    def server_capabilities(self) -> Dict[str, Any]: ...
    def register_worker(self, body: Dict[str, Any], *, cancel: Optional[CancelToken] = None) -> Dict[str, Any]: ...
    def heartbeat_worker(self, body: Dict[str, Any], *, cancel: Optional[CancelToken] = None) -> Dict[str, Any]: ...
    def deregister_worker_fenced(
        self, worker_id: str, registration_token: str, *, timeout: float
    ) -> Dict[str, Any]: ...
    def deregister_worker_legacy(self, worker_id: str, *, timeout: float) -> Dict[str, Any]: ...
    def poll_workflow_task(
        self,
        *,
        worker_id: str,
        task_queue: str,
        poll_request_id: str,
        timeout_seconds: int,
        build_id: Optional[str] = None,
        history_page_size: int = 500,
        cancel: Optional[CancelToken] = None,
        task_kinds: Optional[List[str]] = None,
    ) -> Optional[Dict[str, Any]]: ...
    def approve_update_validation_task(
        self, task_id: str, *, lease_owner: str, update_validation_attempt: int,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def reject_update_validation_task(
        self, task_id: str, *, lease_owner: str, update_validation_attempt: int, failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def workflow_task_history(
        self,
        task_id: str,
        *,
        lease_owner: str,
        workflow_task_attempt: int,
        next_history_page_token: str,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def complete_workflow_task(
        self,
        task_id: str,
        *,
        lease_owner: str,
        workflow_task_attempt: int,
        commands: List[Dict[str, Any]],
        message_stream_cursors: Optional[List[Dict[str, Any]]] = None,
        message_stream_waits: Optional[List[Dict[str, Any]]] = None,
        cancel: Optional[CancelToken] = None,
        sticky_cache: Optional[Dict[str, Any]] = None,
    ) -> Dict[str, Any]: ...
    def fail_workflow_task(
        self,
        task_id: str,
        *,
        lease_owner: str,
        workflow_task_attempt: int,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def heartbeat_workflow_task(
        self, task_id: str, *, lease_owner: str, workflow_task_attempt: int, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]: ...
    def poll_activity_task(
        self,
        *,
        worker_id: str,
        task_queue: str,
        poll_request_id: str,
        timeout_seconds: int,
        build_id: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Optional[Dict[str, Any]]: ...
    def complete_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        result: Any,
        cancel: Optional[CancelToken] = None,
        result_envelope: Optional[Dict[str, str]] = None,
    ) -> Dict[str, Any]: ...
    def fail_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def heartbeat_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        details: Optional[Dict[str, Any]] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def poll_query_task(
        self,
        *,
        worker_id: str,
        task_queue: str,
        poll_request_id: str,
        timeout_seconds: int,
        build_id: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Optional[Dict[str, Any]]: ...
    def complete_query_task(
        self,
        query_task_id: str,
        *,
        lease_owner: str,
        query_task_attempt: int,
        result: Any,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def fail_query_task(
        self,
        query_task_id: str,
        *,
        lease_owner: str,
        query_task_attempt: int,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]: ...
    def ensure_pool_capacity(self, connections: int) -> None: ...
    def close(self) -> None: ...
