"""Database hygiene around every task, in the thread or greenlet that runs it.

Django only cleans connections around HTTP requests (``request_started`` /
``request_finished``). A worker has no requests, so :class:`DjangoTaskInterceptor` does the
same job around every activity attempt, workflow task and query task:

* before: ``close_old_connections()`` (drops a connection that errored, changed
  autocommit or outlived ``CONN_MAX_AGE``) and, under ``DEBUG``, ``reset_queries()`` so
  the query log does not grow without bound;
* after: ``close_old_connections()``, then every connection this slot opened is closed --
  each task runs in its own greenlet or in a slot thread that later tasks reuse, so a
  connection left open would leak until garbage collection or be inherited by the next task,
  and a database restart must never leave a poisoned connection behind for later tasks.

Nothing is closed while a connection is inside ``atomic()`` (a ``TestCase`` transaction, or
an activity run inline by a test) or shared between threads (``LiveServerTestCase``).

The interceptor also checks what an activity returns: a ``Decimal`` (a ``DecimalField``
value), a model instance or a datetime fails the attempt at once, non-retryably, with the
path and a hint, instead of an encoding error that never reaches the server.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator, List

from sync_worker.errors import NonRetryableError
from sync_worker.interceptors import (
    ActivityHandler,
    ActivityInterceptorContext,
    PassthroughWorkerInterceptor,
    QueryTaskHandler,
    QueryTaskInterceptorContext,
    WorkflowTaskHandler,
    WorkflowTaskInterceptorContext,
)

from .values import DjangoValueNotAllowed, check_wire_values

__all__ = ["DjangoTaskInterceptor", "close_slot_connections", "task_scope"]

logger = logging.getLogger("sync_worker.django.db")


def _initialized_connections() -> List[Any]:
    from django.db import connections

    try:
        return list(connections.all(initialized_only=True))
    except TypeError:  # Django < 4.1 has no initialized_only
        return list(connections.all())


def _protected(connection: Any) -> bool:
    """True for a connection we must not close: inside atomic() or shared across threads."""
    return bool(getattr(connection, "in_atomic_block", False) or getattr(connection, "allow_thread_sharing", False))


def close_old_connections() -> None:
    """``django.db.close_old_connections()``, skipping protected connections."""
    for connection in _initialized_connections():
        if _protected(connection):
            continue
        connection.close_if_unusable_or_obsolete()


def close_slot_connections() -> int:
    """Close every connection of the calling thread/greenlet that is not protected; returns how many."""
    closed = 0
    for connection in _initialized_connections():
        if _protected(connection) or connection.connection is None:
            continue
        try:
            connection.close()
            closed += 1
        except Exception as error:  # a dead server: the socket is gone either way
            logger.debug("closing connection %r failed: %s", connection.alias, error)
    return closed


@contextlib.contextmanager
def task_scope() -> Iterator[None]:
    """The hygiene around one task (see the module docstring)."""
    from django.conf import settings
    from django.db import reset_queries

    close_old_connections()
    if settings.DEBUG:
        reset_queries()
    try:
        yield
    finally:
        try:
            close_old_connections()
        finally:
            close_slot_connections()


class DjangoTaskInterceptor(PassthroughWorkerInterceptor):
    """Installed first (outermost) on every worker that :mod:`sync_worker_django` builds."""

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        with task_scope():
            result = next(context)
        try:
            check_wire_values(result, what=f"activity {context.activity_type!r}", role="result")
        except DjangoValueNotAllowed as error:
            raise NonRetryableError(str(error), cause=error) from error
        return result

    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler) -> Any:
        with task_scope():
            return next(context)

    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> Any:
        with task_scope():
            return next(context)
