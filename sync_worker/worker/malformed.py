"""Malformed tasks: refused where the poll returns, counted, logged once, reported when identifiable.

A task missing what the contract says it **must** carry (protocol §4.2, §5.2, §6.2) never runs
(``sync_worker.protocol.parse_task`` raises :class:`~sync_worker.protocol.MalformedTask`). Each
one is

* counted (``sync_worker_worker_tasks`` with ``outcome="malformed"``, by the dispatcher);
* logged once at WARNING, naming the task kind, its id when known and every problem;
* reported to the server as a non-retryable ``MalformedTask`` failure when the fields that
  identify the lease are present (a retry would deliver the same broken task), else left to
  the server's lease timeout.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Mapping, Optional

from ..errors import WorkerShutdown
from ..protocol import MalformedTask, WorkerPlane

__all__ = ["MALFORMED_FAILURE_TYPE", "report_malformed"]

logger = logging.getLogger("sync_worker.worker")

MALFORMED_FAILURE_TYPE = "MalformedTask"


def _text(identity: Mapping[str, Any], key: str) -> Optional[str]:
    value = identity.get(key)
    return value if isinstance(value, str) and value else None


def _failure(error: MalformedTask) -> Dict[str, Any]:
    return {"message": f"{error}; it was not run", "type": MALFORMED_FAILURE_TYPE, "non_retryable": True}


def _report(error: MalformedTask, client: WorkerPlane, worker_id: str, cancel: Any) -> str:
    failure, identity, kind = _failure(error), error.identity, error.kind
    if kind == "workflow":
        task_id = _text(identity, "task_id")
        if task_id is None:
            return "not reported (no task_id to report it against)"
        client.fail_workflow_task(task_id, lease_owner=worker_id, failure=failure, cancel=cancel,
                                  workflow_task_attempt=int(identity.get("workflow_task_attempt") or 1))
    elif kind == "update_validation":
        task_id = _text(identity, "update_validation_task_id")
        if task_id is None:
            return "not reported (no update_validation_task_id to report it against)"
        client.reject_update_validation_task(
            task_id, lease_owner=worker_id, cancel=cancel,
            update_validation_attempt=int(identity.get("update_validation_attempt") or 1),
            failure={"message": failure["message"], "reason": "update_validation_worker_failed",
                     "type": MALFORMED_FAILURE_TYPE})
    elif kind == "activity":
        task_id, attempt_id = _text(identity, "task_id"), _text(identity, "activity_attempt_id")
        if task_id is None or attempt_id is None:
            missing = " and ".join(name for name, value in (("task_id", task_id), ("activity_attempt_id", attempt_id))
                                   if value is None)
            return f"not reported (no {missing} to report it against)"
        client.fail_activity_task(task_id, activity_attempt_id=attempt_id, lease_owner=worker_id,
                                  failure=failure, cancel=cancel)
    else:
        query_task_id = _text(identity, "query_task_id")
        if query_task_id is None:
            return "not reported (no query_task_id to report it against)"
        client.fail_query_task(query_task_id, lease_owner=worker_id, cancel=cancel,
                               query_task_attempt=int(identity.get("query_task_attempt") or 1),
                               failure={**failure, "reason": "query_rejected"})
    return "reported to the server as failed"


def report_malformed(error: MalformedTask, *, client: WorkerPlane, worker_id: str, cancel: Any = None) -> None:
    """Log ``error`` once and report it to the server when the lease is identifiable."""
    key = {"query": "query_task_id", "update_validation": "update_validation_task_id"}.get(error.kind, "task_id")
    ident = _text(error.identity, key) or "<no id>"
    try:
        outcome = _report(error, client, worker_id, cancel)
    except WorkerShutdown:
        outcome = "not reported (shutting down)"
    except Exception as failure:  # the lease times out on the server; the worker keeps running
        outcome = f"not reported ({type(failure).__name__})"
    logger.warning("malformed %s task %s from the server (%s); not run, %s", error.kind, ident,
                   "; ".join(error.problems), outcome)
