"""Sentry for sync_worker: task failures as Sentry events, turned on the Sentry way.

::

    import sentry_sdk
    from sync_worker.contrib.sentry import SyncWorkerIntegration

    sentry_sdk.init(dsn=..., integrations=[SyncWorkerIntegration()])

From then on every worker of the process (plain ``Worker``, ``sync-worker run``, Django's
``durable_worker``, the Celery facade) reports:

* an **activity failure once**: on the attempt that ends the activity (a non-retryable error, a type
  the retry policy lists as non-retryable, or the last attempt the policy allows; with unlimited
  attempts, the first failure), not once per retry, unless ``capture_every_attempt=True``;
* a **workflow-task failure** (a bug or non-determinism in workflow code: the server retries the
  task, so it is captured on the task's first attempt only, unless ``capture_every_attempt``);
* with tags ``workflow.id``, ``workflow.run_id``, ``workflow.type`` (workflow tasks: an activity
  task does not name its workflow's type), ``activity.type``,
  ``activity.attempt``, ``task_queue``, ``namespace``, a ``sync_worker`` context, the task log's
  "received" line and whatever the task logged as breadcrumbs (each task gets its own scope:
  nothing leaks from one task to the next), and the trace linked: the current OpenTelemetry span
  when ``contrib.opentelemetry`` is on, else the task's W3C ``traceparent`` from the server.

Cancellation, shutdown, lost leases and the Celery facade's ``Retry`` / ``Ignore`` / ``Reject`` are
not errors and are never captured (the facade's final failures are non-retryable: captured once). The Django app and
the Celery facade call :func:`enable_if_sentry_is_initialized` when their worker starts, so a shop
that already runs ``sentry_sdk.init(...)`` (with Sentry's Django or Celery integration) keeps its
error reports when it swaps in sync_worker, as those integrations turn themselves on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any, Dict, Optional

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.utils import event_from_exception

from .. import instrumentation
from ..errors import ActivityCancelled, ActivityLeaseAuthorityLost, NonRetryableError, WorkerShutdown
from ..interceptors import (
    ActivityHandler,
    ActivityInterceptorContext,
    PassthroughWorkerInterceptor,
    WorkflowTaskHandler,
    WorkflowTaskInterceptorContext,
)
from ..protocol.trace_context import carrier_of, parse_traceparent
from ..worker.tasklog import format_received

__all__ = ["SyncWorkerIntegration", "SentryInterceptor", "enable_if_sentry_is_initialized"]

_NOT_ERRORS = (ActivityCancelled, ActivityLeaseAuthorityLost, WorkerShutdown)
_lock = threading.Lock()
_installed: Optional[SentryInterceptor] = None
_auto_client: Any = None  # the Sentry client a door (Django, Celery facade) found initialised


class SyncWorkerIntegration(Integration):
    """``sentry_sdk.init(integrations=[SyncWorkerIntegration(capture_every_attempt=False)])``."""

    identifier = "sync_worker"

    def __init__(self, *, capture_every_attempt: bool = False, capture_workflow_task_failures: bool = True) -> None:
        self.capture_every_attempt = capture_every_attempt
        self.capture_workflow_task_failures = capture_workflow_task_failures

    @staticmethod
    def setup_once() -> None:
        _install()


def enable_if_sentry_is_initialized() -> bool:
    """Report task failures to Sentry when this process has initialised it (with default options).

    What the Django app and the Celery facade call as their worker starts; a no-op (False) when
    Sentry is not initialised. ``SyncWorkerIntegration`` in ``sentry_sdk.init`` is the explicit way.
    """
    global _auto_client
    client = sentry_sdk.get_client()
    if not client.is_active():
        return False
    _auto_client = client
    _install()
    return True


def _install() -> None:
    global _installed
    with _lock:
        if _installed is None:
            _installed = SentryInterceptor()
            instrumentation.install_worker_interceptor(_installed)


def _options() -> Optional[SyncWorkerIntegration]:
    """The integration of the current Sentry client (a default one when a door turned it on); None: off."""
    client = sentry_sdk.get_client()
    if not client.is_active():
        return None
    integration = client.get_integration(SyncWorkerIntegration)
    if integration is None and client is _auto_client:
        return _DEFAULTS
    return integration


_DEFAULTS = SyncWorkerIntegration()


def _tags(task: Mapping[str, Any], task_queue: str, namespace: Optional[str], **more: Any) -> Dict[str, str]:
    values = {"workflow.id": task.get("workflow_id"), "workflow.run_id": task.get("run_id"),
              "workflow.type": task.get("workflow_type"), "task_queue": task_queue, "namespace": namespace, **more}
    return {key: str(value) for key, value in values.items() if value is not None and value != ""}


def _link_trace(scope: Any, task: Mapping[str, Any]) -> None:
    """The event's trace: the current OpenTelemetry span, else the task's traceparent from the server."""
    trace_id = span_id = None
    try:
        from opentelemetry import trace as otel_trace

        current = otel_trace.get_current_span().get_span_context()
        if current.is_valid:
            trace_id, span_id = current.trace_id, current.span_id
    except ImportError:  # the [otel] extra is not installed: the server's carrier only
        pass
    if trace_id is None:
        carrier = carrier_of(task.get("observability_context"))
        parsed = parse_traceparent(carrier.get("traceparent")) if carrier else None
        if parsed is not None:
            trace_id, span_id = parsed["trace_id"], parsed["span_id"]
    if trace_id is not None and span_id is not None:
        scope.set_context("trace", {"trace_id": f"{trace_id:032x}", "span_id": f"{span_id:016x}",
                                    "op": "sync_worker.task"})


def _control_flow(error: BaseException) -> bool:
    """The Celery facade's ``Retry`` / ``Ignore`` / ``Reject``: requests, not errors (as Sentry's Celery
    integration treats Celery's). Read only when the facade is loaded; nothing is imported for it."""
    facade = sys.modules.get("sync_worker_celery.exceptions")
    kinds = tuple(getattr(facade, name) for name in ("Retry", "Ignore", "Reject") if hasattr(facade, name))
    return bool(kinds) and isinstance(error, kinds)


def _fresh_breadcrumbs(scope: Any) -> None:
    """Only this task's breadcrumbs (a pooled thread or greenlet keeps the last task's otherwise)."""
    scope.clear_breadcrumbs()
    sentry_sdk.get_current_scope().clear_breadcrumbs()


def _final_attempt(task: Mapping[str, Any], error: BaseException) -> bool:
    """Whether this failed attempt ends the activity (the retry policy's rule, as the server applies it)."""
    if isinstance(error, NonRetryableError) or getattr(error, "non_retryable", None) is True:
        return True
    policy = task.get("retry_policy")
    if not isinstance(policy, Mapping):
        return True  # no policy: one attempt
    if type(error).__name__ in (policy.get("non_retryable_error_types") or []):
        return True
    maximum = policy.get("max_attempts", 1)
    attempt = task.get("attempt_number") or 1
    if maximum is None:
        return attempt == 1  # unlimited attempts: report the first failure only
    return isinstance(attempt, int) and isinstance(maximum, int) and attempt >= maximum


def _capture(error: BaseException) -> None:
    """One event for ``error``, marked unhandled by the ``sync_worker`` mechanism (as Sentry's own integrations)."""
    client = sentry_sdk.get_client()
    event, hint = event_from_exception(error, client_options=client.options,
                                       mechanism={"type": "sync_worker", "handled": False})
    sentry_sdk.capture_event(event, hint=hint)


class SentryInterceptor(PassthroughWorkerInterceptor):
    """The worker interceptor the integration installs (usable directly in ``Worker(interceptors=...)``)."""

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        options = _options()
        if options is None:
            return next(context)
        task = context.task
        attempt = task.get("attempt_number")
        with sentry_sdk.isolation_scope() as scope:
            _fresh_breadcrumbs(scope)
            for key, value in _tags(task, context.task_queue, context.namespace, **{
                    "activity.type": context.activity_type, "activity.attempt": attempt}).items():
                scope.set_tag(key, value)
            scope.set_context("sync_worker", {
                "kind": "activity", "activity_type": context.activity_type, "attempt": attempt,
                "activity_id": task.get("activity_execution_id"),
                "attempt_id": task.get("activity_attempt_id") or task.get("attempt_id"),
                "task_id": task.get("task_id"), "worker_id": context.worker_id})
            scope.transaction = context.activity_type
            log_id = str(task.get("activity_attempt_id") or task.get("attempt_id") or task.get("task_id") or "")
            scope.add_breadcrumb(category="sync_worker.task", level="info",
                                 message=format_received(context.activity_type, log_id))
            _link_trace(scope, task)
            try:
                return next(context)
            except _NOT_ERRORS:
                raise
            except Exception as error:
                if _control_flow(error):
                    raise
                if options.capture_every_attempt or _final_attempt(task, error):
                    _capture(error)
                raise

    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler) -> Any:
        options = _options()
        if options is None or not options.capture_workflow_task_failures:
            return next(context)
        task = context.task
        attempt = task.get("workflow_task_attempt", 1)
        with sentry_sdk.isolation_scope() as scope:
            _fresh_breadcrumbs(scope)
            for key, value in _tags(task, context.task_queue, context.namespace,
                                    **{"workflow_task.attempt": attempt}).items():
                scope.set_tag(key, value)
            scope.set_context("sync_worker", {"kind": "workflow_task", "task_id": task.get("task_id"),
                                              "attempt": attempt, "worker_id": context.worker_id})
            scope.transaction = str(task.get("workflow_type") or "workflow task")
            _link_trace(scope, task)
            outcome = next(context)
            failure = getattr(outcome, "failure", None)
            if failure and (options.capture_every_attempt or attempt == 1):
                scope.set_extra("stack_trace", failure.get("stack_trace"))
                scope.fingerprint = ["sync_worker.workflow_task", str(task.get("workflow_type")),
                                     str(failure.get("type") or "")]
                sentry_sdk.capture_message(
                    f"workflow task failed: {failure.get('type') or 'error'}: {failure.get('message')}",
                    level="error")
            return outcome
