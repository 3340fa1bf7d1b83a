"""The ids of the task a log line belongs to, and the JSON log format that prints them.

The runtime binds the running task's ids (:func:`bound`) for the whole task: the per-task lines
("Task billing.charge[...] received"), the worker's warnings about it and whatever the task's own
code logs. ``--log-format json`` (every command; ``SYNC_WORKER_LOG_FORMAT``; the Django setting
``LOG_FORMAT``) installs :class:`JsonFormatter`: one JSON object per line with ``ts``, ``level``,
``logger``, ``message``, the bound ids (``task_kind``, ``task_id``, ``workflow_id``, ``run_id``,
``workflow_type``, ``activity_type``, ``attempt``, ``task_queue``, ``namespace``) and
``exc_info`` as text. In text mode nothing changes: the per-task lines keep Celery's wording.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, Optional

__all__ = ["LOG_FORMATS", "JsonFormatter", "bound", "current", "formatter_for", "task_fields"]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_fields: contextvars.ContextVar[Optional[Dict[str, Any]]] = contextvars.ContextVar("sync_worker_task_log", default=None)


def current() -> Dict[str, Any]:
    """The ids bound for the running task (empty outside a task)."""
    return dict(_fields.get() or {})


@contextmanager
def bound(fields: Mapping[str, Any]) -> Iterator[None]:
    """Bind ``fields`` (None values left out) as the running task's ids for the block."""
    token = _fields.set({key: value for key, value in fields.items() if value is not None})
    try:
        yield
    finally:
        _fields.reset(token)


def task_fields(kind: str, raw: Mapping[str, Any], *, task_queue: str, namespace: Optional[str]) -> Dict[str, Any]:
    """The ids of one leased task (activity, workflow or query poll response) worth a log line."""
    attempt = raw.get("attempt_number", raw.get("workflow_task_attempt", raw.get("query_task_attempt")))
    return {
        "task_kind": kind, "task_id": raw.get("task_id", raw.get("query_task_id")),
        "workflow_id": raw.get("workflow_id"), "run_id": raw.get("run_id"),
        "workflow_type": raw.get("workflow_type"), "activity_type": raw.get("activity_type"),
        "activity_attempt_id": raw.get("activity_attempt_id", raw.get("attempt_id")) if kind == "activity" else None,
        "query_name": raw.get("query_name"), "attempt": attempt, "task_queue": task_queue, "namespace": namespace,
    }


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: the record, the running task's ids, and ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: Dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        body.update(current())
        for key, value in vars(record).items():  # logger.info(..., extra={...})
            if key not in _STANDARD and not key.startswith("_") and key not in body:
                body[key] = value
        if record.exc_info:
            body["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            body["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))


def formatter_for(log_format: Optional[str], text_format: str = TEXT_FORMAT) -> logging.Formatter:
    """The formatter of ``--log-format`` (``text``: ``text_format``; ``json``); ValueError for another name."""
    name = (log_format or "text").strip().lower()
    if name == "json":
        return JsonFormatter()
    if name == "text":
        return logging.Formatter(text_format)
    raise ValueError(f"unknown log format {log_format!r} (expected one of {', '.join(LOG_FORMATS)})")
