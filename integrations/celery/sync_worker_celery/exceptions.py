"""Celery's exception names (``celery.exceptions``), plus the facade's own refusal errors.

A module that does ``from celery.exceptions import SoftTimeLimitExceeded`` keeps working with
``from sync_worker_celery.exceptions import SoftTimeLimitExceeded``.
"""

from __future__ import annotations

import numbers
from datetime import datetime, timezone
from typing import Any, Optional, Union

__all__ = [
    "AlreadyRegistered",
    "AlwaysEagerIgnored",
    "BackendError",
    "BackendGetMetaError",
    "BackendStoreError",
    "CDeprecationWarning",
    "CPendingDeprecationWarning",
    "CeleryWarning",
    "CeleryError",
    "ChordError",
    "DuplicateNodenameWarning",
    "FixupWarning",
    "Ignore",
    "Replaced",
    "ImproperlyConfigured",
    "IncompleteStream",
    "InvalidTaskError",
    "MaxRetriesExceededError",
    "NotConfigured",
    "NotRegistered",
    "OperationalError",
    "QueueNotFound",
    "Reject",
    "RemoteTaskError",
    "Retry",
    "RetryTaskError",
    "SecurityError",
    "SoftTimeLimitExceeded",
    "TaskError",
    "TaskRevokedError",
    "Terminated",
    "TimeLimitExceeded",
    "TimeoutError",
    "UnsupportedFeature",
    "WorkerLostError",
    "WorkerShutdown",
    "WorkerTerminate",
]


class CeleryError(Exception):
    """Base of the facade's errors (as in Celery)."""


class TaskPredicate(CeleryError):
    """Base of the exceptions that steer a task's state (Retry, Ignore, Reject)."""


class Retry(TaskPredicate):
    """Raised by ``Task.retry()``: the task is to be retried (state RETRY).

    ``when`` is the countdown in seconds (or an ``eta`` datetime); ``exc`` the error that
    caused the retry, if any.
    """

    def __init__(self, message: Optional[str] = None, exc: Optional[BaseException] = None,
                 when: Union[float, datetime, None] = None, is_eager: bool = False, sig: Any = None,
                 **kwargs: Any) -> None:
        self.message = message
        self.exc = exc
        self.when = when
        self.is_eager = is_eager
        self.sig = sig
        super().__init__(self, exc, when, **kwargs)

    def humanize(self) -> str:
        if isinstance(self.when, numbers.Number):
            return f"in {self.when}s"
        return f"at {self.when}"

    def countdown_seconds(self) -> float:
        """The delay before the next attempt, in seconds (an ``eta`` is converted)."""
        if isinstance(self.when, datetime):
            when = self.when if self.when.tzinfo else self.when.replace(tzinfo=timezone.utc)
            return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
        if isinstance(self.when, numbers.Real):
            return max(0.0, float(self.when))
        return 0.0

    def __str__(self) -> str:
        if self.message:
            return self.message
        if self.exc:
            return f"Retry {self.humanize()}: {self.exc!r}"
        return f"Retry {self.humanize()}"

    def __reduce__(self) -> Any:
        return self.__class__, (self.message, self.exc, self.when)


RetryTaskError = Retry


class Ignore(TaskPredicate):
    """The task is to be ignored: no state is recorded by Celery. Here: it completes with ``None``."""


class Replaced(Ignore):
    """Raised by ``Task.replace(sig)`` (Celery raises ``Ignore`` there too): the running task's result
    becomes the result of ``sig``, which runs in its place (:mod:`sync_worker_celery.replace`)."""

    def __init__(self, sig: Any) -> None:
        super().__init__("Replaced by new task")
        self.sig = sig


class Reject(TaskPredicate):
    """Reject the task. ``requeue=True`` asks for another attempt (a retry without delay)."""

    def __init__(self, reason: Any = None, requeue: bool = False) -> None:
        self.reason = reason
        self.requeue = requeue
        super().__init__(reason, requeue)

    def __repr__(self) -> str:
        return f"reject requeue={self.requeue}: {self.reason}"


class ImproperlyConfigured(CeleryError, ImportError):
    """The app is configured in a way the facade cannot serve."""


class NotRegistered(CeleryError, KeyError):
    """No task of that name is registered with the app."""

    def __repr__(self) -> str:
        return f"Task of kind {self.args[0] if self.args else '?'} never registered, please make sure it's imported."


class AlreadyRegistered(CeleryError):
    """A task of that name is already registered."""


class TimeoutError(CeleryError):
    """``AsyncResult.get(timeout=...)`` ran out of time."""


class MaxRetriesExceededError(CeleryError):
    """``Task.retry()`` was called after the task's ``max_retries``."""

    def __init__(self, *args: Any, task_args: Any = None, task_kwargs: Any = None, **kwargs: Any) -> None:
        self.task_args = task_args
        self.task_kwargs = task_kwargs
        super().__init__(*args, **kwargs)


class TaskError(CeleryError):
    """A task-related error."""


class TaskRevokedError(CeleryError):
    """The task was revoked; its result is not available."""


class InvalidTaskError(CeleryError):
    """The task message is invalid (for example unreadable arguments)."""


class ChordError(CeleryError):
    """A chord's header failed, so its body cannot run."""


class WorkerLostError(Exception):
    """The worker running the task was lost."""


class SoftTimeLimitExceeded(Exception):
    """Raised inside a task when it reaches its ``soft_time_limit`` (catch it to clean up)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    def __str__(self) -> str:
        return "SoftTimeLimitExceeded" + (f"({self.args[0]!r})" if self.args else "()")


class TimeLimitExceeded(Exception):
    """The task ran past its hard ``time_limit`` and was stopped (state FAILURE)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    def __str__(self) -> str:
        return "TimeLimitExceeded" + (f"({self.args[0]!r})" if self.args else "()")


class RemoteTaskError(CeleryError):
    """A task failed with an exception whose type cannot be imported here.

    Carries the remote ``exc_type`` (the class name), ``exc_module``/``exc_class`` (dotted
    path), ``message`` and the remote ``traceback`` text.
    """

    def __init__(self, exc_type: str, message: str, traceback: Optional[str] = None,
                 exc_class: Optional[str] = None) -> None:
        super().__init__(f"{exc_type}: {message}")
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        self.exc_class = exc_class


class Terminated(Exception):
    """The task was terminated (``revoke(terminate=True)``)."""


class WorkerShutdown(SystemExit):
    """Raised to make the worker shut down (Celery's name; not raised by this facade)."""


class WorkerTerminate(SystemExit):
    """Raised to make the worker terminate (Celery's name; not raised by this facade)."""


WorkerTerminateError = WorkerTerminate


class QueueNotFound(KeyError):
    """A queue named in a route does not exist."""


class OperationalError(Exception):
    """A transport-level error (Celery's name)."""


class SecurityError(CeleryError):
    """A security-related error."""


class NotConfigured(UserWarning):
    """The app is not configured."""


class BackendError(Exception):
    """An error with the result backend (here: the Durable Workflow server)."""


class BackendGetMetaError(BackendError):
    """A result could not be read."""


class BackendStoreError(BackendError):
    """A result could not be stored."""


class IncompleteStream(TaskError):
    """Found the end of a stream of data, but the data is not complete."""


class CeleryWarning(UserWarning):
    """Base of Celery's warnings."""


class AlwaysEagerIgnored(CeleryWarning):
    """send_task ignores task_always_eager."""


class DuplicateNodenameWarning(CeleryWarning):
    """Several workers share a node name."""


class FixupWarning(CeleryWarning):
    """A fixup failed."""


class CDeprecationWarning(DeprecationWarning):
    """A Celery deprecation warning."""


class CPendingDeprecationWarning(PendingDeprecationWarning):
    """A Celery pending-deprecation warning."""


class UnsupportedFeature(CeleryError, NotImplementedError):
    """A Celery feature that ``sync_worker_celery`` refuses rather than getting it silently wrong.

    The message names the feature and, where there is one, the way to get the same effect.
    """
