"""Celery's task log lines (``celery.app.trace``): the same logger names, formats and ``extra``.

Projects that filter or ship Celery's worker logs match on the loggers ``celery.worker.strategy``
(a task received) and ``celery.app.trace`` (succeeded, failed, retried), and custom handlers read
the record's ``data`` (the format's context, as Celery passes it). The worker writes them for every
task it runs (``execution.activity_for``); reached as ``sync_worker_celery.app.trace`` as in Celery.
The core runtime's own task lines are written as well (logger ``sync_worker``).
"""

from __future__ import annotations

import logging
import reprlib
from typing import Any, Dict, Optional

__all__ = ["LOG_FAILURE", "LOG_IGNORED", "LOG_INTERNAL_ERROR", "LOG_RECEIVED", "LOG_REJECTED", "LOG_RETRY",
           "LOG_SUCCESS", "log_failure", "log_received", "log_retry", "log_success"]

# The format strings are Celery's (its documented log lines), so log parsers keep matching.
LOG_RECEIVED = "Task %(name)s[%(id)s] received"
LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"
LOG_FAILURE = "Task %(name)s[%(id)s] %(description)s: %(exc)s"
LOG_INTERNAL_ERROR = "Task %(name)s[%(id)s] %(description)s: %(exc)s"
LOG_IGNORED = "Task %(name)s[%(id)s] %(description)s"
LOG_REJECTED = "Task %(name)s[%(id)s] %(exc)s"
LOG_RETRY = "Task %(name)s[%(id)s] retry: %(exc)s"

strategy_logger = logging.getLogger("celery.worker.strategy")
logger = logging.getLogger("celery.app.trace")

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 1024


def safe_repr(value: Any) -> str:
    try:
        return _repr.repr(value)
    except Exception:  # a broken __repr__ must not fail the task
        return f"<unrepresentable {type(value).__name__}>"


def _reprs(request: Any) -> Dict[str, Any]:
    return {"args": getattr(request, "argsrepr", None) or safe_repr(request.args),
            "kwargs": getattr(request, "kwargsrepr", None) or safe_repr(request.kwargs)}


def _log(target: logging.Logger, level: int, fmt: str, context: Dict[str, Any], exc_info: Any = None) -> None:
    if target.isEnabledFor(level):
        target.log(level, fmt, context, exc_info=exc_info, extra={"data": context})


def log_received(request: Any) -> None:
    context = {"id": request.id, "name": request.task, **_reprs(request), "eta": request.eta}
    _log(strategy_logger, logging.INFO, LOG_RECEIVED, context)


def log_success(request: Any, retval: Any, runtime: float) -> None:
    context = {"id": request.id, "name": request.task, "return_value": safe_repr(retval), "runtime": runtime,
               **_reprs(request)}
    _log(logger, logging.INFO, LOG_SUCCESS, context)


def log_retry(request: Any, exc: Optional[BaseException]) -> None:
    context = {"hostname": request.hostname, "id": request.id, "name": request.task, "exc": str(exc),
               **_reprs(request)}
    _log(logger, logging.INFO, LOG_RETRY, context)


def log_failure(request: Any, exc: BaseException, expected: bool) -> None:
    """``expected``: the exception is in the task's ``throws`` (INFO, no traceback), as in Celery."""
    context = {"hostname": request.hostname, "id": request.id, "name": request.task, "exc": safe_repr(exc),
               "traceback": None, **_reprs(request),
               "description": "raised expected" if expected else "raised unexpected", "internal": False}
    _log(logger, logging.INFO if expected else logging.ERROR, LOG_FAILURE, context,
         exc_info=None if expected else (type(exc), exc, exc.__traceback__))
