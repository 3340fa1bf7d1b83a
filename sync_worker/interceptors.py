"""Worker interceptors: synchronous hooks around workflow, activity and query tasks.

Pass instances to ``Worker(..., interceptors=[...])``. They run in the order given: the
first one is the outermost wrapper. Each hook receives a frozen context and ``next``, the
rest of the chain; it must call ``next(context)`` (or ``next`` with a context rebuilt by
:func:`dataclasses.replace`) and return what it returns, unless it means to replace it.

Typical uses: Django ``close_old_connections()`` around each activity, timing and
metrics, Sentry or OpenTelemetry scopes, logging context carrying the task ids.

Hooks are plain functions: ``async def`` hooks are refused with a ``TypeError`` when the
``Worker`` is built. Subclass :class:`PassthroughWorkerInterceptor` and override only the
hooks you need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Protocol, Tuple

if TYPE_CHECKING:  # pragma: no cover - imported for annotations only; keeps this module light
    from .workflow.task import QueryTaskOutcome, WorkflowTaskOutcome

__all__ = [
    "ActivityHandler",
    "ActivityInterceptorContext",
    "PassthroughWorkerInterceptor",
    "QueryTaskHandler",
    "QueryTaskInterceptorContext",
    "WorkerInterceptor",
    "WorkflowTaskHandler",
    "WorkflowTaskInterceptorContext",
]


@dataclass(frozen=True)
class WorkflowTaskInterceptorContext:
    """One leased workflow task (``task`` is the poll response, first history page included).

    ``observability_supported`` (as in the published SDK): the server keeps and hands back the
    W3C trace-context carrier (``task["observability_context"]``, ``task["observability_links"]``).
    """

    worker_id: str
    task_queue: str
    task: Mapping[str, Any]
    namespace: Optional[str] = None
    observability_supported: bool = False


@dataclass(frozen=True)
class ActivityInterceptorContext:
    """One activity attempt: its leased task, its type and its decoded arguments."""

    worker_id: str
    task_queue: str
    task: Mapping[str, Any]
    activity_type: str
    args: Tuple[Any, ...]
    namespace: Optional[str] = None
    observability_supported: bool = False


@dataclass(frozen=True)
class QueryTaskInterceptorContext:
    """One leased query task."""

    worker_id: str
    task_queue: str
    task: Mapping[str, Any]
    namespace: Optional[str] = None
    observability_supported: bool = False


#: ``next`` of ``execute_workflow_task``: loads the history, replays, returns the outcome.
WorkflowTaskHandler = Callable[[WorkflowTaskInterceptorContext], "WorkflowTaskOutcome"]
#: ``next`` of ``execute_activity``: runs the registered activity with ``context.args``.
ActivityHandler = Callable[[ActivityInterceptorContext], Any]
#: ``next`` of ``execute_query_task``: runs the query handler, returns the outcome.
QueryTaskHandler = Callable[[QueryTaskInterceptorContext], "QueryTaskOutcome"]


class WorkerInterceptor(Protocol):
    """What ``Worker(..., interceptors=[...])`` accepts: three synchronous hooks.

    * ``execute_workflow_task`` returns the ``WorkflowTaskOutcome`` (commands or failure) that
      the worker then reports; raising turns into a workflow-task failure.
    * ``execute_activity`` runs inside the activity slot (``activity.context()`` works) and
      returns the activity result; raising is treated exactly like the activity raising
      (``NonRetryableError`` fails the activity non-retryably).
    * ``execute_query_task`` returns the ``QueryTaskOutcome``; raising answers the query with
      a ``query_rejected`` failure.
    """

    def execute_workflow_task(
        self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler
    ) -> WorkflowTaskOutcome:
        ...

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        ...

    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> QueryTaskOutcome:
        ...


class PassthroughWorkerInterceptor:
    """Every hook calls ``next(context)``; subclass it and override the hooks you need."""

    def execute_workflow_task(
        self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler
    ) -> WorkflowTaskOutcome:
        return next(context)

    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        return next(context)

    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> QueryTaskOutcome:
        return next(context)
