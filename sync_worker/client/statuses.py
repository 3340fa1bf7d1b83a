"""HTTP status (and error body ``reason``) → the typed exception of :mod:`sync_worker.errors`."""

from __future__ import annotations

from typing import Optional

from .. import errors

__all__ = ["raise_for_status"]


def _body_reason(body: object) -> Optional[str]:
    if isinstance(body, dict):
        reason = body.get("reason")
        return reason if isinstance(reason, str) else None
    return None


_QUERY_409 = {"query_rejected", "query_worker_unavailable", "query_worker_incompatible",
              "query_workflow_state_unavailable"}
_QUERY_504 = {"query_worker_timeout", "query_worker_execution_timeout", "query_task_not_claimed"}
#: Why an update's validator could not decide (409 / 422 / 504): the SDK's ``UpdateValidationFailed``.
UPDATE_VALIDATION_FAILURES = frozenset({
    "update_validator_contract_missing", "update_validation_request_id_required",
    "update_validation_idempotency_conflict", "update_validation_capability_unsupported",
    "update_validator_worker_unavailable", "update_validator_worker_incompatible", "update_validator_worker_lost",
    "update_validation_task_not_claimed", "update_validation_execution_timeout", "update_validation_worker_failed",
    "stale_update_validation_completion",
})


def raise_for_status(status: int, body: object, *, route: str, operation: str = "") -> None:
    """Raise the typed exception for an error ``status``; return for 1xx-3xx."""
    if status < 400:
        return
    reason = _body_reason(body)
    cls: type[errors.ServerError] = errors.ServerError
    if operation == "schedule.list" and status in (400, 403, 409, 422):
        cls = errors.ScheduleListError  # the published SDK's rule: a refused filter or cursor
    elif status == 401:
        cls = errors.Unauthorized
    elif status == 403:
        cls = errors.Forbidden
    elif status == 404:
        if reason == "namespace_not_found":
            cls = errors.NamespaceNotFound
        elif reason == "schedule_not_found" or (operation.startswith("schedule.") and reason is None):
            cls = errors.ScheduleNotFound
        elif reason == "unknown_signal":
            cls = errors.SignalFailed
        elif reason in ("query_not_found", "rejected_unknown_query"):
            cls = errors.QueryFailed
        elif reason in ("workflow_not_found", "instance_not_found", "run_not_found") or (
            operation.startswith("workflow") and reason is None
        ):
            cls = errors.WorkflowNotFound
        else:
            cls = errors.NotFound
    elif status == 409:
        if reason in ("duplicate_not_allowed", "instance_already_started"):
            cls = errors.WorkflowAlreadyStarted
        elif reason == "schedule_already_exists":
            cls = errors.ScheduleAlreadyExists
        elif reason in _QUERY_409 or (reason == "run_not_active" and operation == "workflow.query"):
            cls = errors.QueryFailed
        elif reason in ("run_not_active", "request_id_conflict") and operation == "workflow.signal":
            cls = errors.SignalFailed
        elif reason in ("update_rejected", "update_validator_rejected"):
            cls = errors.UpdateRejected
        elif reason in UPDATE_VALIDATION_FAILURES:
            cls = errors.UpdateValidationFailed
        elif reason == "request_id_conflict" and operation == "workflow.update":
            cls = errors.UpdateFailed
        else:
            cls = errors.Conflict
    elif status in (400, 413, 415, 422):
        if reason == "update_validator_rejected" and status == 422:
            cls = errors.UpdateRejected
        elif reason in UPDATE_VALIDATION_FAILURES and status == 422:
            cls = errors.UpdateValidationFailed
        elif reason == "invalid_signal_arguments":
            cls = errors.SignalFailed
        elif reason == "invalid_query_arguments":
            cls = errors.QueryFailed
        elif isinstance(body, dict) and body.get("update_status") == "failed":
            cls = errors.UpdateFailed
        else:
            cls = errors.InvalidArgument
    elif status == 504 and reason in _QUERY_504:
        cls = errors.QueryFailed
    elif status == 504 and reason in UPDATE_VALIDATION_FAILURES:
        cls = errors.UpdateValidationFailed
    elif status == 429:
        cls = errors.BackpressureError
    elif status in (502, 503, 504):
        cls = errors.ServerUnavailable
    raise cls(status, body, route=route)
