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
from typing import Any, Dict, Mapping, Optional

__all__ = ["LOG_FORMATS", "JsonFormatter", "bound", "bound_task", "current", "formatter_for", "task_fields"]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_fields: contextvars.ContextVar[Any] = contextvars.ContextVar("sync_worker_task_log", default=None)


class _TaskIds:
    """A leased task's ids, worked out only when a log line asks for them (most tasks log nothing)."""

    __slots__ = ("_args", "_fields")

    def __init__(self, kind: str, raw: Mapping[str, Any], task_queue: str, namespace: Optional[str]) -> None:
        self._args = (kind, raw, task_queue, namespace)
        self._fields: Optional[Dict[str, Any]] = None

    def resolve(self) -> Dict[str, Any]:
        if self._fields is None:
            kind, raw, task_queue, namespace = self._args
            fields = task_fields(kind, raw, task_queue=task_queue, namespace=namespace)
            self._fields = {key: value for key, value in fields.items() if value is not None}
        return self._fields


class _Binding:
    """``with`` block that binds a value to the context variable and resets it after."""

    __slots__ = ("_token", "_value")

    def __init__(self, value: Any) -> None:
        self._value = value
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _fields.set(self._value)

    def __exit__(self, *exc: object) -> None:
        _fields.reset(self._token)


def current() -> Dict[str, Any]:
    """The ids bound for the running task (empty outside a task)."""
    value = _fields.get()
    if value is None:
        return {}
    return dict(value.resolve() if isinstance(value, _TaskIds) else value)


def bound(fields: Mapping[str, Any]) -> _Binding:
    """Bind ``fields`` (None values left out) as the running task's ids for the block."""
    return _Binding({key: value for key, value in fields.items() if value is not None})


def bound_task(kind: str, raw: Mapping[str, Any], *, task_queue: str, namespace: Optional[str]) -> _Binding:
    """Bind the ids of a leased task (:func:`task_fields`) for the block, computed at the first log line."""
    return _Binding(_TaskIds(kind, raw, task_queue, namespace))


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
