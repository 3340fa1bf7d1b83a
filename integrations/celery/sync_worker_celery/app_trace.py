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

#: Exact types whose ``reprlib`` form is their builtin ``repr`` (up to the limits checked in
#: :func:`_plain_repr`): a task's usual arguments and results skip ``reprlib``'s dispatch.
_PLAIN = (float, bool, type(None))


def _plain_repr(value: Any) -> Optional[str]:
    """``_repr.repr(value)`` when it is sure to equal ``repr(value)``, else None (then ask ``reprlib``).

    Flat lists and tuples of at most ``maxlist``/``maxtuple`` elements, an empty dict, and scalars:
    ``float``, ``bool``, ``None``, ``int`` within ``maxlong`` digits, ``str`` whose repr is within
    ``maxstring`` — nothing ``reprlib`` would shorten."""
    kind = type(value)
    if kind in _PLAIN:
        return repr(value)
    if kind is int:
        text = repr(value)
        return text if len(text) <= _repr.maxlong else None
    if kind is str:
        text = repr(value)
        return text if len(text) <= _repr.maxstring else None
    if kind is list or kind is tuple:
        if len(value) > (_repr.maxlist if kind is list else _repr.maxtuple):
            return None
        for item in value:
            if _plain_repr(item) is None or type(item) is list or type(item) is tuple:
                return None
        return repr(value)
    if kind is dict and not value:
        return "{}"
    return None


def safe_repr(value: Any) -> str:
    plain = _plain_repr(value)
    if plain is not None:
        return plain
    try:
        return _repr.repr(value)
    except Exception:  # a broken __repr__ must not fail the task
        return f"<unrepresentable {type(value).__name__}>"


def _reprs(request: Any) -> Dict[str, Any]:
    return {"args": getattr(request, "argsrepr", None) or safe_repr(request.args),
            "kwargs": getattr(request, "kwargsrepr", None) or safe_repr(request.kwargs)}


# The records' caller fields (pathname, lineno, funcName) are this one-line function's, whichever
# way a record is made: keep its body on the ``def`` line (``_CALLER`` reads it from the code object).
def _log(t: Any, lv: int, fmt: str, ctx: Any, ei: Any) -> None: t.log(lv, fmt, ctx, exc_info=ei, extra={"data": ctx})


#: What ``Logger.findCaller`` returns for a record logged from :func:`_log`.
_CALLER = (_log.__code__.co_filename, _log.__code__.co_firstlineno, _log.__code__.co_name)


def _write(target: logging.Logger, level: int, fmt: str, context: Dict[str, Any], exc_info: Any = None) -> None:
    """Log ``fmt % context`` with ``extra={"data": context}``, as :func:`_log` does.

    A plain ``logging.Logger`` (its ``log``, ``_log`` and ``findCaller`` the stdlib's, caller
    lookup not turned off) gets the record ``Logger._log`` would make, with the caller fields
    known in advance (:data:`_CALLER`) instead of found by walking the stack; record factory,
    ``makeRecord``, filters and handlers are the logger's own. Any other logger goes through
    :func:`_log`."""
    if not target.isEnabledFor(level):
        return
    kind = type(target)
    if (kind.log is _Logger.log and kind._log is _Logger._log and kind.findCaller is _Logger.findCaller
            and getattr(logging, "_srcfile", None)):
        target.handle(target.makeRecord(target.name, level, _CALLER[0], _CALLER[1], fmt, (context,),
                                        exc_info, _CALLER[2], {"data": context}, None))
    else:
        _log(target, level, fmt, context, exc_info)


_Logger = logging.Logger


def log_received(request: Any) -> None:
    context = {"id": request.id, "name": request.task, **_reprs(request), "eta": request.eta}
    _write(strategy_logger, logging.INFO, LOG_RECEIVED, context)


def log_success(request: Any, retval: Any, runtime: float) -> None:
    context = {"id": request.id, "name": request.task, "return_value": safe_repr(retval), "runtime": runtime,
               **_reprs(request)}
    _write(logger, logging.INFO, LOG_SUCCESS, context)


def log_retry(request: Any, exc: Optional[BaseException]) -> None:
    context = {"hostname": request.hostname, "id": request.id, "name": request.task, "exc": str(exc),
               **_reprs(request)}
    _write(logger, logging.INFO, LOG_RETRY, context)


def log_failure(request: Any, exc: BaseException, expected: bool) -> None:
    """``expected``: the exception is in the task's ``throws`` (INFO, no traceback), as in Celery."""
    context = {"hostname": request.hostname, "id": request.id, "name": request.task, "exc": safe_repr(exc),
               "traceback": None, **_reprs(request),
               "description": "raised expected" if expected else "raised unexpected", "internal": False}
    _write(logger, logging.INFO if expected else logging.ERROR, LOG_FAILURE, context,
         exc_info=None if expected else (type(exc), exc, exc.__traceback__))
