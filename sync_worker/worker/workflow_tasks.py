"""Running workflow tasks (§4) and query tasks (§6) through the workflow package.

The replayer itself is pure (``sync_worker.workflow.task``); this module pages in the
history, calls it, and talks to the server: completion with the §4.5 retries, the benign
``WorkflowTaskWaitingForHistory`` fail for an empty command list, and the "completion
failed after commands were produced" fail unless the refusal is a fencing reason.

Worker interceptors wrap history loading plus replay (``execute_workflow_task``) and the
query handler (``execute_query_task``); what they raise fails the task or the query.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import LocalActivityExecutionAborted, PayloadError, ServerError, WorkerShutdown
from ..interceptors import QueryTaskInterceptorContext, WorkerInterceptor, WorkflowTaskInterceptorContext
from ..protocol import QueryTask, WorkerPlane, WorkflowTask, reasons
from ..runtime.inflight import InflightTask
from .interception import chain
from .local_activities import TaskLocalActivities
from .outcomes import OutcomeAbandoned, deliver, lease_deadline
from .sticky import CachedRun, StickyWorkflowCache, run_sticky_task
from .task_failures import note_task_failure
from .unknown_types import warn_unknown_type

__all__ = [
    "FENCING_REASONS",
    "WAITING_FOR_HISTORY_FAILURE",
    "run_query_task",
    "run_workflow_task",
]

logger = logging.getLogger("sync_worker.worker.workflow")

WAITING_FOR_HISTORY_FAILURE = {
    "message": "Workflow task waiting for scheduled history.",
    "type": reasons.WORKFLOW_TASK_WAITING_FOR_HISTORY,
}

#: Refusals that mean the task is no longer ours: nothing more is sent.
FENCING_REASONS = reasons.FENCING_REASONS

#: Query complete/fail refusals that mean the query already ended on the server.
QUERY_ENDED_REASONS = frozenset({
    "lease_expired", "query_task_not_found", "query_task_not_leased", "query_task_timed_out",
})


def _default_executor() -> Callable[..., Any]:
    from ..workflow.task import execute_workflow_task

    return execute_workflow_task


def _default_query_executor() -> Callable[..., Any]:
    from ..workflow.task import execute_query_task

    return execute_query_task


def load_history(client: WorkerPlane, task: Mapping[str, Any], worker_id: str, cancel: Any,
                 first_token: Optional[str] = None) -> List[Dict[str, Any]]:
    """The task's first page plus every further page until the token is None.

    With ``first_token`` the inline page is ignored and paging starts there (the sticky
    cache's cold path fetches the complete history from ``"MA=="``).
    """
    events: List[Dict[str, Any]] = [] if first_token is not None else list(task.get("history_events") or [])
    token = first_token if first_token is not None else task.get("next_history_page_token")
    seen = set()
    while token is not None:
        if token in seen:
            raise RuntimeError("workflow history paging did not advance")
        seen.add(token)
        page = client.workflow_task_history(
            task["task_id"], lease_owner=worker_id,
            workflow_task_attempt=_attempt(task), next_history_page_token=token, cancel=cancel,
        )
        events.extend(page.get("history_events") or [])
        token = page.get("next_history_page_token")
    return _as_leased(task, events)


def _as_leased(task: Mapping[str, Any], events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The history as it stood when the task was leased: later pages may already hold events
    recorded since (a signal accepted while this task runs belongs to a later task)."""
    total = task.get("total_history_events")
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        return events
    if not all(isinstance(event.get("sequence"), int) for event in events):
        return events
    return [event for event in events if event["sequence"] <= total]


def _attempt(task: Mapping[str, Any]) -> int:
    value = task.get("workflow_task_attempt", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def _error_failure(prefix: str, error: BaseException) -> Dict[str, Any]:
    return {
        "message": f"{prefix}: {error}",
        "type": type(error).__name__,
        "stack_trace": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }


def run_workflow_task(
    *,
    client: WorkerPlane,
    task: WorkflowTask,
    registry: Any,
    worker_id: str,
    task_queue: str,
    inflight: InflightTask,
    sleep: Callable[[float], None],
    executor: Optional[Callable[..., Any]] = None,
    interceptors: Sequence[WorkerInterceptor] = (),
    namespace: Optional[str] = None,
    sticky: Optional[StickyWorkflowCache] = None,
    build_id: Optional[str] = None,
    activities: Optional[Mapping[str, Callable[..., Any]]] = None,
    observability_supported: Union[bool, Callable[[], bool]] = False,
) -> str:
    """Replay one leased workflow task and send its commands; returns the outcome name.

    ``observability_supported`` (or a call that answers it) is asked only when an interceptor is
    configured (it goes into the interceptor context).

    With an enabled ``sticky`` cache (and the default executor) the run's suspended state
    is resumed when continuity is proved, and kept again after a delivered outcome.
    """
    task_id, attempt, cancel = task.task_id, task.attempt, inflight.cancel

    def window(at: float) -> Tuple[float, str]:
        """Until when an outcome may land, as seen at ``at`` (worked out only if a first report fails)."""
        return lease_deadline(task.raw, now=lambda: at), "its lease ends"

    run_id = task.run_id or task.workflow_id or task_id
    workflow_type = task.workflow_type
    if executor is None and hasattr(registry, "names") and registry.get(workflow_type) is None:
        warn_unknown_type(registry, "workflow", workflow_type, registry.names())

    def fail(failure: Dict[str, Any], *, benign: bool = False) -> bool:
        if not benign:
            note_task_failure(workflow_type, run_id, task_id, failure)
        if not inflight.claim_report():
            return False
        try:
            deliver(lambda: client.fail_workflow_task(task_id, lease_owner=worker_id, workflow_task_attempt=attempt,
                                                      failure=failure, cancel=cancel),
                    what=f"workflow task {task_id} failure report", cancel=cancel, window=window)
        except WorkerShutdown:
            logger.warning("workflow task %s failure report interrupted by shutdown", task_id)
            return False
        except OutcomeAbandoned:
            return False
        except Exception as error:
            logger.warning("failed to report workflow task %s failure: %s", task_id, error)
            return False
        return True

    kept: List[CachedRun] = []

    def execute_task(raw: Mapping[str, Any]) -> Any:
        local = TaskLocalActivities(client=client, task=raw, activities=activities or {},
                                    worker_id=worker_id, task_queue=task_queue, inflight=inflight,
                                    interceptors=interceptors, namespace=namespace, sleep=sleep)
        if sticky is not None and sticky.enabled and executor is None:
            outcome, entry = run_sticky_task(
                sticky, registry, dict(raw), task_queue=task_queue,
                load=lambda token: load_history(client, raw, worker_id, cancel, token), local_activities=local)
            if entry is not None:
                kept.append(entry)
            return outcome
        events = load_history(client, raw, worker_id, cancel)
        if executor is not None:
            return executor(registry, dict(raw), events, task_queue=task_queue)
        return _default_executor()(registry, dict(raw), events, task_queue=task_queue, local_activities=local)

    def execute(context: WorkflowTaskInterceptorContext) -> Any:
        return execute_task(context.task)

    def keep() -> Optional[Dict[str, Any]]:
        # Cached before the outcome is sent: the run's next task may arrive right after it.
        if sticky is None or not kept or not sticky.keep(kept[0]):
            return None
        return sticky.claim(kept[0], worker_id, build_id)

    def drop() -> None:
        if sticky is not None and kept:
            sticky.discard(kept[0].run_id)

    try:
        if interceptors:
            outcome = chain(interceptors, "execute_workflow_task", execute, none_allowed=False)(
                WorkflowTaskInterceptorContext(
                    worker_id=worker_id, task_queue=task_queue, task=task.raw, namespace=namespace,
                    observability_supported=bool(observability_supported() if callable(observability_supported)
                                                 else observability_supported)))
        else:  # no interceptor: no chain, no interceptor context
            outcome = execute_task(task.raw)
    except WorkerShutdown:
        return "abandoned"
    except LocalActivityExecutionAborted as error:
        if getattr(error, "abandon_task", False):
            # The lease is gone (or the worker abandoned the task): report nothing, as the SDK.
            logger.warning("abandoning workflow task %s before local activity commit: %s", task_id, error)
            return "abandoned"
        logger.debug("workflow task %s refused", task_id, exc_info=True)
        fail(_error_failure("workflow task refused", error))
        return "failed"
    except Exception as error:
        logger.debug("workflow task %s could not be executed", task_id, exc_info=True)
        fail(_error_failure("unhandled workflow task execution error", error))
        return "failed"

    failure = getattr(outcome, "failure", None)
    commands = list(getattr(outcome, "commands", None) or [])
    if failure is not None:
        return "failed" if fail(dict(failure)) else "complete_error"
    if not commands:
        keep()
        if not fail(dict(WAITING_FOR_HISTORY_FAILURE), benign=True):
            drop()
        return "waiting_for_history"

    if not inflight.claim_report():
        return "abandoned"
    claim = keep()
    extra: Dict[str, Any] = {"sticky_cache": claim} if claim is not None else {}
    try:
        deliver(lambda: client.complete_workflow_task(
            task_id, lease_owner=worker_id, workflow_task_attempt=attempt, commands=commands, cancel=cancel,
            message_stream_cursors=list(getattr(outcome, "message_stream_cursors", None) or []),
            message_stream_waits=list(getattr(outcome, "message_stream_waits", None) or []), **extra),
            what=f"workflow task {task_id} completion", cancel=cancel, window=window)
        return "completed"
    except WorkerShutdown:
        drop()
        return "abandoned"
    except OutcomeAbandoned:
        drop()
        return "complete_error"
    except Exception as error:
        drop()
        last_error: BaseException = error
    if isinstance(last_error, ServerError) and last_error.reason() in FENCING_REASONS:
        logger.warning("workflow task %s completion refused (%s); nothing more is sent",
                       task_id, last_error.reason())
        return "claim_aborted"
    if isinstance(last_error, ServerError) and last_error.status < 500:
        fail(_error_failure("workflow task completion failed after commands were produced", last_error))
    else:
        logger.warning("workflow task %s completion failed: %s", task_id, type(last_error).__name__)
    return "complete_error"


def run_query_task(
    *,
    client: WorkerPlane,
    task: QueryTask,
    registry: Any,
    worker_id: str,
    cancel: Any,
    executor: Optional[Callable[..., Any]] = None,
    interceptors: Sequence[WorkerInterceptor] = (),
    task_queue: str = "",
    namespace: Optional[str] = None,
    observability_supported: bool = False,
) -> str:
    """Answer one leased query task; returns the outcome name."""
    query_task_id, attempt = task.query_task_id, task.attempt
    def execute(context: QueryTaskInterceptorContext) -> Any:
        return (executor or _default_query_executor())(registry, dict(context.task))

    try:
        outcome = chain(interceptors, "execute_query_task", execute, none_allowed=False)(
            QueryTaskInterceptorContext(worker_id=worker_id, task_queue=task_queue, task=task.raw,
                                        namespace=namespace, observability_supported=observability_supported))
        failure = getattr(outcome, "failure", None)
    except Exception as error:
        logger.exception("query task %s could not be executed", query_task_id)
        failure = {"message": str(error), "reason": "query_rejected", "type": type(error).__name__}
        outcome = None
    try:
        if failure is not None:
            client.fail_query_task(query_task_id, lease_owner=worker_id, query_task_attempt=attempt,
                                   failure=dict(failure), cancel=cancel)
            return "failed"
        try:
            client.complete_query_task(query_task_id, lease_owner=worker_id, query_task_attempt=attempt,
                                       result=getattr(outcome, "value", None), cancel=cancel)
        except PayloadError as error:
            client.fail_query_task(query_task_id, lease_owner=worker_id, query_task_attempt=attempt, failure={
                "message": f"query result cannot be encoded: {error}", "reason": "query_result_encode_failed",
                "type": type(error).__name__}, cancel=cancel)
            return "failed"
        return "completed"
    except WorkerShutdown:
        return "abandoned"
    except ServerError as error:
        if error.reason() in QUERY_ENDED_REASONS:
            logger.info("query task %s already ended on the server (%s)", query_task_id, error.reason())
        else:
            logger.warning("failed to answer query task %s: %s", query_task_id, error)
        return "complete_error"
    except Exception as error:
        logger.warning("failed to answer query task %s: %s", query_task_id, type(error).__name__)
        return "complete_error"
