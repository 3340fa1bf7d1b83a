"""Standalone activities: one activity run as a top-level durable job (its own host run).

Signatures follow ``durable_workflow.sync`` 2.12 (``start_activity`` returns a handle,
``describe_activity`` a :class:`StandaloneActivityExecution`); arguments may also go
positionally. A failed activity raises :class:`~sync_worker.errors.StandaloneActivityFailed`
with the failure's type and message (the published client only says that it failed).
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import timedelta
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .. import errors, payloads
from .base import ClientBase, segment
from .handles import StandaloneActivityHandle
from .results import StandaloneActivityExecution, StandaloneActivityList
from .results._common import body_of, mapping, opt_str
from .transport import RetryMode
from .workflows import args_list

#: A timeout in the workflow spelling: seconds (int or float) or a timedelta.
TimeoutValue = Optional[Union[int, float, timedelta]]


class ActivitiesMixin(ClientBase):
    """Standalone-activity routes."""

    def start_activity(
        self,
        activity_type: str,
        *args: Any,
        task_queue: str,
        activity_id: Optional[str] = None,
        activity_class: Optional[str] = None,
        input: Optional[List[Any]] = None,
        business_key: Optional[str] = None,
        retry_policy: Optional[Mapping[str, Any]] = None,
        start_to_close_timeout_seconds: Optional[int] = None,
        schedule_to_start_timeout_seconds: Optional[int] = None,
        schedule_to_close_timeout_seconds: Optional[int] = None,
        heartbeat_timeout_seconds: Optional[int] = None,
        start_to_close_timeout: TimeoutValue = None,
        schedule_to_start_timeout: TimeoutValue = None,
        schedule_to_close_timeout: TimeoutValue = None,
        heartbeat_timeout: TimeoutValue = None,
    ) -> StandaloneActivityHandle:
        """Run one activity as a durable job; its arguments positionally or as ``input=[...]``.

        Timeouts are whole seconds, spelled as the published SDK's client spells them
        (``start_to_close_timeout_seconds=60``) or as workflows spell them
        (``start_to_close_timeout=60``, also a ``timedelta``); giving both spellings is a TypeError.
        """
        start_to_close_timeout_seconds = _one_timeout(
            "start_to_close_timeout", start_to_close_timeout_seconds, start_to_close_timeout)
        schedule_to_start_timeout_seconds = _one_timeout(
            "schedule_to_start_timeout", schedule_to_start_timeout_seconds, schedule_to_start_timeout)
        schedule_to_close_timeout_seconds = _one_timeout(
            "schedule_to_close_timeout", schedule_to_close_timeout_seconds, schedule_to_close_timeout)
        heartbeat_timeout_seconds = _one_timeout("heartbeat_timeout", heartbeat_timeout_seconds, heartbeat_timeout)
        if args and input is not None:
            raise TypeError("pass the activity's arguments positionally or as input=[...], not both")
        arguments = list(args) if args else args_list(input, "input")
        activity_id = activity_id or f"act-{uuid.uuid4().hex}"
        body: Dict[str, Any] = {"activity_type": activity_type, "task_queue": task_queue, "activity_id": activity_id}
        optional: Dict[str, Any] = {
            "activity_class": activity_class, "business_key": business_key,
            "input": payloads.envelope(arguments),
            "retry_policy": dict(retry_policy) if retry_policy is not None else None,
            "start_to_close_timeout_seconds": start_to_close_timeout_seconds,
            "schedule_to_start_timeout_seconds": schedule_to_start_timeout_seconds,
            "schedule_to_close_timeout_seconds": schedule_to_close_timeout_seconds,
            "heartbeat_timeout_seconds": heartbeat_timeout_seconds,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        receipt = body_of(self._call("control", "POST", "/activities", route="/activities", body=body,
                                     retry=RetryMode.CONNECT_ONLY, operation="activity.start"))
        return StandaloneActivityHandle(
            self, str(receipt.get("activity_id") or activity_id),  # type: ignore[arg-type]
            workflow_run_id=opt_str(receipt.get("workflow_run_id")),
            activity_execution_id=opt_str(receipt.get("activity_execution_id")),
            workflow_type=str(receipt.get("workflow_type") or ""),
            activity_type=str(receipt.get("activity_type") or activity_type), receipt=receipt)

    def get_activity_handle(self, activity_id: str, *, workflow_run_id: Optional[str] = None,
                            activity_execution_id: Optional[str] = None,
                            activity_type: str = "") -> StandaloneActivityHandle:
        """A handle for an existing standalone activity (no request is made)."""
        return StandaloneActivityHandle(self, activity_id, workflow_run_id=workflow_run_id,  # type: ignore[arg-type]
                                        activity_execution_id=activity_execution_id, activity_type=activity_type)

    def describe_activity(self, activity_id: str) -> StandaloneActivityExecution:
        """A standalone activity's state; ``result`` decoded once it completed."""
        raw = self._call("control", "GET", f"/activities/{segment(activity_id)}", route="/activities/{id}",
                         operation="activity.describe")
        return StandaloneActivityExecution.from_dict(raw, activity_id=activity_id)

    def list_activities(self, *, status: Optional[str] = None, page_size: Optional[int] = None,
                        next_page_token: Optional[str] = None) -> StandaloneActivityList:
        """One page of standalone activities (``status``: running, completed, failed)."""
        body = self._call("control", "GET", "/activities", route="/activities", params={
            "status": status, "page_size": page_size, "next_page_token": next_page_token},
            operation="activity.list")
        return StandaloneActivityList.from_dict(body)

    def get_activity_result(self, handle: Union[StandaloneActivityHandle, str], *, poll_interval: float = 0.5,
                            timeout: Optional[float] = 30.0) -> Any:
        """Block until a standalone activity closes and return its result.

        ``handle`` is a :class:`StandaloneActivityHandle` or an activity id. A failure raises
        :class:`~sync_worker.errors.StandaloneActivityFailed` (a ``WorkflowFailed``) naming the
        failure's type and message; ``TimeoutError`` at ``timeout`` (``None``: no deadline).
        """
        activity_id = handle if isinstance(handle, str) else handle.activity_id
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            described = self.describe_activity(activity_id)
            status = described.status
            if status == "completed":
                return described.result
            if status == "failed":
                failure_type, message, failure = self._activity_failure(described)
                raise errors.StandaloneActivityFailed(activity_id, failure_type, message, failure)
            if status in ("cancelled", "canceled"):
                raise errors.WorkflowCancelled(described.closed_reason
                                               or f"standalone activity {activity_id} was cancelled")
            if status == "terminated":
                raise errors.WorkflowTerminated(described.closed_reason
                                                or f"standalone activity {activity_id} was terminated")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"standalone activity {activity_id} still {status!r} after {timeout} s")
            time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic())))

    def _activity_failure(
        self, described: StandaloneActivityExecution
    ) -> Tuple[Optional[str], Optional[str], Optional[Dict[str, Any]]]:
        """(type, message, failure) of a failed activity: from ``describe``, else the host run's history."""
        failure = described.failure
        if failure is None and described.workflow_run_id:
            failure = self._host_run_failure(described.activity_id, described.workflow_run_id)
        if failure is None:
            return None, described.closed_reason, None
        failure_type = opt_str(failure.get("type")) or opt_str(failure.get("exception_type")) or opt_str(
            failure.get("exception_class")) or opt_str(failure.get("class"))
        return failure_type, opt_str(failure.get("message")), failure

    def _host_run_failure(self, activity_id: str, run_id: str) -> Optional[Dict[str, Any]]:
        try:
            page = body_of(self._call(
                "control", "GET", f"/workflows/{segment(activity_id)}/runs/{segment(run_id)}/history",
                route="/workflows/{id}/runs/{runId}/history", params={"page_size": 1000},
                operation="workflow.history"))
        except errors.ServerError:
            return None
        events = [e for e in page.get("events") or [] if isinstance(e, dict)]
        for kind in ("ActivityFailed", "WorkflowFailed"):  # the activity's own report says most
            for event in reversed(events):
                if event.get("event_type") == kind:
                    payload = mapping(event.get("payload")) or {}
                    return mapping(payload.get("failure")) or payload
        return None

    def cancel_activity(self, activity_id: str, *, reason: Optional[str] = None) -> None:
        """Cancel a standalone activity (through its host run)."""
        self._call("control", "POST", f"/workflows/{segment(activity_id)}/cancel", route="/workflows/{id}/cancel",
                   body={"reason": reason} if reason is not None else {}, retry=RetryMode.CONNECT_ONLY,
                   operation="activity.cancel")


def _one_timeout(name: str, seconds: Optional[int], alias: TimeoutValue) -> Optional[int]:
    """One timeout from either spelling, as whole seconds (rounded up)."""
    if alias is None:
        return seconds
    if seconds is not None:
        raise TypeError(f"pass {name}_seconds or {name}, not both")
    value = alias.total_seconds() if isinstance(alias, timedelta) else alias
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise TypeError(f"{name} must be a number of seconds or a timedelta, got {alias!r}")
    return math.ceil(value)
