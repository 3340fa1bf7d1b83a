"""Malformed tasks: checked before anything runs, counted, logged once, reported when identifiable.

A task missing what the contract says it **must** carry (protocol §4.2, §5.2, §6.2) is never
run: an activity without an attempt id would complete with ``activity_attempt_id: ""``, a
workflow task without ``task_id`` would be failed to a URL with an empty id. Each one is

* counted (``sync_worker_worker_tasks`` with ``outcome="malformed"``);
* logged once at WARNING, naming the task kind, its id when known and every missing field;
* reported to the server as a non-retryable ``MalformedTask`` failure when the fields that
  identify the lease are present (a retry would deliver the same broken task), else left to
  the server's lease timeout.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import WorkerShutdown

__all__ = ["MALFORMED_FAILURE_TYPE", "reject_malformed", "task_problems"]

logger = logging.getLogger("sync_worker.worker")

MALFORMED_FAILURE_TYPE = "MalformedTask"


def _text(task: Mapping[str, Any], *keys: str) -> Optional[str]:
    for key in keys:
        value = task.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def task_problems(kind: str, task: Any) -> List[str]:
    """What is wrong with a polled task, as short phrases (``[]`` when it may run)."""
    if not isinstance(task, Mapping):
        return ["the task is not an object"]
    problems: List[str] = []
    required: Tuple[Tuple[str, ...], ...]
    if kind == "workflow":
        required = (("task_id",), ("workflow_type",))
        attempt_key: Optional[str] = "workflow_task_attempt"
    elif kind == "activity":
        required = (("task_id",), ("activity_attempt_id", "attempt_id"), ("activity_type",))
        attempt_key = None
    else:
        # A missing workflow_type or query_name is answered by the query path itself (§6.2).
        required = (("query_task_id",),)
        attempt_key = "query_task_attempt"
    for keys in required:
        if _text(task, *keys) is None:
            problems.append(f"missing {keys[0]}")
    if attempt_key is not None and attempt_key in task and not _positive_int(task.get(attempt_key)):
        problems.append(f"{attempt_key} is not an integer >= 1")
    if kind == "activity" and "attempt_number" in task and not _positive_int(task.get("attempt_number")):
        problems.append("attempt_number is not an integer >= 1")
    return problems


def _failure(kind: str, problems: List[str]) -> Dict[str, Any]:
    return {"message": f"malformed {kind} task from the server: {'; '.join(problems)}; it was not run",
            "type": MALFORMED_FAILURE_TYPE, "non_retryable": True}


def _report(kind: str, task: Mapping[str, Any], problems: List[str], client: Any, worker_id: str,
            cancel: Any) -> str:
    failure = _failure(kind, problems)
    if kind == "workflow":
        task_id = _text(task, "task_id")
        if task_id is None:
            return "not reported (no task_id to report it against)"
        attempt = task.get("workflow_task_attempt", 1)
        client.fail_workflow_task(task_id, lease_owner=worker_id, failure=failure, cancel=cancel,
                                  workflow_task_attempt=attempt if _positive_int(attempt) else 1)
    elif kind == "activity":
        task_id, attempt_id = _text(task, "task_id"), _text(task, "activity_attempt_id", "attempt_id")
        if task_id is None or attempt_id is None:
            return "not reported (no task_id and activity_attempt_id to report it against)"
        client.fail_activity_task(task_id, activity_attempt_id=attempt_id, lease_owner=worker_id,
                                  failure=failure, cancel=cancel)
    else:
        query_task_id = _text(task, "query_task_id")
        if query_task_id is None:
            return "not reported (no query_task_id to report it against)"
        attempt = task.get("query_task_attempt", 1)
        client.fail_query_task(query_task_id, lease_owner=worker_id, cancel=cancel,
                               query_task_attempt=attempt if _positive_int(attempt) else 1,
                               failure={**failure, "reason": "query_rejected"})
    return "reported to the server as failed"


def reject_malformed(kind: str, task: Any, *, client: Any, worker_id: str, cancel: Any = None) -> bool:
    """If ``task`` is malformed: log it once, report it if identifiable and return True (never run it)."""
    problems = task_problems(kind, task)
    if not problems:
        return False
    mapping: Mapping[str, Any] = task if isinstance(task, Mapping) else {}
    ident = _text(mapping, "query_task_id" if kind == "query" else "task_id") or "<no id>"
    try:
        outcome = _report(kind, mapping, problems, client, worker_id, cancel)
    except WorkerShutdown:
        outcome = "not reported (shutting down)"
    except Exception as error:  # the lease times out on the server; the worker keeps running
        outcome = f"not reported ({type(error).__name__})"
    logger.warning("malformed %s task %s from the server (%s); not run, %s", kind, ident, "; ".join(problems),
                   outcome)
    return True
