"""Running one task call: signals, hooks, retries, time limits — in a worker or eagerly.

:func:`trace` is the one place a call runs (Celery's "tracer"); the worker's activity
function (:func:`activity_for`) and eager ``apply()`` (:func:`apply_eagerly`) both use it.

How the outcome reaches the server from a worker:

* a return value completes the activity (state SUCCESS);
* ``Retry`` (from ``self.retry`` or ``autoretry_for``) fails the attempt *retryably*, with
  ``next_retry_delay`` = the countdown: the server runs the next attempt after it (RETRY);
* any other exception fails the attempt *non-retryably* with its own type, class, message
  and traceback (FAILURE) — Celery does not retry unless asked;
* a revoke seen while running (``revoke(terminate=True)``) stops the task (REVOKED).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import app_trace, errbacks, ratelimit, signals, states
from .einfo import ExceptionInfo
from .exceptions import Ignore, Reject, Replaced, Retry, TaskRevokedError
from .request import Context, current_requests
from .result import ResultBase
from .stamping import split_options
from .task import Task as BaseTask
from .timelimits import TimeLimits, interrupt_current, task_alarms
from .wire import decode_call, exponential_backoff

if TYPE_CHECKING:  # pragma: no cover
    from .result import EagerResult
    from .task import Task

__all__ = ["Outcome", "activity_for", "apply_eagerly", "trace"]

logger = logging.getLogger("sync_worker.celery.execution")


@dataclass
class Outcome:
    state: str
    retval: Any = None
    exception: Optional[BaseException] = None
    einfo: Optional[ExceptionInfo] = None
    retry: Optional[Retry] = None


def _autoretry(task: Task, exc: Exception) -> Optional[BaseException]:
    """What ``autoretry_for`` makes of ``exc``: a Retry, another error to fail with, or None (no autoretry)."""
    if not task.autoretry_for or not isinstance(exc, tuple(task.autoretry_for)):
        return None
    if task.dont_autoretry_for and isinstance(exc, tuple(task.dont_autoretry_for)):
        return None
    retry_kwargs = dict(task.retry_kwargs or {})
    if task.retry_backoff:
        retry_kwargs["countdown"] = exponential_backoff(
            max(1.0, float(task.retry_backoff)), task.request.retries, task.retry_backoff_max, bool(task.retry_jitter))
    try:
        task.retry(exc=exc, **retry_kwargs)
    except BaseException as outcome:  # Retry, or exc / MaxRetriesExceededError once exhausted
        return outcome
    return None  # pragma: no cover - retry() always raises with throw=True


def trace(task: Task, args: Tuple[Any, ...], kwargs: Dict[str, Any], request: Context,
          limits: Tuple[Optional[float], Optional[float]] = (None, None)) -> Outcome:
    """Run one call of ``task`` with ``request`` pushed; never raises except for revocation."""
    task_id = str(request.id)
    if type(task).push_request is BaseTask.push_request and type(request) is Context:
        live = request.copy()  # what push_request(**fields) would push
        task.request_stack.push(live)
    else:  # a Task class of its own: its push_request, as before
        task.push_request(**{k: v for k, v in vars(request).items() if k != "headers"},
                          headers=request.headers)
        live = task.request
    current_requests.push(live)
    signals.task_prerun.send(sender=task, task_id=task_id, task=task, args=args, kwargs=kwargs)
    outcome: Outcome
    try:
        try:
            hard, soft = limits
            if hard and soft and float(soft) > float(hard):  # as Celery's worker refuses the call
                raise ValueError("soft_time_limit must be less than or equal to time_limit")
            task.before_start(task_id, args, kwargs)
            with TimeLimits(limits[0], limits[1]):
                retval = task(*args, **kwargs)
            pending = getattr(live, "_pending_retry", None)
            if pending is not None:
                raise pending
        except Retry as retry:
            outcome = Outcome(states.RETRY, retry, retry, ExceptionInfo(retry), retry)
        except Replaced as replaced:  # an Ignore: the replacement's result will be the task's
            outcome = Outcome(states.IGNORED, replaced)
        except Ignore:
            outcome = Outcome(states.IGNORED, None)
        except Reject as reject:
            if reject.requeue:
                requeue = Retry(f"Rejected (requeue): {reject.reason}", None, 0)
                outcome = Outcome(states.RETRY, requeue, requeue, ExceptionInfo(requeue), requeue)
            else:
                outcome = Outcome(states.FAILURE, reject, reject, ExceptionInfo(reject))
        except TaskRevokedError as revoked:
            outcome = Outcome(states.REVOKED, revoked, revoked, ExceptionInfo(revoked))
        except Exception as exc:
            auto = _autoretry(task, exc)
            if isinstance(auto, Retry):
                outcome = Outcome(states.RETRY, auto, auto, ExceptionInfo(auto), auto)
            else:
                final = auto if isinstance(auto, Exception) else exc
                outcome = Outcome(states.FAILURE, final, final, ExceptionInfo(final))
        else:
            outcome = Outcome(states.SUCCESS, retval)
        _report(task, task_id, args, kwargs, live, outcome)
    finally:
        signals.task_postrun.send(sender=task, task_id=task_id, task=task, args=args, kwargs=kwargs,
                                  retval=outcome.retval if "outcome" in locals() else None,
                                  state=outcome.state if "outcome" in locals() else states.FAILURE)
        current_requests.pop()
        task.pop_request()
    return outcome


def _report(task: Task, task_id: str, args: Any, kwargs: Any, request: Context, outcome: Outcome) -> None:
    """Class hooks and signals for an outcome (hook errors are logged, like signal errors)."""
    try:
        if outcome.state == states.SUCCESS:
            task.on_success(outcome.retval, task_id, args, kwargs)
            signals.task_success.send(sender=task, result=outcome.retval)
        elif outcome.state == states.RETRY:
            assert outcome.retry is not None
            reason = outcome.retry.exc or outcome.retry
            task.on_retry(reason, task_id, args, kwargs, outcome.einfo)
            signals.task_retry.send(sender=task, request=request, reason=reason, einfo=outcome.einfo)
        elif outcome.state == states.FAILURE:
            assert outcome.exception is not None and outcome.einfo is not None
            task.on_failure(outcome.exception, task_id, args, kwargs, outcome.einfo)
            signals.task_failure.send(sender=task, task_id=task_id, exception=outcome.exception, args=args,
                                      kwargs=kwargs, traceback=outcome.einfo.tb, einfo=outcome.einfo)
        elif outcome.state == states.REVOKED:
            signals.task_revoked.send(sender=task, request=request, terminated=True, signum=None, expired=False)
        task.after_return(outcome.state, outcome.retval, task_id, args, kwargs, outcome.einfo)
    except Exception:
        logger.exception("task %s[%s]: a handler raised", task.name, task_id)


# -- eager ------------------------------------------------------------------------------------------

def apply_eagerly(task: Task, args: Tuple[Any, ...], kwargs: Dict[str, Any], *, task_id: Optional[str],
                  link: Any, link_error: Any, retries: int, throw: Optional[bool],
                  options: Dict[str, Any]) -> EagerResult:
    """``Task.apply()``: run here, retrying at once (countdowns skipped), as Celery's eager mode does."""
    from .result import EagerResult
    from .utils import uuid

    task_id = task_id or uuid()
    app = task.app
    propagate = app.conf.task_eager_propagates if throw is None else throw
    options, stamps = split_options(dict(options))
    if stamps:  # a stamped call: its stamps are headers (request.stamped_headers / request.stamps);
        # eagerly each value is a list, as Celery's Task.apply builds the request
        stamps["stamps"] = {k: v if isinstance(v, list) else ([] if v is None else [v])
                            for k, v in stamps["stamps"].items()}
        options["headers"] = {**dict(options.get("headers") or {}), **stamps}
    caller = current_requests.top  # applied from inside a running task: its child, as in Celery
    if caller is not None and caller.id and not options.get("parent_id"):
        options.update(parent_id=caller.id, root_id=options.get("root_id") or caller.root_id or caller.id)
    while True:
        request = Context(id=task_id, task=task.name, args=list(args), kwargs=dict(kwargs), retries=retries,
                          is_eager=True, called_directly=False, root_id=options.get("root_id") or task_id,
                          parent_id=options.get("parent_id"), group=options.get("group_id"),
                          headers=dict(options.get("headers") or {}),
                          delivery_info={"exchange": "", "routing_key": options.get("queue"), "priority": None,
                                         "redelivered": retries > 0, "is_eager": True})
        eager_state: List[Any] = []
        request._publish_state = eager_state.append  # type: ignore[attr-defined]
        outcome = trace(task, args, kwargs, request)
        if isinstance(outcome.retval, Replaced):  # the replacement runs here; its outcome is the task's
            from .canvas import maybe_signature

            replaced = maybe_signature(outcome.retval.sig, app=app).apply()
            return EagerResult(task_id, replaced.result, replaced.state, traceback=replaced.traceback,
                               name=task.name)
        if outcome.state != states.RETRY:
            break
        retries += 1
    result = EagerResult(task_id, outcome.retval, outcome.state,
                         traceback=outcome.einfo.traceback if outcome.einfo else None, name=task.name)
    if outcome.state == states.FAILURE and propagate:
        assert outcome.exception is not None
        raise outcome.exception
    for callback in _as_list(link if outcome.state == states.SUCCESS else link_error):
        if outcome.state == states.SUCCESS:
            callback.clone(args=(outcome.retval,) if not callback.immutable else ()).apply()
        elif errbacks.new_style(app, callback.name):
            callback.clone(args=(request, outcome.exception, result.traceback)).apply()
        else:
            callback.clone(args=(task_id,)).apply()
    return result


def _as_list(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


# -- in a worker ------------------------------------------------------------------------------------

class _Watch:
    """While a task runs: heartbeat every ``interval`` (so a lost worker is noticed) and stop the
    task when it is revoked with ``terminate=True``.

    A task that ends within its first ``interval`` (most of them) costs an entry in the process's
    task alarms (:data:`~.timelimits.task_alarms`: no wake-up of the timer task) and nothing
    else; one still running then gets its own watch thread (a greenlet under gevent), which
    heartbeats at once and every ``interval`` after that."""

    def __init__(self, ctx: Any, app: Any, activity_id: Optional[str], interval: float) -> None:
        self.ctx = ctx
        self.app = app
        self.activity_id = activity_id
        self.interval = interval
        self.stopped = False
        self.stop_event: Optional[threading.Event] = None  # made when the watch thread starts
        self.interrupt = interrupt_current()
        self.revoked = False
        self.alarm: Optional[int] = None

    def __enter__(self) -> _Watch:
        if self.interval > 0:
            self.alarm = task_alarms.arm(self.interval, self._begin)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped = True
        if self.alarm is not None:
            task_alarms.disarm(self.alarm)
        stop_event = self.stop_event
        if stop_event is not None:  # the watch thread runs (or starts: it checks ``stopped`` first)
            stop_event.set()

    def _begin(self) -> None:
        """On the task timer, one ``interval`` in: the task still runs, so it gets its watch."""
        if not self.stopped:
            self.stop_event = threading.Event()
            threading.Thread(target=self._loop, args=(self.stop_event,), name="celery-task-watch",
                             daemon=True).start()

    def _loop(self, stop_event: threading.Event) -> None:
        from sync_worker.errors import ActivityCancelled, ActivityLeaseAuthorityLost

        while not self.stopped:
            try:
                self.ctx.heartbeat_sync()
            except ActivityCancelled:
                self.revoked = True
                if not self.stopped and self._terminate_requested():
                    self.interrupt(TaskRevokedError)
                return
            except ActivityLeaseAuthorityLost:
                return
            except Exception as error:  # transport trouble: try again next tick
                logger.debug("task heartbeat failed: %s", error)
            stop_event.wait(self.interval)

    def _terminate_requested(self) -> bool:
        if not self.activity_id:
            return False
        try:
            described = self.app.client.describe_activity(self.activity_id)
        except Exception:
            return False
        return "terminate" in str(described.get("closed_reason") or "")


def _mark_final(exc: BaseException) -> BaseException:
    """Make ``exc`` a non-retryable failure report (its own type, message and traceback kept)."""
    try:
        exc.non_retryable = True  # type: ignore[attr-defined]
        return exc
    except (AttributeError, TypeError):  # exceptions with __slots__
        from sync_worker.errors import NonRetryableError

        return NonRetryableError(f"{type(exc).__name__}: {exc}", cause=exc)


def _log_outcome(task: Task, request: Context, outcome: Outcome, runtime: float) -> None:
    """Celery's trace log line for the outcome (``celery.app.trace``)."""
    if outcome.state == states.SUCCESS and not isinstance(outcome.retval, Replaced):
        app_trace.log_success(request, outcome.retval, runtime)
    elif outcome.state == states.RETRY:
        app_trace.log_retry(request, outcome.retry.exc if outcome.retry is not None else None)
    elif outcome.state == states.FAILURE and outcome.exception is not None:
        expected = isinstance(outcome.exception, tuple(getattr(task, "throws", ()) or ()))
        app_trace.log_failure(request, outcome.exception, expected)


def activity_for(task: Task) -> Callable[..., Any]:
    """The activity function that runs ``task`` in a ``sync_worker`` worker (type = the task name)."""
    from sync_worker import activity
    from sync_worker.errors import ActivityCancelled

    def run_task(*wire_args: Any) -> Any:
        args, kwargs, meta = decode_call(wire_args)
        if meta.get(errbacks.FLAG):  # errback(request, exc, traceback): rebuilt from plain data
            args = errbacks.decode_args(list(args))
        ctx = activity.context()
        info = ctx.info
        app = task.app
        hard = meta.get("time_limit", task.time_limit if task.time_limit is not None else app.conf.task_time_limit)
        soft = meta.get("soft_time_limit",
                        task.soft_time_limit if task.soft_time_limit is not None else app.conf.task_soft_time_limit)
        task_id = meta.get("id") or info.workflow_id or info.task_id
        retries = max(0, info.attempt_number - 1)
        request = Context(
            id=task_id, task=task.name, args=list(args), kwargs=dict(kwargs), retries=retries, is_eager=False,
            called_directly=False, hostname=info.worker_id, root_id=meta.get("root_id") or task_id,
            parent_id=meta.get("parent_id"), group=meta.get("group"), group_index=meta.get("group_index"),
            eta=meta.get("eta"), expires=meta.get("expires"), timelimit=(hard, soft),
            headers=dict(meta.get("headers") or {}),
            delivery_info={"exchange": "", "routing_key": info.task_queue, "priority": None,
                           "redelivered": retries > 0})
        request.properties = {"correlation_id": task_id, "reply_to": None, "delivery_info": request.delivery_info,
                              **dict(meta.get("properties") or {})}
        request._publish_state = ctx.heartbeat_sync  # type: ignore[attr-defined]
        request.argsrepr, request.kwargsrepr = meta.get("argsrepr"), meta.get("kwargsrepr")
        request.replaced_task_nesting = int(meta.get("replaced_task_nesting") or 0)
        request.callbacks, request.errbacks = meta.get("callbacks"), meta.get("errbacks")
        # the message body as Celery's worker Request keeps it (handlers of task_received read it)
        request._Request__payload = (list(args), dict(kwargs), {  # type: ignore[attr-defined]
            "callbacks": request.callbacks, "errbacks": request.errbacks, "chain": None, "chord": None})
        app_trace.log_received(request)
        signals.task_received.send(sender=None, request=request)
        if not app.conf.worker_disable_rate_limits:
            ratelimit.acquire(str(task.name), task.rate_limit or app.conf.task_default_rate_limit)
        standalone = None if meta.get("id") else info.workflow_id
        interval = float(app.conf.durable_workflow_heartbeat_interval or 0)
        began = time.monotonic()
        with _Watch(ctx, app, standalone, interval) as watch:
            outcome = trace(task, tuple(args), dict(kwargs), request, (hard, soft))
        _log_outcome(task, request, outcome, time.monotonic() - began)
        if isinstance(outcome.retval, Replaced):
            from .replace import replacement_marker

            return replacement_marker(app, outcome.retval.sig, task_id, in_canvas=standalone is None,
                                      queue=info.task_queue, nesting=request.replaced_task_nesting + 1)
        if outcome.state in (states.SUCCESS, states.IGNORED):
            if isinstance(outcome.retval, ResultBase) and hasattr(outcome.retval, "as_tuple"):
                return outcome.retval.as_tuple()  # as Celery's backends store a returned result
            return outcome.retval
        if outcome.state == states.RETRY:
            assert outcome.retry is not None
            outcome.retry.next_retry_delay = outcome.retry.countdown_seconds()  # type: ignore[attr-defined]
            raise outcome.retry
        if outcome.state == states.REVOKED or watch.revoked:
            raise ActivityCancelled(f"task {task.name}[{task_id}] revoked")
        assert outcome.exception is not None
        raise _mark_final(outcome.exception)

    run_task.__name__ = str(task.name).rpartition(".")[2] or "task"
    run_task.__qualname__ = run_task.__name__
    return activity.defn(name=str(task.name))(run_task)
