"""Worker-plane routes of :class:`sync_worker.Client` (``/api/worker/...``).

Every method blocks and accepts ``cancel``: when the token fires, the request in flight is
aborted and :class:`~sync_worker.errors.WorkerShutdown` is raised. Failure reports are bounded
(``sync_worker.failure_reports``) before anything is sent, so an oversized traceback never
turns into a 413.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from .. import errors, payloads
from ..cancel import CancelToken
from ..protocol import routes
from .base import PROTOCOL_VERSION, ClientBase, segment
from .negotiation import compatibility_problems
from .transport import RetryMode

MAX_POLL_SECONDS = 60

#: A task id ``segment`` would leave as it is (``quote``'s always-safe characters): most ids.
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]+").fullmatch
#: (kind, action) -> (path before the id, path after it, route label, operation): per queue, not per task.
_TASK_ROUTES: Dict[Tuple[str, str], Tuple[str, str, str, str]] = {}
#: kind -> its poll path.
_POLL_ROUTES: Dict[str, str] = {kind: routes.poll_route(kind) for kind in routes.KIND_SEGMENTS}


def _task_route(kind: str, action: str) -> Tuple[str, str, str, str]:
    found = _TASK_ROUTES.get((kind, action))
    if found is None:
        template = routes.task_route(kind, action)
        before, _, after = template.partition("{task_id}")
        found = _TASK_ROUTES[(kind, action)] = (before, after, routes.label(template),
                                                f"{routes.KIND_SEGMENTS[kind]}.{action}")
    return found


def poll_read_timeout(timeout_seconds: int) -> float:
    """HTTP read timeout of a long poll: longer than the server may hold it."""
    return float(timeout_seconds + 5) if timeout_seconds > 0 else 5.0


class WorkerPlane(ClientBase):
    """The worker protocol: registration, polls, task outcomes, heartbeats."""

    # -- negotiation ---------------------------------------------------------------------

    def validate_worker_compatibility(self, *, refresh: bool = True) -> Dict[str, Any]:
        """Read cluster info and check it can serve a worker; returns it.

        Raises ``RuntimeError("Server compatibility error: ...")`` listing every problem.
        """
        info = self.cluster_info(refresh=refresh)
        if "control_plane" not in info and "worker_protocol" not in info:
            # Some other JSON API answered at /api/cluster/info: not a Durable Workflow server.
            raise errors.ServerError(200, {"reason": "invalid_cluster_info"}, route=routes.CLUSTER_INFO)
        requested = os.environ.get("DURABLE_WORKFLOW_WORKER_PROTOCOL_VERSION") or PROTOCOL_VERSION
        problems = compatibility_problems(info, requested)
        if problems:
            raise RuntimeError("Server compatibility error: " + "; ".join(problems))
        return info

    # -- registration ----------------------------------------------------------------------

    def register_worker(self, body: Dict[str, Any], *, cancel: Optional[CancelToken] = None) -> Dict[str, Any]:
        """``POST /worker/register`` with a body built by the runtime."""
        return self._dict(self._call(
            "worker", "POST", routes.REGISTER, route=routes.REGISTER, body=body, cancel=cancel,
            operation="worker.register",
        ))

    def heartbeat_worker(self, body: Dict[str, Any], *, cancel: Optional[CancelToken] = None) -> Dict[str, Any]:
        """``POST /worker/heartbeat``."""
        return self._dict(self._call(
            "worker", "POST", routes.HEARTBEAT, route=routes.HEARTBEAT, body=body, cancel=cancel,
            operation="worker.heartbeat",
        ))

    # -- worker sessions (§3.4) ---------------------------------------------------------------

    def create_worker_session(self, worker_id: str, options: Any, *,
                              cancel: Optional[CancelToken] = None) -> Dict[str, Any]:
        """``POST /worker/sessions``: ``options`` is a :class:`~sync_worker.WorkerSessionOptions`."""
        return self._dict(self._call(
            "worker", "POST", routes.SESSIONS, route=routes.SESSIONS,
            body={"worker_id": worker_id, **options.to_wire()}, cancel=cancel, operation="worker.session.create",
        ))

    def renew_worker_session(self, worker_id: str, session_id: str, lease_seconds: int, *,
                             cancel: Optional[CancelToken] = None) -> Dict[str, Any]:
        """``POST /worker/sessions/{id}/heartbeat``."""
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int) or lease_seconds < 1:
            raise ValueError("worker session lease_seconds must be positive")
        return self._dict(self._call(
            "worker", "POST", routes.path(routes.SESSION_HEARTBEAT, session_id=segment(session_id)),
            route=routes.label(routes.SESSION_HEARTBEAT), body={"worker_id": worker_id, "lease_seconds": lease_seconds},
            cancel=cancel, operation="worker.session.heartbeat",
        ))

    def close_worker_session(self, worker_id: str, session_id: str, reason: str = "worker_shutdown", *,
                             cancel: Optional[CancelToken] = None) -> Dict[str, Any]:
        """``DELETE /worker/sessions/{id}``."""
        return self._dict(self._call(
            "worker", "DELETE", routes.path(routes.SESSION, session_id=segment(session_id)),
            route=routes.label(routes.SESSION), body={"worker_id": worker_id, "reason": reason}, cancel=cancel,
            operation="worker.session.close",
        ))

    def deregister_worker_fenced(self, worker_id: str, registration_token: str, *, timeout: float) -> Dict[str, Any]:
        """Fenced deregistration: one attempt; the receipt must echo worker id and token."""
        route = routes.label(routes.DEREGISTER_FENCED)
        body = self._call(
            "worker", "POST", routes.path(routes.DEREGISTER_FENCED, worker_id=segment(worker_id)), route=route,
            body={"registration_token": registration_token}, retry=RetryMode.NEVER,
            read_timeout=max(0.1, timeout), operation="worker.deregister",
        )
        if not (
            isinstance(body, dict)
            and body.get("worker_id") == worker_id
            and body.get("outcome") in ("deregistered", "already_deregistered")
            and body.get("registration_token") == registration_token
        ):
            raise errors.ServerError(200, {"reason": "invalid_worker_deregistration_response"}, route=route)
        return body

    def deregister_worker_legacy(self, worker_id: str, *, timeout: float) -> Dict[str, Any]:
        """Unfenced ``DELETE`` deregistration: one attempt, never replayed."""
        route = routes.label(routes.DEREGISTER_LEGACY)
        try:
            body = self._call(
                "worker", "DELETE", routes.path(routes.DEREGISTER_LEGACY, worker_id=segment(worker_id)), route=route,
                retry=RetryMode.NEVER, read_timeout=max(0.1, timeout), operation="worker.deregister",
            )
        except errors.NotFound as exc:
            if exc.reason() == "worker_not_found":
                return {"worker_id": worker_id, "outcome": "already_deregistered", "recovered_workflow_task_count": 0}
            raise
        if not (isinstance(body, dict) and body.get("worker_id") == worker_id and body.get("outcome")):
            raise errors.ServerError(200, {"reason": "invalid_worker_deregistration_response"}, route=route)
        return body

    # -- workflow tasks ----------------------------------------------------------------------

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
    ) -> Optional[Dict[str, Any]]:
        """Long-poll one workflow task; ``None`` when the wait ended empty.

        ``task_kinds`` (``["workflow", "update_validation"]``) asks the multiplexed poll for
        update-validation tasks too (§4.10); each answer says which it is in ``task.task_kind``.
        """
        body = self._poll_body(worker_id, task_queue, poll_request_id, timeout_seconds, build_id)
        body["history_page_size"] = history_page_size
        if task_kinds:
            body["task_kinds"] = list(task_kinds)
        return self._poll(_POLL_ROUTES["workflow"], body, cancel)

    # -- update validation tasks (§4.10) -------------------------------------------------------

    def poll_update_validation_task(
        self, *, worker_id: str, task_queue: str, timeout_seconds: int, poll_request_id: str = "",
        cancel: Optional[CancelToken] = None,
    ) -> Optional[Dict[str, Any]]:
        """The standalone validation poll (the worker uses the multiplexed workflow poll instead)."""
        body = self._poll_body(worker_id, task_queue, poll_request_id, timeout_seconds, None)
        if not poll_request_id:
            body.pop("poll_request_id")
        return self._poll(_POLL_ROUTES["update_validation"], body, cancel)

    def approve_update_validation_task(
        self, task_id: str, *, lease_owner: str, update_validation_attempt: int,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """The validator approved: the server may accept the update."""
        return self._task_call("update_validation", task_id, "approve", {
            "lease_owner": lease_owner, "update_validation_attempt": update_validation_attempt}, cancel)

    def reject_update_validation_task(
        self, task_id: str, *, lease_owner: str, update_validation_attempt: int, failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """The validator rejected (``reason: update_validator_rejected``) or could not run
        (``update_validation_worker_failed``); ``failure`` is bounded like any failure report."""
        return self._task_call("update_validation", task_id, "reject", {
            "lease_owner": lease_owner, "update_validation_attempt": update_validation_attempt, "failure": failure,
        }, cancel, bound=True)

    def workflow_task_history(
        self,
        task_id: str,
        *,
        lease_owner: str,
        workflow_task_attempt: int,
        next_history_page_token: str,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """One page of a leased task's history."""
        return self._task_call("workflow", task_id, "history", {
            "next_history_page_token": next_history_page_token,
            "lease_owner": lease_owner,
            "workflow_task_attempt": workflow_task_attempt,
        }, cancel)

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
    ) -> Dict[str, Any]:
        """Submit the task's commands (at least one; an empty batch is a waiting-for-history fail).

        ``sticky_cache`` (§4.5/§4.7) tells the server this worker keeps the run's state.

        ``message_stream_cursors`` / ``message_stream_waits`` (sent only when non-empty) record
        how far the workflow consumed its message streams and which it waits on.
        """
        if not commands:
            raise ValueError("an empty command batch is sent as fail_workflow_task(WorkflowTaskWaitingForHistory)")
        body: Dict[str, Any] = {
            "lease_owner": lease_owner,
            "workflow_task_attempt": workflow_task_attempt,
            "commands": commands,
        }
        if message_stream_cursors:
            body["message_stream_cursors"] = message_stream_cursors
        if message_stream_waits:
            body["message_stream_waits"] = message_stream_waits
        if sticky_cache:
            body["sticky_cache"] = sticky_cache
        return self._task_call("workflow", task_id, "complete", body, cancel, bound=True)

    def fail_workflow_task(
        self,
        task_id: str,
        *,
        lease_owner: str,
        workflow_task_attempt: int,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Report a workflow-task failure (a task retry, never a run failure)."""
        return self._task_call("workflow", task_id, "fail", {
            "lease_owner": lease_owner,
            "workflow_task_attempt": workflow_task_attempt,
            "failure": failure,
        }, cancel, bound=True)

    def heartbeat_workflow_task(
        self, task_id: str, *, lease_owner: str, workflow_task_attempt: int, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """Extend a workflow task's lease."""
        return self._task_call("workflow", task_id, "heartbeat", {
            "lease_owner": lease_owner, "workflow_task_attempt": workflow_task_attempt,
        }, cancel)

    # -- activity tasks ------------------------------------------------------------------------

    def poll_activity_task(
        self,
        *,
        worker_id: str,
        task_queue: str,
        poll_request_id: str,
        timeout_seconds: int,
        build_id: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Optional[Dict[str, Any]]:
        """Long-poll one activity task; ``None`` when the wait ended empty."""
        body = self._poll_body(worker_id, task_queue, poll_request_id, timeout_seconds, build_id)
        return self._poll(_POLL_ROUTES["activity"], body, cancel)

    def complete_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        result: Any,
        cancel: Optional[CancelToken] = None,
        result_envelope: Optional[Dict[str, str]] = None,
    ) -> Dict[str, Any]:
        """Report success; the result is encoded first (``PayloadEncodeError`` before sending).

        ``result_envelope`` is ``result`` already encoded (a caller that retries encodes once).
        """
        return self._task_call("activity", task_id, "complete", {
            "activity_attempt_id": activity_attempt_id,
            "lease_owner": lease_owner,
            "result": result_envelope if result_envelope is not None else payloads.envelope(result),
        }, cancel)

    def fail_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Report a failed attempt; the server owns the retry decision."""
        return self._task_call("activity", task_id, "fail", {
            "activity_attempt_id": activity_attempt_id,
            "lease_owner": lease_owner,
            "failure": failure,
        }, cancel, bound=True)

    def heartbeat_activity_task(
        self,
        task_id: str,
        *,
        activity_attempt_id: str,
        lease_owner: str,
        details: Optional[Dict[str, Any]] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Record progress; the answer says whether to go on (``cancel_requested``, ``can_continue``)."""
        body: Dict[str, Any] = {"activity_attempt_id": activity_attempt_id, "lease_owner": lease_owner}
        if details is not None:
            body["details"] = details
        return self._task_call("activity", task_id, "heartbeat", body, cancel)

    # -- query tasks ---------------------------------------------------------------------------

    def poll_query_task(
        self,
        *,
        worker_id: str,
        task_queue: str,
        poll_request_id: str,
        timeout_seconds: int,
        build_id: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Optional[Dict[str, Any]]:
        """Long-poll one query task; ``None`` when the wait ended empty."""
        body = self._poll_body(worker_id, task_queue, poll_request_id, timeout_seconds, build_id)
        return self._poll(_POLL_ROUTES["query"], body, cancel)

    def complete_query_task(
        self,
        query_task_id: str,
        *,
        lease_owner: str,
        query_task_attempt: int,
        result: Any,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Answer a query: the plain JSON value and its exact Avro envelope."""
        return self._task_call("query", query_task_id, "complete", {
            "lease_owner": lease_owner,
            "query_task_attempt": query_task_attempt,
            "result": _json_view(result),
            "result_envelope": payloads.envelope(result),
        }, cancel)

    def fail_query_task(
        self,
        query_task_id: str,
        *,
        lease_owner: str,
        query_task_attempt: int,
        failure: Dict[str, Any],
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Refuse a query with a reason (``query_rejected``, ``rejected_unknown_query``, ...)."""
        return self._task_call("query", query_task_id, "fail", {
            "lease_owner": lease_owner, "query_task_attempt": query_task_attempt, "failure": failure,
        }, cancel, bound=True)

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _dict(body: Any) -> Dict[str, Any]:
        return body if isinstance(body, dict) else {}

    @staticmethod
    def _poll_body(
        worker_id: str, task_queue: str, poll_request_id: str, timeout_seconds: int, build_id: Optional[str]
    ) -> Dict[str, Any]:
        body: Dict[str, Any] = {
            "worker_id": worker_id,
            "task_queue": task_queue,
            "poll_request_id": poll_request_id,
            "timeout_seconds": max(0, min(int(timeout_seconds), MAX_POLL_SECONDS)),
        }
        if build_id:
            body["build_id"] = build_id
        return body

    def _poll(self, path: str, body: Dict[str, Any], cancel: Optional[CancelToken]) -> Optional[Dict[str, Any]]:
        response = self._call("worker", "POST", path, route=path, body=body, cancel=cancel, operation=path,
                              poll=True, read_timeout=poll_read_timeout(body["timeout_seconds"]))
        if not isinstance(response, dict):
            # An empty (or non-object) 200 is not an empty poll: an empty poll says {"task": null}.
            raise errors.ServerError(200, {"reason": "empty_poll_response" if response is None
                                           else "invalid_poll_response"}, route=path)
        task = response.get("task")
        if task is not None and not isinstance(task, dict):
            raise errors.ServerError(200, {"reason": "invalid_poll_response"}, route=path)
        return task

    def _task_call(
        self,
        kind: str,
        task_id: str,
        action: str,
        body: Dict[str, Any],
        cancel: Optional[CancelToken],
        *,
        bound: bool = False,
    ) -> Dict[str, Any]:
        before, after, route, operation = _task_route(kind, action)
        path = before + (task_id if type(task_id) is str and _URL_SAFE(task_id) else segment(task_id)) + after
        if bound:
            from ..failure_reports import bound_request

            if self._offload is not None:  # large payloads leave first: the bound measures what is sent
                body = self._offload.outbound(body)
            body = bound_request(path, body, limit_bytes=self.failure_report_limit())
        response = self._call("worker", "POST", path, route=route, body=body, cancel=cancel, operation=operation)
        return response if isinstance(response, dict) else {}


def _json_view(value: Any) -> Any:
    """The plain-JSON form of a query result (bytes have none: ``None``, the envelope is exact)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None
    if isinstance(value, dict):
        return {str(k): _json_view(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_view(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value
