"""Running one activity attempt in its slot and reporting its outcome (protocol §5).

Outcome rules:

* return value → ``complete``, retried through an outage while the lease can be valid;
* a return value the codec cannot carry (``Decimal``, ``datetime``...) → ``fail`` at once,
  non-retryable, naming the path (``result["total"]``);
* :class:`NonRetryableError` → ``fail`` with ``non_retryable: true``;
* :class:`ActivityCancelled` from a heartbeat → ``fail`` "activity cancelled", non-retryable;
* :class:`ActivityLeaseAuthorityLost` (now or from an earlier heartbeat the code caught)
  → nothing is reported (``claim_aborted``);
* an attempt abandoned at the shutdown deadline → nothing is reported (``abandoned``);
* any other exception → retryable ``fail``; an int ``code`` attribute is forwarded, an
  exception attribute ``non_retryable = True`` makes it non-retryable, and a numeric
  ``next_retry_delay`` (seconds) is sent for the server to wait before the next attempt.

Worker interceptors (``execute_activity``) wrap the call inside the slot, with the
activity context set; whatever they raise follows the same rules.

Failure bodies carry the full message and stack; the Client bounds them (§10).
"""

from __future__ import annotations

import inspect
import logging
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import activity as activity_api
from ..errors import (
    ActivityCancelled,
    ActivityLeaseAuthorityLost,
    DuplicateRegistrationError,
    FailureReportTooLarge,
    InvalidWorkflowDefinition,
    NonRetryableError,
    PayloadEncodeError,
    PayloadError,
    ServerError,
    WorkerShutdown,
)
from ..interceptors import ActivityInterceptorContext, WorkerInterceptor
from ..payloads import decode_arguments, envelope
from ..protocol import ActivityTask, WorkerPlane
from ..runtime.inflight import InflightTask
from .interception import chain
from .outcomes import OutcomeAbandoned, activity_outcome_deadline, deliver
from .results import not_encodable, not_encodable_failure
from .tasklog import format_raised, format_received, format_succeeded, task_logger
from .unknown_types import warn_unknown_type

__all__ = ["activity_map", "exception_class_name", "failure_from_exception", "run_activity_task"]

logger = logging.getLogger("sync_worker.worker.activity")


def exception_class_name(error: BaseException) -> str:
    cls = type(error)
    return f"{cls.__module__}.{cls.__qualname__}"


def failure_from_exception(error: BaseException, *, non_retryable: Optional[bool] = None) -> Dict[str, Any]:
    """The §5.4 failure body for an exception raised by activity code."""
    failure: Dict[str, Any] = {
        "message": str(error),
        "type": type(error).__name__,
        "class": exception_class_name(error),
        "stack_trace": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }
    code = getattr(error, "code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        failure["code"] = code
    if non_retryable is None:
        non_retryable = isinstance(error, NonRetryableError) or getattr(error, "non_retryable", None) is True
    if non_retryable:
        failure["non_retryable"] = True
    # Like Temporal's ApplicationError.next_retry_delay: the exception asks the server to wait
    # this many seconds before the next attempt (the retry policy still decides *whether*).
    delay = getattr(error, "next_retry_delay", None)
    if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay >= 0 and not non_retryable:
        failure["next_retry_delay"] = float(delay)
    return failure


def activity_map(activities: Sequence[Callable[..., Any]]) -> Dict[str, Callable[..., Any]]:
    mapping: Dict[str, Callable[..., Any]] = {}
    for fn in activities:
        if not callable(fn):
            raise InvalidWorkflowDefinition(f"activities must be callables, got {type(fn).__name__}")
        if inspect.iscoroutinefunction(fn):
            raise InvalidWorkflowDefinition(
                f"activity {activity_api.activity_name(fn)!r} is an 'async def'; sync_worker runs synchronous "
                "activities only"
            )
        name = activity_api.activity_name(fn)
        if name in mapping and mapping[name] is not fn:
            raise DuplicateRegistrationError("activity", name)
        mapping[name] = fn
    return mapping


def _cancelled_failure() -> Dict[str, Any]:
    return {
        "message": "activity cancelled",
        "type": "ActivityCancelled",
        "class": exception_class_name(ActivityCancelled()),
        "non_retryable": True,
    }


def run_activity_task(
    *,
    client: WorkerPlane,
    task: ActivityTask,
    activities: Mapping[str, Callable[..., Any]],
    worker_id: str,
    task_queue: str,
    inflight: InflightTask,
    interceptors: Sequence[WorkerInterceptor] = (),
    namespace: Optional[str] = None,
    observability_supported: Callable[[], bool] = bool,
) -> str:
    """Execute one leased activity task; returns the outcome name (for metrics and logs).

    ``observability_supported`` is asked only when an interceptor is configured (it goes into the
    interceptor context)."""
    task_id, attempt_id = task.task_id, task.attempt_id
    activity_type, attempt_number = task.activity_type, task.attempt_number

    received_at = time.time()
    label = f"activity {activity_type or '?'}[{attempt_id or task_id}]"
    heartbeats: List[activity_api.ActivityContext] = []  # the attempt's context, once it has one

    def outcome_window(at: float) -> Tuple[float, str]:
        """Until when the outcome may land, as seen at ``at`` (worked out only if a first report fails)."""
        last = heartbeats[0].last_heartbeat_at if heartbeats else None
        return activity_outcome_deadline(task.raw, received_at=received_at, last_heartbeat_at=last,
                                         now=lambda: at)

    def report_failure(failure: Dict[str, Any], what: str) -> None:
        if not inflight.claim_report():
            logger.warning("%s abandoned at shutdown; its %s is not reported", label, what)
            return
        try:
            deliver(lambda: client.fail_activity_task(
                task_id, activity_attempt_id=attempt_id, lease_owner=worker_id, failure=failure,
                cancel=inflight.cancel), what=f"{label} {what} report", cancel=inflight.cancel, window=outcome_window)
        except FailureReportTooLarge as error:
            logger.error("%s %s could not be reported: %s", label, what, error)
        except WorkerShutdown:
            logger.warning("%s %s report interrupted by shutdown", label, what)
        except OutcomeAbandoned:
            pass  # deliver() logged it
        except Exception as error:  # refused: the server's timeouts recover an unreported attempt
            logger.warning("failed to report %s %s: %s", label, what, _refusal(error))

    codec = task.payload_codec
    if codec != "avro":
        report_failure(
            {"message": f"cannot decode activity arguments with codec {codec!r}: unsupported_payload_codec",
             "type": "UnsupportedPayloadCodec", "non_retryable": True},
            "decode failure",
        )
        return "decode_error"
    try:
        args = decode_arguments(task.arguments, codec="avro")
    except PayloadError as error:
        # an unreachable external payload store may come back (ExternalPayloadUnavailable.retryable)
        failure = failure_from_exception(error, non_retryable=not getattr(error, "retryable", False))
        failure["message"] = f"cannot decode activity arguments: {error}"
        report_failure(failure, "decode failure")
        return "decode_error"

    fn = activities.get(activity_type)
    if fn is None:
        # Retryable on purpose: another worker of this queue may know the type.
        warn_unknown_type(activities, "activity", activity_type, list(activities))
        report_failure({"message": f"no activity registered for {activity_type!r}"}, "unknown type")
        return "no_handler"

    ctx = activity_api.ActivityContext(
        info_factory=lambda: activity_api.ActivityInfo(
            task_id=task_id,
            activity_type=activity_type,
            activity_attempt_id=attempt_id,
            attempt_number=attempt_number,
            task_queue=task_queue,
            worker_id=worker_id,
            task_metadata=task.raw,
        ),
        client=client,
        cancel=inflight.cancel,
    )
    inflight.on_abandon(ctx._mark_abandoned)
    heartbeats.append(ctx)
    activity_fn = fn

    def call_activity(context: ActivityInterceptorContext) -> Any:
        return activity_fn(*context.args)

    # With no interceptor the function is called directly: no chain, no interceptor context.
    execute = chain(interceptors, "execute_activity", call_activity, none_allowed=True) if interceptors else None
    log_id = attempt_id or task_id
    logged = task_logger.isEnabledFor(logging.INFO)  # the lines are built only when someone reads them
    if logged:
        task_logger.info(format_received(activity_type, log_id))
    started = time.monotonic()
    activity_api.set_context(ctx)
    try:
        try:
            if execute is None:
                result = activity_fn(*args)
            else:
                result = execute(ActivityInterceptorContext(
                    worker_id=worker_id, task_queue=task_queue, task=task.raw, activity_type=activity_type,
                    args=tuple(args), namespace=namespace, observability_supported=bool(observability_supported()),
                ))
        finally:
            # A heartbeat refusal the code caught still ends the attempt's authority.
            ctx.raise_if_cannot_continue()
    except ActivityLeaseAuthorityLost as error:
        logger.warning("%s cannot continue: %s; nothing is reported", label, error.reason)
        return "claim_aborted"
    except ActivityCancelled:
        if inflight.abandoned:
            logger.warning("%s stopped after the worker abandoned it", label)
            return "abandoned"
        task_logger.info("Task %s[%s] cancelled via heartbeat", activity_type, log_id)
        report_failure(_cancelled_failure(), "cancellation")
        return "cancelled"
    except NonRetryableError as error:
        task_logger.info(format_raised(activity_type, log_id, error) + "\n(non-retryable)")
        report_failure(failure_from_exception(error, non_retryable=True), "failure")
        return "failed_non_retryable"
    except Exception as error:
        task_logger.info(format_raised(activity_type, log_id, error))
        report_failure(failure_from_exception(error), "failure")
        return "failed"
    finally:
        activity_api.set_context(None)

    if not inflight.claim_report():
        logger.warning("%s finished after the worker abandoned it; its result is not reported", label)
        return "abandoned"
    try:
        result_envelope = envelope(result)
    except PayloadEncodeError as error:
        unencodable = not_encodable(error, result)
        task_logger.info(format_raised(activity_type, log_id, unencodable, with_traceback=False))
        logger.error("%s returned a value the codec cannot carry; reported as a non-retryable failure: %s",
                     label, unencodable)
        report_failure(not_encodable_failure(unencodable), "unencodable result")
        return "failed_non_retryable"
    if logged:
        task_logger.info(format_succeeded(activity_type, log_id, time.monotonic() - started, result))
    try:
        deliver(lambda: client.complete_activity_task(
            task_id, activity_attempt_id=attempt_id, lease_owner=worker_id, result=result,
            cancel=inflight.cancel, result_envelope=result_envelope,
        ), what=f"{label} completion", cancel=inflight.cancel, window=outcome_window)
    except WorkerShutdown:
        logger.warning("%s completion interrupted by shutdown", label)
        return "complete_error"
    except OutcomeAbandoned:
        return "complete_error"
    except Exception as error:
        logger.warning("failed to complete %s: %s", label, _refusal(error))
        return "complete_error"
    return "completed"


def _refusal(error: BaseException) -> str:
    if isinstance(error, ServerError):
        return f"{type(error).__name__} (HTTP {error.status}, reason={error.reason()!r})"
    return type(error).__name__
