"""A durable ``django.tasks`` backend: every enqueued task is a standalone durable activity.

``TASKS = {"default": {"BACKEND": "sync_worker_django.tasks.DurableWorkflowBackend",
"QUEUES": ["default"], "OPTIONS": {...}}}`` works on Django 6's built-in ``django.tasks``
and on the ``django-tasks`` backport (Django 4.2/5.2).

* ``task.enqueue(*args, **kwargs)`` starts activity ``task.module_path`` on
  ``task.queue_name`` with input ``[args, kwargs]`` (``durable_worker`` serves the queue and
  runs the function); the returned ``TaskResult.id`` is the activity id.
* ``backend.get_result(id)`` / ``TaskResult.refresh()`` read the activity and its history:
  ``status`` (READY, RUNNING, SUCCESSFUL, FAILED), ``return_value``, ``errors`` (one
  ``TaskError`` per failed attempt: exception class path and traceback), ``worker_ids``
  (one per attempt, so ``attempts`` counts them) and the timestamps.
* ``takes_context`` tasks get a ``TaskContext`` whose ``attempt`` is the attempt number.
* The flags tell the truth: no ``run_after`` (``supports_defer = False``), no priority
  (``supports_priority = False``), no coroutines; results from any process
  (``supports_get_result = True``). Anything else is refused by the framework's own
  ``InvalidTask`` (``InvalidTaskError`` in the backport).

``OPTIONS``: ``RETRY_POLICY`` (``{"max_attempts": 3, "backoff_seconds": [1, 5]}``, default
one attempt), ``START_TO_CLOSE_TIMEOUT`` (seconds, default 300), ``HEARTBEAT_TIMEOUT``
(seconds, default none), ``ENQUEUE_ON_COMMIT`` (default True: inside ``atomic()`` the
activity starts after commit, never on rollback).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Dict, List, Optional, Tuple

from sync_worker import payloads
from sync_worker.errors import WorkflowNotFound

from .task_registry import activity_type_for, register_task, registered_tasks
from .values import check_wire_values

try:  # Django >= 6.0 ships the framework
    from django.tasks import TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued
except ImportError:  # the django-tasks backport
    from django_tasks import TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TaskError
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued

__all__ = ["DurableWorkflowBackend"]

logger = logging.getLogger("sync_worker.django.tasks")

_STATUS = {
    "scheduled": "READY", "retrying": "READY", "pending": "READY",
    "running": "RUNNING",
    "completed": "SUCCESSFUL",
    "failed": "FAILED", "cancelled": "FAILED", "canceled": "FAILED", "terminated": "FAILED", "timed_out": "FAILED",
}


def _parse_time(value: Any) -> Optional[datetime.datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class DurableWorkflowBackend(BaseTaskBackend):
    supports_defer = False
    supports_async_task = False
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: Dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = self.options or {}
        self.retry_policy: Optional[Dict[str, Any]] = options.get("RETRY_POLICY")
        self.start_to_close_timeout = int(options.get("START_TO_CLOSE_TIMEOUT", 300))
        self.heartbeat_timeout: Optional[int] = options.get("HEARTBEAT_TIMEOUT")
        self.enqueue_on_commit = bool(options.get("ENQUEUE_ON_COMMIT", True))

    # -- defining and enqueueing -------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """The framework's checks, then remember the task so ``durable_worker`` serves it."""
        super().validate_task(task)
        register_task(task)

    def _client(self) -> Any:
        from .workers import get_client

        return get_client()

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        positional, keywords = list(args), dict(kwargs)
        check_wire_values([positional, keywords], what=f"{task.module_path}.enqueue()")
        from django.utils.crypto import get_random_string

        activity_id = f"task-{get_random_string(32)}"
        result = TaskResult(
            task=task, id=activity_id, status=TaskResultStatus.READY, enqueued_at=None, started_at=None,
            finished_at=None, last_attempted_at=None, args=positional, kwargs=keywords, backend=self.alias,
            errors=[], worker_ids=[],
        )

        def send() -> None:
            self._client().start_activity(
                activity_type_for(task), positional, keywords, task_queue=task.queue_name, activity_id=activity_id,
                retry_policy=self.retry_policy, start_to_close_timeout_seconds=self.start_to_close_timeout,
                heartbeat_timeout_seconds=self.heartbeat_timeout,
            )
            from django.utils import timezone

            object.__setattr__(result, "enqueued_at", timezone.now())
            task_enqueued.send(type(self), task_result=result)

        if self.enqueue_on_commit:
            from django.db import transaction

            transaction.on_commit(send)
        else:
            send()
        return result

    # -- results ---------------------------------------------------------------------------------

    def _task_for(self, activity_type: str) -> Any:
        task = registered_tasks().get(activity_type)
        if task is None:
            from django.utils.module_loading import import_string

            try:
                task = import_string(activity_type)
            except ImportError:
                raise TaskResultDoesNotExist(f"task {activity_type!r} is not defined in this process") from None
        return task

    def _history(self, activity_id: str, run_id: Any) -> List[Dict[str, Any]]:
        if not isinstance(run_id, str) or not run_id:
            return []
        return list(self._client().iter_history(activity_id, run_id))

    def get_result(self, result_id: str) -> Any:
        client = self._client()
        try:
            described = client.describe_activity(result_id)
        except WorkflowNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        except Exception as error:
            if getattr(error, "status", None) == 404 or "not_found" in str(error):
                raise TaskResultDoesNotExist(result_id) from None
            raise
        task = self._task_for(str(described.get("activity_type") or ""))
        events = self._history(result_id, described.get("workflow_run_id"))
        args, kwargs = self._arguments(events)
        worker_ids, started, last_started, errors, enqueued = self._attempts(events, described.raw or {})
        status_name = _STATUS.get(str(described.get("activity_status") or described.get("status")), "READY")
        if status_name == "READY" and described.get("activity_status") == "running":
            status_name = "RUNNING"
        result = TaskResult(
            task=task, id=result_id, status=TaskResultStatus[status_name], enqueued_at=enqueued,
            started_at=started, finished_at=_parse_time(described.get("closed_at")),
            last_attempted_at=last_started, args=args, kwargs=kwargs, backend=self.alias, errors=errors,
            worker_ids=worker_ids,
        )
        if status_name == "SUCCESSFUL":
            object.__setattr__(result, "_return_value", described.get("result"))
        return result

    @staticmethod
    def _arguments(events: List[Dict[str, Any]]) -> Tuple[List[Any], Dict[str, Any]]:
        for event in events:
            if event.get("event_type") == "WorkflowStarted":
                envelope = (event.get("payload") or {}).get("arguments")
                if isinstance(envelope, dict) and envelope.get("blob"):
                    decoded = payloads.decode_envelope(envelope)
                    if isinstance(decoded, list) and len(decoded) == 2:
                        return list(decoded[0] or []), dict(decoded[1] or {})
        return [], {}

    @staticmethod
    def _attempts(events: List[Dict[str, Any]], described: Dict[str, Any]
                  ) -> Tuple[List[str], Optional[datetime.datetime], Optional[datetime.datetime], List[Any],
                             Optional[datetime.datetime]]:
        worker_ids: List[str] = []
        errors: List[Any] = []
        first: Optional[datetime.datetime] = None
        last: Optional[datetime.datetime] = None
        enqueued: Optional[datetime.datetime] = None
        for event in events:
            kind = event.get("event_type")
            payload = event.get("payload") or {}
            when = _parse_time(event.get("recorded_at"))
            if kind == "WorkflowStarted" and enqueued is None:
                enqueued = when
            elif kind == "ActivityStarted":
                worker_ids.append(str(payload.get("lease_owner") or ""))
                first = first or when
                last = when
            elif kind in ("ActivityRetryScheduled", "ActivityFailed", "ActivityTimedOut"):
                errors.append(DurableWorkflowBackend._error(kind, payload, described))
        return worker_ids, first, last, errors, enqueued

    @staticmethod
    def _error(kind: str, payload: Dict[str, Any], described: Dict[str, Any]) -> Any:
        exception = payload.get("exception_class") or payload.get("exception_type") or "builtins.Exception"
        message = str(payload.get("message") or kind)
        traceback = f"{exception}: {message}"
        failure = described.get("failure")
        if kind != "ActivityRetryScheduled" and isinstance(failure, dict) and failure.get("stack_trace"):
            traceback = str(failure["stack_trace"])
        if "." not in str(exception):
            exception = f"builtins.{exception}"
        return TaskError(exception_class_path=str(exception), traceback=traceback)
