"""Update validators: ``@workflow.update(...)`` + ``@<handler>.validator`` / ``@workflow.update_validator``.

The server asks for a verdict *before* it accepts an update (protocol §4.10): it hands a worker
an update-validation task carrying the run's history and the update's arguments. :func:`validate_update`
replays the history to the current state (local activities never run here), calls only the
validator -- never the handler, and nothing is recorded -- and returns the verdict the worker
sends back, as the published SDK's ``_prepare_update_validation`` / ``_invoke_update_validator``:

* approved: the validator returned anything but ``False`` (``None`` included);
* ``update_validator_rejected``: it raised (the exception's class name and message; an
  ``UpdateRejected`` it raised keeps its ``exception_type`` and ``validation_errors``, an
  ``InvalidArgument`` gives its ``errors``) or returned ``False`` (``ValueError``,
  ``update validator 'x' returned false``);
* ``update_validation_worker_failed``: the worker cannot decide -- the replay failed or the run
  failed before this point, the update or its validator is unknown to this class.

A validator may be ``async def`` as long as it never really awaits (there is no event loop here).
"""

from __future__ import annotations

import inspect
import traceback
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .commands import FailWorkflow
from .replayer import replay

__all__ = ["ValidationVerdict", "validate_update"]

REJECTED = "update_validator_rejected"
WORKER_FAILED = "update_validation_worker_failed"


@dataclass
class ValidationVerdict:
    """``approved``, or the rejection body's fields (``reason``, ``message``, ``type``...)."""

    approved: bool
    reason: Optional[str] = None
    message: str = ""
    type: Optional[str] = None
    validation_errors: Optional[Dict[str, Any]] = None
    stack_trace: Optional[str] = None

    def failure(self) -> Dict[str, Any]:
        """The ``failure`` object of ``POST /worker/update-validation-tasks/{id}/reject``."""
        body: Dict[str, Any] = {"message": self.message, "reason": self.reason}
        if self.type is not None:
            body["type"] = self.type
        if self.stack_trace is not None:
            body["stack_trace"] = self.stack_trace
        if self.validation_errors is not None:
            body["validation_errors"] = self.validation_errors
        return body


def _refused(reason: str, message: str, error: Optional[BaseException] = None, *, kind: Optional[str] = None,
             validation_errors: Optional[Dict[str, Any]] = None) -> ValidationVerdict:
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)) if error else None
    return ValidationVerdict(False, reason, message, kind or (type(error).__name__ if error else None),
                             validation_errors, trace)


def _finish(result: Any) -> Any:
    """An ``async def`` validator's value, when its coroutine completes without suspending."""
    if not inspect.iscoroutine(result):
        return result
    try:
        result.send(None)
    except StopIteration as done:
        return done.value
    result.close()
    raise TypeError("async update validators may not await real I/O on sync_worker (no event loop runs here)")


def _errors_of(error: BaseException) -> Optional[Dict[str, Any]]:
    for name in ("validation_errors", "errors"):
        found = getattr(error, name, None)
        if isinstance(found, dict) and found:
            return found
    body = getattr(error, "body", None)
    found = body.get("errors") if isinstance(body, dict) else None
    return found if isinstance(found, dict) and found else None


def validate_update(cls: type, history: List[Dict[str, Any]], start_input: List[Any], update_name: str,
                    args: List[Any], *, workflow_id: Optional[str] = None, run_id: str = "",
                    payload_codec: Optional[str] = "avro") -> ValidationVerdict:
    """The verdict of ``cls``'s validator of ``update_name`` on the replayed state; see the module."""
    try:
        state = replay(cls, history, start_input, workflow_id=workflow_id, run_id=run_id, payload_codec=payload_codec)
    except Exception as error:
        return _refused(WORKER_FAILED, f"workflow replay failed before update validation: "
                                       f"{str(error) or type(error).__name__}", error, kind="UpdateValidationFailed")
    if state.commands and isinstance(state.commands[0], FailWorkflow):
        return _refused(WORKER_FAILED, f"workflow replay failed before update validation: {state.commands[0].message}",
                        kind="UpdateValidationFailed")
    if update_name not in (getattr(cls, "__workflow_updates__", {}) or {}):
        return _refused(WORKER_FAILED, f"unknown update {update_name!r}", kind="UpdateValidationFailed")
    method = (getattr(cls, "__workflow_update_validators__", {}) or {}).get(update_name)
    if method is None:
        return _refused(WORKER_FAILED, f"update validator {update_name!r} is not declared",
                        kind="UpdateValidationFailed")
    validator = getattr(state.instance, method, None)
    if validator is None:
        return _refused(WORKER_FAILED, f"update validator {update_name!r} is not available",
                        kind="UpdateValidationFailed")
    try:
        result = _finish(validator(*args))
        if result is False:
            raise ValueError(f"update validator {update_name!r} returned false")
    except Exception as error:
        own_type = getattr(error, "exception_type", None) if type(error).__name__ == "UpdateRejected" else None
        return _refused(REJECTED, str(error) or f"update validator {update_name!r} rejected the request", error,
                        kind=own_type if isinstance(own_type, str) and own_type else None,
                        validation_errors=_errors_of(error))
    return ValidationVerdict(True)
