"""Activity and child-workflow mocks of the in-process harness: calls, retries, outcome events.

A scheduled activity or child resolves against the registered mock at once: the mock is
called once per attempt, up to the command's retry policy (``max_attempts``, ``non_retryable_error_types``;
the back-off is never slept) and the harness's ``mock_attempt_limit``; the outcome becomes the
terminal history event the real server would record (``ActivityCompleted`` / ``ActivityFailed``,
``ChildRunCompleted`` / ``ChildRunFailed``), which the replayer then delivers at the yield.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .. import payloads
from ..errors import NonRetryableError
from ..workflow.failures import exception_class_name, fail_workflow_from_exception
from ..workflow.policies import ActivityRetryPolicy

__all__ = ["MockCallRecord", "canned", "outcome_event", "run_mock"]


@dataclass
class MockCallRecord:
    """One activity or child call of the latest ``execute_workflow`` chain (not a history event).

    ``kind`` is ``"activity"`` or ``"child_workflow"``; ``attempt_count`` counts the calls of
    the mock; ``status`` ends ``completed``, ``failed``, ``attempt_limit_exceeded`` or
    ``interrupted``; ``failure`` keeps the last failure, even when a later attempt succeeded.
    """

    kind: str
    name: str
    run_number: int
    attempt_count: int = 0
    status: str = "running"
    failure: Optional[Dict[str, Any]] = None


def canned(result: Any) -> Callable[..., Any]:
    """A mock that returns ``result`` whatever it is called with."""
    return lambda *arguments: result


def run_mock(record: MockCallRecord, fn: Callable[..., Any], arguments: List[Any], retry_policy: Any,
             attempt_limit: int) -> Tuple[Any, Optional[Dict[str, Any]]]:
    """Call ``fn`` attempt by attempt; ``(result, None)`` or ``(None, failure)`` for the last attempt.

    Raises ``RuntimeError`` (caused by the last failure) when ``attempt_limit`` cuts a larger
    retry budget short: that is a harness limit, not the workflow's retries running out.
    """
    max_attempts, excluded = _retry_budget(retry_policy)
    last_error: Optional[BaseException] = None
    for attempt in range(1, min(max_attempts, attempt_limit) + 1):
        record.attempt_count = attempt
        try:
            result, error = _call(fn, arguments)
        except BaseException:
            record.status = "interrupted"
            raise
        if error is None:
            record.status = "completed"
            return result, None
        failure = _failure(record.kind, error)
        record.failure = failure
        if (failure["non_retryable"] is True or attempt >= max_attempts
                or failure["exception_type"] in excluded or failure["exception_class"] in excluded):
            record.status = "failed"
            return None, failure
        last_error = error
    record.status = "attempt_limit_exceeded"
    raise RuntimeError(f"{record.kind} {record.name!r} reached mock attempt limit {attempt_limit} before its "
                       f"scheduled {max_attempts}-attempt retry budget was exhausted") from last_error


def _call(fn: Callable[..., Any], arguments: List[Any]) -> Tuple[Any, Optional[Exception]]:
    try:
        result = fn(*arguments)
    except Exception as error:
        return None, error
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # no "coroutine was never awaited" warning
        raise TypeError("WorkflowEnvironment requires synchronous activity and child mock callables")
    return result, None


def _retry_budget(policy: Any) -> Tuple[int, Set[str]]:
    """``(max_attempts, non-retryable type names)`` of a retry policy (object or mapping); 1 without one."""
    if policy is None:
        return 1, set()
    if isinstance(policy, ActivityRetryPolicy):
        maximum: Any = policy.max_attempts
        types: Any = list(policy.non_retryable_error_types or [])
    elif isinstance(policy, Mapping):
        maximum = policy.get("max_attempts", 1)
        types = policy.get("non_retryable_error_types", [])
    else:
        raise TypeError("mock retry_policy must be a retry policy object or mapping")
    if type(maximum) is not int or maximum < 1:
        raise ValueError("mock retry_policy max_attempts must be a positive integer")
    if not isinstance(types, (list, tuple)):
        raise TypeError("mock retry_policy non_retryable_error_types must be a list")
    return maximum, {name.strip() for name in types if isinstance(name, str) and name.strip()}


def _failure(kind: str, error: Exception) -> Dict[str, Any]:
    if kind == "child_workflow":
        command = fail_workflow_from_exception(error)
        return {"message": command.message, "exception_type": command.exception_type,
                "exception_class": command.exception_class, "exception": command.exception,
                "non_retryable": command.non_retryable}
    return {"message": str(error), "exception_type": type(error).__name__,
            "exception_class": exception_class_name(error), "non_retryable": isinstance(error, NonRetryableError)}


def outcome_event(kind: str, name: str, sequence: int, result: Any,
                  failure: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The terminal event the server records for the call (what the replayer resolves the yield with)."""
    if failure is None:
        return {"event_type": "ActivityCompleted" if kind == "activity" else "ChildRunCompleted",
                "payload": {"sequence": sequence, "result": payloads.envelope(result), "payload_codec": "avro"}}
    payload: Dict[str, Any] = {"sequence": sequence, "message": failure["message"],
                               "exception_type": failure["exception_type"],
                               "exception_class": failure["exception_class"]}
    if failure.get("exception") is not None:
        payload["exception"] = failure["exception"]
    if kind == "activity":
        payload.update({"activity_type": name, "non_retryable": failure["non_retryable"]})
        return {"event_type": "ActivityFailed", "payload": payload}
    payload["child_workflow_type"] = name
    return {"event_type": "ChildRunFailed", "payload": payload}
