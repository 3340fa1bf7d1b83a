"""``Task``: what ``@app.task`` / ``@shared_task`` build (Celery's task API, durable underneath).

Calling ``add.delay(2, 3)`` starts a standalone durable activity of type ``add.name`` on the
task's queue; ``add(2, 3)`` runs the function here and now, as in Celery. Inside a running
task, ``self.request`` is the call's context, ``self.retry(...)`` asks the server for another
attempt after ``countdown`` seconds and ``self.update_state(...)`` publishes progress.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Type

from . import notices
from .exceptions import MaxRetriesExceededError, Replaced, Retry, UnsupportedFeature
from .request import Context, RequestStack

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery
    from .canvas import Signature
    from .result import AsyncResult, EagerResult

__all__ = ["Task"]

logger = logging.getLogger("sync_worker.celery.task")

#: Task options accepted for compatibility that change nothing here (one notice each).
IGNORED_TASK_OPTIONS = {
    "serializer": "payloads are always Avro Values (JSON-like data)",
    "compression": "payloads are not compressed",
    "send_events": "there is no event stream; the server keeps each task's history",
    "trail": "children are not tracked on results",
    "store_errors_even_if_ignored": "results and errors are always kept by the server",
    "priority": "the server has no message priorities; use a separate queue",
    "resultrepr_maxsize": "results are not truncated",
    "reject_on_worker_lost": "tasks are durable: an attempt lost with its worker is always retried",
    "acks_on_failure_or_timeout": "tasks are durable; acknowledgement does not apply",
    "expires_default": "use expires= on apply_async",
}


class Task:
    """A task type. Subclass it (``base=`` / ``app.Task``) for class-based hooks."""

    name: Optional[str] = None
    typing = True
    max_retries: Optional[int] = 3
    default_retry_delay: float = 180
    rate_limit: Optional[str] = None
    ignore_result = False
    time_limit: Optional[float] = None
    soft_time_limit: Optional[float] = None
    autoretry_for: Tuple[Type[BaseException], ...] = ()
    dont_autoretry_for: Tuple[Type[BaseException], ...] = ()
    retry_kwargs: Dict[str, Any] = {}
    retry_backoff: Any = False
    retry_backoff_max: Optional[float] = 600
    retry_jitter = True
    acks_late = True  # always durable
    #: As in Celery: a running task reads PENDING unless this (or ``task_track_started``) is set.
    track_started = False
    queue: Optional[str] = None
    expires: Any = None
    bind = False
    abstract = False
    request_stack: RequestStack
    _app: Optional[Celery] = None

    # -- identity ---------------------------------------------------------------------------------

    @property
    def app(self) -> Celery:
        if self._app is None:
            from .app import current_app

            return current_app()
        return self._app

    @property
    def backend(self) -> Any:
        """The app's result backend (the server; :class:`~sync_worker_celery.backend.DurableBackend`)."""
        return self.app.backend

    def bind_app(self, app: Celery) -> None:
        self._app = app

    def __init__(self) -> None:
        self.request_stack = RequestStack()

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"

    @property
    def __name__(self) -> str:
        """The task's class name (for a decorated function: the function's), as in Celery."""
        return type(self).__qualname__.rpartition(".")[2]

    def run(self, *args: Any, **kwargs: Any) -> Any:  # replaced by the decorated function
        raise NotImplementedError("Tasks must define the run method.")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)

    @property
    def request(self) -> Context:
        top = self.request_stack.top
        return top if top is not None else Context()

    def push_request(self, *args: Any, **kwargs: Any) -> None:
        self.request_stack.push(Context(*args, **kwargs))

    def pop_request(self) -> None:
        self.request_stack.pop()

    # -- publishing --------------------------------------------------------------------------------

    def _check_arguments(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        if not self.typing:
            return
        run = self.run
        func, owner = getattr(run, "__func__", run), getattr(run, "__self__", None)
        cached = self.__dict__.get("_run_signature")
        if cached is not None and cached[0] is func and cached[1] is owner:
            signature = cached[2]  # inspect.signature was most of a publish's own CPU
        else:
            try:
                signature = inspect.signature(run)
            except (TypeError, ValueError):  # builtins without a signature
                signature = None
            self.__dict__["_run_signature"] = (func, owner, signature)
        if signature is None:
            return
        try:
            signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}() {error}") from None

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        """Star-argument shortcut to :meth:`apply_async` (``add.delay(2, y=3)``)."""
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                    task_id: Optional[str] = None, producer: Any = None, link: Any = None,
                    link_error: Any = None, shadow: Optional[str] = None, **options: Any) -> AsyncResult:
        """Start the task durably (or run it here when ``task_always_eager`` is set).

        Options: ``countdown``, ``eta``, ``expires``, ``queue``, ``task_id``, ``link``,
        ``link_error``, ``headers``, ``time_limit``, ``soft_time_limit``; the rest of Celery's
        publish options are accepted and ignored with a notice (see docs/celery.md).
        """
        args = tuple(args or ())
        kwargs = dict(kwargs or {})
        self._check_arguments(args, kwargs)
        if shadow is not None:
            notices.once("shadow", "apply_async(shadow=...) is ignored: the task keeps its own name")
        if self.app.conf.task_always_eager:
            return self.apply(args, kwargs, task_id=task_id, link=link, link_error=link_error, **options)
        result: AsyncResult = self.app.send_task(self.name or "", args, kwargs, task_id=task_id, link=link,
                                                 link_error=link_error, _task=self, **options)
        return result

    def apply(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              link: Any = None, link_error: Any = None, task_id: Optional[str] = None,
              retries: Optional[int] = None, throw: Optional[bool] = None, **options: Any) -> EagerResult:
        """Run the task here and now (eager mode); retries run at once, countdowns are skipped."""
        from .execution import apply_eagerly

        return apply_eagerly(self, tuple(args or ()), dict(kwargs or {}), task_id=task_id, link=link,
                             link_error=link_error, retries=retries or 0, throw=throw, options=options)

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """Django: ``delay()`` once the current transaction commits (Celery 5.4's ``DjangoTask``)."""
        from django.db import transaction

        transaction.on_commit(lambda: self.delay(*args, **kwargs))

    def apply_async_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """Django: ``apply_async()`` once the current transaction commits."""
        from django.db import transaction

        transaction.on_commit(lambda: self.apply_async(*args, **kwargs))

    def signature(self, args: Optional[Sequence[Any]] = None, *starargs: Any, **starkwargs: Any) -> Signature:
        from .canvas import signature

        return signature(self, args, *starargs, **starkwargs)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of this task with these arguments (``add.s(2, 3)``)."""
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: in a chain, the parent's result is not prepended."""
        return self.signature(args, kwargs, immutable=True)

    def map(self, it: Any) -> Any:
        raise UnsupportedFeature("Task.map() (xmap) is not supported; use group(task.s(x) for x in it)")

    def starmap(self, it: Any) -> Any:
        raise UnsupportedFeature("Task.starmap() (xstarmap) is not supported; use group(task.s(*a) for a in it)")

    def chunks(self, it: Any, n: int) -> Any:
        raise UnsupportedFeature("Task.chunks() is not supported; use a group of tasks that each take a slice")

    def AsyncResult(self, task_id: str, **kwargs: Any) -> AsyncResult:
        from .result import AsyncResult

        return AsyncResult(task_id, app=self.app, task_name=self.name, **kwargs)

    # -- inside a running task ---------------------------------------------------------------------

    def retry(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              exc: Optional[BaseException] = None, throw: bool = True, eta: Any = None,
              countdown: Optional[float] = None, max_retries: Optional[int] = None, **options: Any) -> Retry:
        """Retry this call after ``countdown`` seconds (default ``default_retry_delay``).

        Raises :class:`Retry` (the worker reports it as a retryable failure carrying the delay;
        the server schedules the next attempt). Past ``max_retries`` it raises ``exc`` if given,
        else :class:`MaxRetriesExceededError`. Changing ``args``/``kwargs`` on retry is refused:
        every attempt of a durable activity has the same input.
        """
        request = self.request
        if request.called_directly:
            if exc is not None:
                raise exc
            raise Retry("Task can be retried", None)
        if (args is not None and tuple(args) != tuple(request.args or ())) or \
                (kwargs is not None and dict(kwargs) != dict(request.kwargs or {})):
            raise UnsupportedFeature(
                "Task.retry(args=/kwargs=) with new arguments is not supported: every attempt of a durable "
                "task runs with the arguments it was started with; start a new task instead")
        for key in options:
            if key not in ("queue", "priority", "routing_key", "exchange"):
                notices.once(f"retry:{key}", f"Task.retry({key}=...) is ignored")
        limit = self.max_retries if max_retries is None else max_retries
        if limit is not None and request.retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{request.args} kwargs:{request.kwargs}",
                task_args=request.args, task_kwargs=request.kwargs)
        if countdown is None and eta is None:
            countdown = self.default_retry_delay
        ret = Retry(exc=exc, when=eta if eta is not None else countdown, is_eager=request.is_eager)
        if throw:
            raise ret
        request._pending_retry = ret  # type: ignore[attr-defined]
        return ret

    def add_to_chord(self, sig: Any, lazy: bool = False) -> Any:
        raise UnsupportedFeature("Task.add_to_chord() is not supported: a chord's header is fixed when the chord "
                                 "is applied (one durable run); replace the task with a group "
                                 "(self.replace(group(...))) to fan out from inside it")

    def on_replace(self, sig: Any) -> Any:
        """Celery's hook: the signature that will replace this task (override to change it)."""
        return sig

    def replace(self, sig: Any) -> Any:
        """Replace this running task with ``sig`` (a task signature or a canvas): the task's result
        becomes ``sig``'s result, durably (:mod:`sync_worker_celery.replace`). Raises ``Ignore``
        (:class:`~sync_worker_celery.exceptions.Replaced`), as Celery's does."""
        from .canvas import maybe_signature

        if self.request.called_directly:
            raise UnsupportedFeature("Task.replace() outside a running task (the task was called directly)")
        sig = maybe_signature(sig, app=self.app)
        if sig.subtask_type == "chain" and not sig.tasks:
            from .exceptions import ImproperlyConfigured

            raise ImproperlyConfigured("Cannot replace with an empty chain")
        raise Replaced(self.on_replace(maybe_signature(sig, app=self.app)))

    def update_state(self, task_id: Optional[str] = None, state: Optional[str] = None,
                     meta: Any = None, **kwargs: Any) -> None:
        """Publish a custom state and its ``meta`` (read back as ``AsyncResult.state`` / ``.info``)."""
        request = self.request
        if task_id is not None and task_id != request.id:
            raise UnsupportedFeature("update_state(task_id=...) for another task is not supported; a task can "
                                     "only publish its own state")
        try:
            details = json.loads(json.dumps({"celery_state": state, "meta": meta}))
        except (TypeError, ValueError) as error:
            raise TypeError(f"update_state meta must be JSON-serializable: {error}") from None
        publish = getattr(request, "_publish_state", None)
        if publish is None:
            if request.called_directly:
                return  # called outside a worker: nothing to publish to (as Celery without a backend)
            raise UnsupportedFeature("update_state() needs a running task")
        publish(details)

    # -- class-based hooks (override in a base class) -----------------------------------------------

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None:
        """Called before the task runs."""

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None:
        """Called when the task succeeded."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """Called when the task failed."""

    def on_retry(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """Called when the task is to be retried."""

    def after_return(self, status: str, retval: Any, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """Called after the task returned, whatever the outcome."""
