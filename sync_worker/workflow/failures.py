"""How an exception escaping workflow code becomes a ``fail_workflow`` command (§4.5.1, §13.3).

The message, ``exception_type`` (class ``__name__``) and ``exception_class``
(``module.qualname``) describe the error. An ``ActivityFailed`` (raised directly, or the
``__cause__`` of the raised error) reports the activity's own exception type/class and an
``exception`` object; when the failure carries its step sequence and activity execution
id, ``failed_step_sequence`` / ``failed_activity_execution_id`` are added. A
``SagaCompensationFailed`` reports both the initiating and the compensation failure.
Nothing is truncated here: the client bounds the whole request (§10).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..errors import ActivityFailed, SagaCompensationFailed
from .commands import FailUpdate, FailWorkflow

__all__ = ["exception_class_name", "fail_update_from_exception", "fail_workflow_from_exception"]


def exception_class_name(error: BaseException) -> str:
    return f"{type(error).__module__}.{type(error).__qualname__}"


def _summary(error: BaseException) -> Dict[str, Any]:
    return {"type": type(error).__name__, "class": exception_class_name(error),
            "message": str(error) or type(error).__name__}


def fail_workflow_from_exception(error: BaseException, *, prefix: Optional[str] = None) -> FailWorkflow:
    """The ``FailWorkflow`` command for an exception raised by workflow code."""
    message = str(error) or type(error).__name__
    if prefix:
        message = f"{prefix}: {message}"
    exception_type, exception_class = type(error).__name__, exception_class_name(error)
    if isinstance(error, SagaCompensationFailed):
        compensation = _summary(error.compensation_failure)
        compensation["activity_type"] = error.compensation_activity_type
        compensation["registration_order"] = error.compensation_registration_order
        return FailWorkflow(
            message=message,
            exception_type=exception_type,
            exception_class=exception_class,
            exception={"type": exception_type, "class": exception_class, "message": message,
                       "initiating_failure": _summary(error.initiating_failure),
                       "compensation_failure": compensation},
        )
    exception: Optional[Dict[str, Any]] = None
    cause = error.__cause__
    activity = error if isinstance(error, ActivityFailed) else cause if isinstance(cause, ActivityFailed) else None
    if activity is not None:
        exception_type = activity.exception_type or type(activity).__name__
        exception_class = activity.exception_class or exception_class_name(activity)
        exception = {"type": exception_type, "class": exception_class, "message": message}
        if activity.activity_type is not None:
            exception["activity_type"] = activity.activity_type
        if activity.activity_attempt_id is not None:
            exception["activity_attempt_id"] = activity.activity_attempt_id
    step_sequence: Optional[int] = None
    execution_id: Optional[str] = None
    if (isinstance(error, ActivityFailed) and type(error.step_sequence) is int and error.step_sequence > 0
            and isinstance(error.activity_execution_id, str) and error.activity_execution_id):
        step_sequence, execution_id = error.step_sequence, error.activity_execution_id
    return FailWorkflow(
        message=message,
        exception_type=exception_type,
        exception_class=exception_class,
        exception=exception,
        failed_step_sequence=step_sequence,
        failed_activity_execution_id=execution_id,
    )


def fail_update_from_exception(update_id: str, prefix: str, error: BaseException) -> FailUpdate:
    """The ``FailUpdate`` command for an update that could not be applied."""
    return FailUpdate(
        update_id=update_id,
        message=f"{prefix}: {str(error) or type(error).__name__}",
        exception_type=type(error).__name__,
        exception_class=exception_class_name(error),
    )
