"""Reading the refusals of particular operations (protocol §8.2, §3.3): what a typed refusal
says to do, from its body. ``ServerError`` stays a plain carrier of status and body; the
operation that knows which refusal it may get reads it here."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..errors import ServerError

__all__ = ["deregistration_retry_delay", "poll_capacity_delay"]


def _delay(body: Mapping[str, Any]) -> Optional[int]:
    delay = body.get("retry_after_seconds")
    return delay if type(delay) is int and 0 < delay <= 60 else None


def poll_capacity_delay(error: BaseException, task_kind: str, task_queue: str) -> Optional[int]:
    """The advertised wait of a complete typed 429 long-poll capacity refusal for this poll, else None."""
    if not isinstance(error, ServerError) or error.status != 429 or not isinstance(error.body, dict):
        return None
    body = error.body
    complete = (body.get("reason") == "long_poll_capacity_exhausted"
                and body.get("poll_status") == "long_poll_capacity_exhausted"
                and "task" in body and body["task"] is None
                and body.get("task_kind") == task_kind and body.get("task_queue") == task_queue
                and body.get("retryable") is True)
    return _delay(body) if complete else None


def deregistration_retry_delay(error: BaseException, worker_id: str, registration_token: str) -> Optional[int]:
    """The delay of an identity-preserving fenced-deregistration transient (503), else None."""
    if not isinstance(error, ServerError) or error.status != 503 or not isinstance(error.body, dict):
        return None
    body = error.body
    complete = (body.get("reason") in ("backend_lock_pressure", "backend_unavailable")
                and body.get("operation") == "deregister_worker" and body.get("outcome") == "unknown"
                and body.get("worker_id") == worker_id and body.get("registration_token") == registration_token
                and body.get("retryable") is True)
    return _delay(body) if complete else None
