"""Bounded step results: reuse the worker's failure-report limits for nestjs ``error`` objects.

A step's ``error`` (``message``, ``stack``, ``details``) is diagnostic text like a Durable Workflow
failure report, and an unbounded one (a 50 MB exception message, a stack of a deep recursion) would
land on the engine's checkpoint row. :func:`bound_error` runs it through
:func:`sync_worker.failure_reports.bound_request` -- the same message / stack / detail caps and
truncation markers -- and keeps the identity keys (``code``, ``retryable``) untouched.

:func:`encode_result` is the last check before a result leaves the worker: an output JSON cannot
carry becomes a non-retryable failure that says so, instead of a crash that loses the step.
"""

from __future__ import annotations

import json
from typing import Any, Dict

from ..errors import FailureReportTooLarge
from ..failure_reports import bound_request

__all__ = ["bound_error", "encode_decision", "encode_result"]

# A worker route whose single failure report is unstructured: message, stack_trace, details.
_ROUTE = "/worker/workflow-tasks/nestjs-step/fail"


def bound_error(error: Dict[str, Any]) -> Dict[str, Any]:
    """``error`` with message, stack and details within the failure-report limits."""
    report: Dict[str, Any] = {"message": str(error.get("message", ""))}
    if isinstance(error.get("stack"), str):
        report["stack_trace"] = error["stack"]
    if "details" in error:
        report["details"] = error["details"]
    try:
        bounded = bound_request(_ROUTE, {"failure": report})["failure"]
    except FailureReportTooLarge:  # only identity keys left; cannot happen for these few keys
        bounded = {"message": report["message"][:1024]}
    out: Dict[str, Any] = {"message": bounded.get("message", "")}
    for key in ("code", "retryable"):
        if key in error:
            out[key] = error[key]
    if "details" in bounded:
        out["details"] = bounded["details"]
    if isinstance(bounded.get("stack_trace"), str):
        out["stack"] = bounded["stack_trace"]
    return out


def encode_result(result: Dict[str, Any]) -> str:
    """The result as compact JSON; an unencodable output or detail becomes a clear failure."""
    try:
        return json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        failed: Dict[str, Any] = {key: result[key] for key in ("runId", "seq", "stepId", "startedAt") if key in result}
        failed["status"] = "failed"
        failed["error"] = {
            "message": f"step {result.get('stepId')} returned a value JSON cannot carry: {error}"[:2048],
            "code": "unserializable_output",
            "retryable": False,
        }
        return json.dumps(failed, separators=(",", ":"), ensure_ascii=False)


def encode_decision(decision: Dict[str, Any]) -> str:
    """A workflow decision as compact JSON; a value JSON cannot carry (a workflow's output, a
    ``side_effect`` result) fails the run with a message that says so, instead of losing the turn."""
    try:
        return json.dumps(decision, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        failed: Dict[str, Any] = {key: decision[key] for key in ("taskId", "runId") if key in decision}
        failed.update({"status": "failed", "commands": [], "error": {
            "message": f"workflow turn {decision.get('taskId')} produced a value JSON cannot carry: {error}"[:2048],
            "code": "unserializable_output"}})
        return json.dumps(failed, separators=(",", ":"), ensure_ascii=False)
