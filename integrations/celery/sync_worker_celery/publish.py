"""Publishing: a call becomes a standalone durable activity (or, when it must wait or has
callbacks, a one-task canvas workflow). Routing and per-call options live here.

Queue resolution, as in Celery: ``apply_async(queue=)`` → ``task_routes`` (a dict of task name
or glob pattern → ``{"queue": ...}``/queue name, a list of those, or a router function
``(name, args, kwargs, options, task=None, **kw)``) → the task's ``queue`` → ``task_default_queue``.
"""

from __future__ import annotations

import fnmatch
import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from . import notices, signals
from .exceptions import UnsupportedFeature
from .stamping import split_options
from .task import Task
from .wire import encode_call, retry_policy_for

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery
    from .result import AsyncResult

__all__ = ["activity_options", "announce_canvas", "resolve_queue", "send_task", "seconds_until"]

#: apply_async options that change nothing here (one notice each).
IGNORED_PUBLISH_OPTIONS = {
    "priority": "the server has no message priorities; use a separate queue",
    "serializer": "payloads are always Avro Values",
    "compression": "payloads are not compressed",
    "exchange": "there are no exchanges; use queue=",
    "routing_key": "there are no routing keys; use queue=",
    "retry": "publishing retries connection errors by itself",
    "retry_policy": "publishing retries connection errors by itself",
    "producer": "there is no broker producer",
    "connection": "there is no broker connection",
    "add_to_parent": "children are not tracked on results",
    "reply_to": "results are read from the server",
    "ignore_result": "the server keeps every result",
    "mandatory": "there is no broker",
    "delivery_mode": "every task is durable",
}
_KNOWN = {"countdown", "eta", "expires", "queue", "headers", "time_limit", "soft_time_limit",
          "root_id", "parent_id", "group_id", "group_index", "argsrepr", "kwargsrepr", "replaced_task_nesting"}


def _route(routes: Any, name: str, args: Sequence[Any], kwargs: Dict[str, Any], options: Dict[str, Any],
           task: Optional[Task]) -> Optional[str]:
    if routes is None:
        return None
    if callable(routes):
        found = routes(name, args, kwargs, options, task=task)
        return _queue_of(found)
    if isinstance(routes, (list, tuple)):
        for entry in routes:
            found = _route(entry, name, args, kwargs, options, task)
            if found:
                return found
        return None
    if isinstance(routes, dict):
        if name in routes:
            return _queue_of(routes[name])
        for pattern, target in routes.items():
            if isinstance(pattern, str) and fnmatch.fnmatchcase(name, pattern):
                return _queue_of(target)
        return None
    raise TypeError(f"task_routes must be a dict, a list or a callable, got {type(routes).__name__}")


def _queue_of(target: Any) -> Optional[str]:
    if target is None:
        return None
    if isinstance(target, str):
        return target
    if isinstance(target, dict):
        queue = target.get("queue")
        if queue is not None and not isinstance(queue, str):
            queue = getattr(queue, "name", None)
        return queue
    return getattr(target, "name", None)


def resolve_queue(app: Celery, name: str, args: Sequence[Any], kwargs: Dict[str, Any], options: Dict[str, Any],
                  task: Optional[Task]) -> str:
    queue = options.get("queue")
    if queue is not None and not isinstance(queue, str):
        queue = getattr(queue, "name", None)
    return str(queue or _route(app.conf.task_routes, name, args, kwargs, options, task)
               or (task.queue if task is not None else None) or app.conf.task_default_queue)


def seconds_until(value: Any) -> Optional[float]:
    """Seconds from now until ``value`` (a number of seconds, or a datetime); None for None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return (when - datetime.now(timezone.utc)).total_seconds()
    if isinstance(value, str):
        return seconds_until(datetime.fromisoformat(value))
    return float(value)


def activity_options(app: Celery, task: Optional[Task], options: Dict[str, Any]) -> Dict[str, Any]:
    """Server-side options of one task call: retry policy, timeouts (whole seconds)."""
    base = task if task is not None else Task
    hard = options.get("time_limit")
    if hard is None:
        hard = base.time_limit if base.time_limit is not None else app.conf.task_time_limit
    interval = float(app.conf.durable_workflow_heartbeat_interval or 0)
    out: Dict[str, Any] = {
        "retry_policy": retry_policy_for(base),
        # The hard limit is enforced in the worker; the server's lease is a backstop a bit later.
        "start_to_close": math.ceil(float(hard)) + 5 if hard else 86400,
        "heartbeat_timeout": max(1, math.ceil(3 * interval)) if interval > 0 else None,
    }
    expires = options.get("expires", base.expires)
    if expires is not None:
        left = seconds_until(expires)
        out["schedule_to_start"] = max(1, math.ceil(left or 0))
    return out


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _check_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Notices for ignored options; returns the others with plain values: message properties.

    As in Celery (kombu passes unknown publish options on as message properties, e.g.
    ``app_id=``), they reach the task as ``self.request.properties``."""
    properties: Dict[str, Any] = {}
    for key in list(options):
        if key in _KNOWN:
            continue
        reason = IGNORED_PUBLISH_OPTIONS.get(key)
        if reason is None and _plain(options[key]):
            properties[key] = options[key]
        elif reason is None:
            notices.once(f"publish:{key}", f"apply_async({key}=...) is not a known option and is ignored")
        else:
            notices.once(f"publish:{key}", f"apply_async({key}=...) is ignored: {reason}")
    return properties


def send_task(app: Celery, name: str, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None, *,
              task_id: Optional[str] = None, link: Any = None, link_error: Any = None,
              task: Optional[Task] = None, **options: Any) -> AsyncResult:
    """Start task ``name`` durably; see :meth:`Celery.send_task`."""
    from .result import AsyncResult
    from .utils import uuid

    kwargs = dict(kwargs or {})
    args = tuple(args or ())
    if task is None:
        task = app.tasks.get(name)
    from .request import current_requests

    caller = current_requests.top  # published from inside a running task: its child, as in Celery
    if caller is not None and caller.id and not options.get("parent_id"):
        options = dict(options, parent_id=caller.id, root_id=options.get("root_id") or caller.root_id or caller.id)
    options, stamps = split_options(options)  # stamps go to the headers, never the properties (as Celery's)
    extra_properties = _check_options(options)
    task_id = task_id or uuid()
    queue = resolve_queue(app, name, args, kwargs, options, task)
    countdown = options.get("countdown")
    eta = options.get("eta")
    if countdown is not None and eta is not None:
        raise ValueError("apply_async: give countdown or eta, not both")
    headers: Dict[str, Any] = {
        "lang": "py", "task": name, "id": task_id, "eta": eta.isoformat() if isinstance(eta, datetime) else eta,
        "expires": options.get("expires"), "retries": 0, "root_id": options.get("root_id") or task_id,
        "parent_id": options.get("parent_id"), "group": options.get("group_id"),
        "timelimit": [options.get("time_limit"), options.get("soft_time_limit")],
        "argsrepr": options.get("argsrepr") or repr(args), "kwargsrepr": options.get("kwargsrepr") or repr(kwargs),
        "origin": app.origin,
    }
    custom = dict(options.get("headers") or {})
    headers.update(custom)
    headers.update(stamps)
    body = (args, kwargs, {"callbacks": _listify(link) or None, "errbacks": _listify(link_error) or None,
                           "chain": None, "chord": None})
    properties = {"correlation_id": task_id, "reply_to": None, **extra_properties}
    signals.before_task_publish.send(sender=name, body=body, exchange="", routing_key=queue, headers=headers,
                                     properties=properties, declare=[], retry_policy=None)
    standard = {"lang", "task", "id", "eta", "expires", "retries", "root_id", "parent_id", "group", "timelimit",
                "argsrepr", "kwargsrepr", "origin", "shadow", "group_index", "ignore_result"}
    extra_headers = {k: v for k, v in headers.items() if k not in standard}
    if countdown is not None or eta is not None or link is not None or link_error is not None:
        from .canvas import Signature

        sig = Signature(name, args, kwargs, options=dict(options, task_id=task_id, queue=queue,
                                                          headers=extra_headers), app=app)
        for callback in _listify(link):
            sig.link(callback)
        for errback in _listify(link_error):
            sig.link_error(errback)
        result: AsyncResult = sig._start_as_canvas(task_id, queue)
    else:
        opts = activity_options(app, task, options)
        meta: Dict[str, Any] = {}
        for key in ("time_limit", "soft_time_limit", "argsrepr", "kwargsrepr", "replaced_task_nesting"):
            if options.get(key) is not None:
                meta[key] = options[key]
        if extra_headers:
            meta["headers"] = extra_headers
        if extra_properties:
            meta["properties"] = extra_properties
        if options.get("parent_id"):
            meta.update(parent_id=options["parent_id"], root_id=options.get("root_id"))
        app.client.start_activity(
            name, *encode_call(args, kwargs, meta or None), task_queue=queue, activity_id=task_id,
            retry_policy=opts["retry_policy"], start_to_close_timeout_seconds=opts["start_to_close"],
            heartbeat_timeout_seconds=opts["heartbeat_timeout"],
            schedule_to_start_timeout_seconds=opts.get("schedule_to_start"))
        result = AsyncResult(task_id, app=app, task_name=name)
    signals.after_task_publish.send(sender=name, body=body, exchange="", routing_key=queue, headers=headers)
    return result


def announce_canvas(app: Celery, plan: Dict[str, Any], signal: Any) -> None:
    """Send ``before_task_publish``/``after_task_publish`` (``signal``) for each task a canvas run is started
    with (its members, not its callbacks): starting the run publishes them, as Celery's apply_async does.
    The headers are the task's as its worker sees them (custom headers, stamps)."""
    kind = plan.get("kind")
    if kind == "task":
        meta = dict(plan.get("meta") or {})
        headers: Dict[str, Any] = {
            "lang": "py", "task": plan.get("name"), "id": plan.get("id"), "eta": plan.get("eta"), "expires": None,
            "retries": 0, "root_id": plan.get("celery_root"), "parent_id": None, "group": None,
            "timelimit": [meta.get("time_limit"), meta.get("soft_time_limit")],
            "argsrepr": meta.get("argsrepr") or repr(tuple(plan.get("args") or ())),
            "kwargsrepr": meta.get("kwargsrepr") or repr(dict(plan.get("kwargs") or {})), "origin": app.origin,
            **dict(meta.get("headers") or {})}
        body = (tuple(plan.get("args") or ()), dict(plan.get("kwargs") or {}),
                {"callbacks": None, "errbacks": None, "chain": None, "chord": None})
        extra: Dict[str, Any] = {"properties": {"correlation_id": plan.get("id"), "reply_to": None}, "declare": [],
                 "retry_policy": None} if signal is signals.before_task_publish else {}
        signal.send(sender=plan.get("name"), body=body, exchange="", routing_key=plan.get("queue"),
                    headers=headers, **extra)
    for member in ([plan["header"], plan["body"]] if kind == "chord" else plan.get("tasks") or []):
        if isinstance(member, dict):
            announce_canvas(app, member, signal)


def _listify(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def refuse(feature: str, hint: str = "") -> None:
    raise UnsupportedFeature(f"{feature} is not supported by sync_worker_celery" + (f"; {hint}" if hint else ""))
