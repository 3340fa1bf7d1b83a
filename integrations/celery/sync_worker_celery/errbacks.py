"""Celery's two errback forms, decided as Celery decides them.

An errback task whose function takes more than one positional argument (or ``*args``), and is
not ``bind=True``, is *new style*: Celery calls it as ``errback(request, exc, traceback)`` (with
the signature's own arguments after those). Any other errback is *old style*: ``errback(task_id)``.

The canvas run knows the failure (its type, class and message) but not the task's Python
objects, so a new-style errback is scheduled with plain data -- the failed call's request as a
dict, the exception as ``{type, class, message}``, the traceback text -- and the activity
rebuilds them (:func:`decode_args`): ``request`` is a :class:`~sync_worker_celery.request.Context`
(``request.id``, ``.task``, ``.args``...), ``exc`` the task's own exception type when importable.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["decode_args", "mark", "new_style", "new_style_call"]

FLAG = "errback_new_style"


def new_style(app: Celery, name: Optional[str]) -> bool:
    """Whether the task ``name`` takes Celery's new-style errback arguments (request, exc, traceback)."""
    task = app.tasks.get(name) if name else None
    if task is None or getattr(task, "bind", False):
        return False
    fun = getattr(task, "__wrapped__", None)
    if fun is None:  # a class-based task: Celery calls those old style too
        return False
    try:
        spec = inspect.getfullargspec(inspect.unwrap(fun))
    except TypeError:
        return False
    return bool(spec.varargs) or len(spec.args) > 1


def mark(app: Celery, plan: Dict[str, Any]) -> Dict[str, Any]:
    """An errback's compiled plan, flagged when it is a new-style errback task."""
    if plan.get("kind") == "task" and new_style(app, plan.get("name")):
        plan[FLAG] = True
    return plan


def new_style_call(errback: Dict[str, Any], failed: Dict[str, Any], failed_id: str,
                   error: Optional[BaseException]) -> Dict[str, Any]:
    """The errback's task node with ``(request, exc, traceback)`` before its own arguments."""
    request = {"id": failed_id, "task": failed.get("name"), "args": list(failed.get("args") or []),
               "kwargs": dict(failed.get("kwargs") or {})}
    exc = {"type": getattr(error, "exception_type", None) or type(error).__name__,
           "class": getattr(error, "exception_class", None), "message": str(error) if error else ""}
    meta = dict(errback.get("meta") or {}, **{FLAG: True})
    return dict(errback, args=[request, exc, None, *errback.get("args", [])], immutable=True, meta=meta)


def decode_args(args: List[Any]) -> List[Any]:
    """On the worker: the request dict → ``Context``, the exception dict → the exception."""
    from .request import Context
    from .result import rebuild_exception

    if len(args) < 3 or not isinstance(args[0], dict) or not isinstance(args[1], dict):
        return args
    request = Context(**args[0])
    info = args[1]
    exc = rebuild_exception(info.get("type"), info.get("class"), str(info.get("message") or ""))
    return [request, exc, args[2], *args[3:]]
