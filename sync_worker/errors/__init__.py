"""One exception hierarchy for sync_worker.

Names and attributes follow the published ``durable_workflow`` SDK so that code
written against it (``except ActivityFailed as e: e.activity_type``) keeps working
after the import line changes. Transport and server errors carry the HTTP status,
the server's machine-readable ``reason`` and, where the server gave one, its retry
delay (``retry_after_seconds`` in the body; the SDK contract never reads the header).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = [
    "ActivityCancelled",
    "ActivityFailed",
    "ActivityLeaseAuthorityLost",
    "BackpressureError",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowTerminated",
    "CodePosition",
    "Conflict",
    "DuplicateRegistrationError",
    "DurableOperationCancelled",
    "DurableWorkflowError",
    "ExternalPayloadError",
    "ExternalPayloadExpired",
    "ExternalPayloadIntegrityError",
    "ExternalPayloadIntegrityMismatch",
    "ExternalPayloadNotFound",
    "ExternalPayloadOversized",
    "ExternalPayloadUnauthorized",
    "ExternalPayloadUnavailable",
    "ExternalPayloadUnsupported",
    "FailureReportTooLarge",
    "Forbidden",
    "InvalidArgument",
    "InvalidWorkflowDefinition",
    "LocalActivityExecutionAborted",
    "NamespaceNotFound",
    "NonDeterministicReplayError",
    "NotFound",
    "NonRetryableError",
    "FatalError",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "PayloadError",
    "QueryFailed",
    "QueryTaskAuthorityLost",
    "ResponseTooLarge",
    "ResultNotEncodable",
    "RuntimeCapabilityUnsupported",
    "RuntimeDiscoveryUnavailable",
    "SagaCompensationFailed",
    "ScheduleAlreadyExists",
    "ScheduleListError",
    "ScheduleNotFound",
    "ServerError",
    "ServerUnavailable",
    "SignalFailed",
    "StandaloneActivityFailed",
    "TransportError",
    "Unauthorized",
    "UnsupportedPayloadCodec",
    "UpdateFailed",
    "UpdateRejected",
    "UpdateValidationFailed",
    "WorkerShutdown",
    "WorkflowAlreadyStarted",
    "WorkflowCancelled",
    "WorkflowEntryArgumentsMismatchError",
    "WorkflowFailed",
    "WorkflowNotFound",
    "WorkflowPayloadDecodeError",
    "WorkflowTerminated",
    "WorkflowTimedOut",
]


class DurableWorkflowError(Exception):
    """Base class of every error sync_worker raises on purpose."""


# ---------------------------------------------------------------------------
# Payloads


class PayloadError(DurableWorkflowError, ValueError):
    """A value could not be turned into, or read back from, an Avro payload.

    ``reason`` is the contract's machine-readable code (``invalid_payload_framing``,
    ``unsupported_payload_schema``, ``unsupported_payload_codec``, ``integer_overflow``,
    ``non_finite_float``, ``invalid_map_key``, ``unsupported_value_type``); ``path`` is a
    JSONPath-like location inside the value (``$.items[3].when``) where one applies.
    """

    def __init__(self, message: str, *, reason: str, path: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path


class PayloadEncodeError(PayloadError):
    """A Python value has no representation in the Avro Value schema."""


class ResultNotEncodable(PayloadEncodeError):
    """An activity (or task) returned a value the Avro codec cannot carry.

    Reported to the server at once as a non-retryable failure (a retry would return the same
    value). ``path`` names where in the result the value sits, written from the result's root
    (``result["total"]``, ``result["items"][3]``); ``value_type`` is its Python type name
    (``Decimal``, ``datetime``, ``Order``).
    """

    def __init__(self, message: str, *, path: str, value_type: str, reason: str = "unsupported_value_type") -> None:
        super().__init__(message, reason=reason, path=path)
        self.value_type = value_type


class PayloadDecodeError(PayloadError):
    """A blob is not a valid single-object Avro Value datum."""


class UnsupportedPayloadCodec(PayloadDecodeError):
    """The envelope names a codec other than ``avro`` (or none at all)."""

    def __init__(self, codec: object) -> None:
        super().__init__(
            f"unsupported_payload_codec: {codec!r}; only the 'avro' codec is accepted",
            reason="unsupported_payload_codec",
        )
        self.codec = codec


# ---------------------------------------------------------------------------
# Transport and server refusals


class TransportError(DurableWorkflowError):
    """The request never produced an HTTP response (connect/read failure or timeout).

    The message never repeats the underlying library's text, which can contain URLs
    or credentials; the original exception is chained as ``__cause__``.
    """

    def __init__(
        self, message: str, *, route: Optional[str] = None, timeout: bool = False, connect: bool = False
    ) -> None:
        super().__init__(message)
        self.route = route
        #: The attempt timed out (connect or read).
        self.timeout = timeout
        #: The request provably never reached the server (connection refused / connect timeout).
        self.connect = connect
        #: The attempt was cut at its absolute deadline (bytes kept arriving, or none did).
        self.deadline_exceeded = False
        #: The server URL the request went to (credentials, query and fragment removed), when known.
        self.url: Optional[str] = None


class ResponseTooLarge(TransportError):
    """A response body exceeded the client's ``max_body_bytes`` bound; it was not read whole.

    The connection is closed (never reused) and the request counts as failed; a worker keeps
    running and retries on its usual schedule.
    """

    def __init__(self, message: str, *, route: Optional[str] = None, limit_bytes: int = 0,
                 declared_bytes: Optional[int] = None) -> None:
        super().__init__(message, route=route)
        self.limit_bytes = limit_bytes
        #: The ``Content-Length`` the server declared, when it declared one.
        self.declared_bytes = declared_bytes


class ServerError(DurableWorkflowError):
    """The server answered with an error status (or an invalid body).

    ``status`` is the HTTP status, ``body`` the parsed JSON body (or the raw text),
    ``retry_after_seconds`` the server's advertised delay when present in the body.
    """

    def __init__(self, status: int, body: object, *, route: Optional[str] = None) -> None:
        self.status = status
        self.body = body
        self.route = route
        super().__init__(self._describe())

    def _describe(self) -> str:
        reason = self.reason()
        text = f"server returned {self.status}"
        if reason:
            text += f" reason={reason!r}"
        message = self.body.get("message") if isinstance(self.body, dict) else None
        if isinstance(message, str) and message:
            text += f": {message[:200]}"
        return text

    def reason(self) -> Optional[str]:
        """The body's machine-readable ``reason``, if any."""
        if isinstance(self.body, dict):
            value = self.body.get("reason")
            return value if isinstance(value, str) else None
        return None

    @property
    def retry_after_seconds(self) -> Optional[float]:
        """The server's advertised retry delay (body field), if it gave a positive one."""
        if isinstance(self.body, dict):
            value = self.body.get("retry_after_seconds")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
        return None

    @property
    def retryable(self) -> bool:
        """Whether repeating the same request later may succeed."""
        if isinstance(self.body, dict) and isinstance(self.body.get("retryable"), bool):
            return bool(self.body["retryable"])
        return self.status >= 500 or self.status == 429


class Unauthorized(ServerError):
    """HTTP 401: the credentials were missing or rejected."""


class Forbidden(ServerError):
    """HTTP 403: the credentials are valid but lack the permission."""


class InvalidArgument(ServerError):
    """HTTP 422 (or 400): the server refused the request's content."""

    @property
    def errors(self) -> Optional[Dict[str, Any]]:
        if isinstance(self.body, dict):
            value = self.body.get("validation_errors") or self.body.get("errors")
            if isinstance(value, dict):
                return value
        return None


class Conflict(ServerError):
    """HTTP 409 not covered by a more specific class (lease/fencing refusals and the like)."""


class BackpressureError(ServerError):
    """HTTP 429 or 503: the server is busy; ``retry_after_seconds`` says when to come back."""


class ServerUnavailable(BackpressureError):
    """HTTP 502/503/504 without a more specific meaning."""


class NotFound(ServerError):
    """HTTP 404 for something other than a workflow or namespace (task, worker, activity)."""


class WorkflowNotFound(NotFound):
    """HTTP 404 for a workflow (or run) that does not exist."""

    @property
    def workflow_id(self) -> Optional[str]:
        return self.body.get("workflow_id") if isinstance(self.body, dict) else None


class NamespaceNotFound(NotFound):
    """HTTP 404 ``namespace_not_found``."""


class ScheduleNotFound(NotFound):
    """HTTP 404 ``schedule_not_found`` (the published SDK's name for it)."""

    @property
    def schedule_id(self) -> Optional[str]:
        value = self.body.get("schedule_id") if isinstance(self.body, dict) else None
        return value if isinstance(value, str) else None


class ScheduleAlreadyExists(Conflict):
    """HTTP 409 ``schedule_already_exists``: a create collided with an existing schedule id
    (the published SDK's name for it)."""

    @property
    def schedule_id(self) -> Optional[str]:
        value = self.body.get("schedule_id") if isinstance(self.body, dict) else None
        return value if isinstance(value, str) else None


class ScheduleListError(ServerError):
    """A schedule list filter or continuation cursor was refused (400/403/409/422 on
    ``schedule.list``, as the published SDK raises it). :attr:`field`, :attr:`errors` and
    :attr:`last_safe_cursor` read the server's body; the whole body stays on :attr:`body`."""

    @property
    def field(self) -> Optional[str]:
        value = self.body.get("field") if isinstance(self.body, dict) else None
        return value if isinstance(value, str) else None

    @property
    def errors(self) -> Optional[Dict[str, Any]]:
        if not isinstance(self.body, dict):
            return None
        value = self.body.get("validation_errors") or self.body.get("errors")
        return value if isinstance(value, dict) else None

    @property
    def last_safe_cursor(self) -> Optional[Dict[str, Any]]:
        value = self.body.get("last_safe_cursor") if isinstance(self.body, dict) else None
        return value if isinstance(value, dict) else None


class WorkflowAlreadyStarted(ServerError):
    """HTTP 409 ``duplicate_not_allowed`` / ``instance_already_started``."""


class SignalFailed(ServerError):
    """A signal was refused (unknown signal, closed run, bad arguments, request_id conflict)."""

    @property
    def request_id(self) -> Optional[str]:
        return self.body.get("request_id") if isinstance(self.body, dict) else None


class QueryFailed(ServerError):
    """A query was refused, rejected by the workflow, or timed out waiting for a worker."""


class UpdateFailed(InvalidArgument):
    """A workflow update failed or was refused."""


def _message_as_str(error: ServerError, message: Optional[str]) -> None:
    """``str(error)`` is the server's (or the validator's) message, as the published SDK's is;
    ``status``, ``reason()`` and ``body`` keep the rest."""
    if message is None and isinstance(error.body, dict) and isinstance(error.body.get("message"), str):
        message = error.body["message"]
    if message:
        error.args = (message,)


class UpdateRejected(ServerError):
    """A workflow update was rejected by its validator (nothing of it was accepted).

    Raised by the client from the server's 409 ``update_rejected`` / 409 or 422
    ``update_validator_rejected``. A validator may raise it too, with the published SDK's
    signature (``UpdateRejected("message", exception_type=..., validation_errors={...})``).
    ``validation_errors`` (field -> messages) and ``exception_type`` (the validator's exception
    class name) come from the server's answer.
    """

    def __init__(self, status: Any, body: object = None, *, route: Optional[str] = None,
                 exception_type: Optional[str] = None, validation_errors: Optional[Dict[str, Any]] = None) -> None:
        message: Optional[str] = None
        if isinstance(status, str):  # the SDK's form: raised by a validator
            message = status
            body = {"reason": "update_validator_rejected", "message": message,
                    **({"failure_type": exception_type} if exception_type else {}),
                    **({"validation_errors": validation_errors} if validation_errors else {})}
            status = 422
        super().__init__(int(status), body, route=route)
        _message_as_str(self, message)
        self._exception_type = exception_type
        self._validation_errors = validation_errors

    @property
    def validation_errors(self) -> Optional[Dict[str, Any]]:
        if self._validation_errors is not None:
            return self._validation_errors
        found = self.body.get("validation_errors") if isinstance(self.body, dict) else None
        return found if isinstance(found, dict) and found else None

    @property
    def exception_type(self) -> Optional[str]:
        if self._exception_type is not None:
            return self._exception_type
        found = self.body.get("failure_type") if isinstance(self.body, dict) else None
        return found if isinstance(found, str) and found else None


class UpdateValidationFailed(ServerError):
    """The server could not have the update's validator decide (no capable worker, a timeout, the
    validator's worker failed): the update was not accepted. ``retryable`` says whether the same
    request may succeed later (the SDK's attribute)."""

    def __init__(self, status: int, body: object, *, route: Optional[str] = None) -> None:
        super().__init__(status, body, route=route)
        _message_as_str(self, None)

    @property
    def retryable(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("retryable") is True


# ---------------------------------------------------------------------------
# Discovery / negotiation


class RuntimeDiscoveryUnavailable(DurableWorkflowError):
    """The server's cluster info could not be read or is not usable."""

    def __init__(self, operation: str, detail: str) -> None:
        super().__init__(f"{operation}: runtime discovery unavailable: {detail}")
        self.operation = operation
        self.detail = detail


class RuntimeCapabilityUnsupported(DurableWorkflowError):
    """The server does not advertise a capability the operation needs."""

    def __init__(self, capability: str, detail: str = "") -> None:
        super().__init__(f"{capability}: the server does not advertise this capability. {detail}".strip())
        self.capability = capability


# ---------------------------------------------------------------------------
# Worker-side outcomes


class FailureReportTooLarge(DurableWorkflowError, ValueError):
    """A failure report's identity cannot fit the request budget even without optional text."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(
            f"failure report identity or semantics cannot fit the {limit_bytes}-byte encoded request budget"
        )
        self.limit_bytes = limit_bytes


class ActivityLeaseAuthorityLost(DurableWorkflowError):
    """The server refused continuation of this activity attempt; nothing will be reported for it."""

    def __init__(self, task_id: str, reason: str) -> None:
        super().__init__(f"activity task {task_id} lost its lease authority: {reason}")
        self.task_id = task_id
        self.reason = reason


class QueryTaskAuthorityLost(DurableWorkflowError):
    """A delivered query task failed its claim checks."""

    def __init__(self, query_task_id: str, reason: str) -> None:
        super().__init__(f"query task {query_task_id} lost its authority: {reason}")
        self.query_task_id = query_task_id
        self.reason = reason


class LocalActivityExecutionAborted(DurableWorkflowError):
    """The workflow task cannot go on: its lease could not be trusted while a local activity ran, or
    the workflow asked for something the worker refuses to run (the published SDK's name and
    messages: a local activity in a parallel group or with a cancellation policy,
    ``ctx.cancellation_scope``). Nothing of the task is recorded; the run stays open."""


class DurableOperationCancelled(DurableWorkflowError):
    """A durable selection member was explicitly cancelled (``yield handle`` after ``handle.cancel()``)."""

    def __init__(self, selection_group_id: str, member_key: Any, member_index: int, operation_kind: str,
                 operation_identity: str) -> None:
        super().__init__(f"Selected {operation_kind} operation {operation_identity} was explicitly cancelled.")
        self.selection_group_id = selection_group_id
        self.member_key = member_key
        self.member_index = member_index
        self.operation_kind = operation_kind
        self.operation_identity = operation_identity


class WorkerShutdown(DurableWorkflowError):
    """A blocking wait was interrupted because the worker is shutting down."""


class InvalidWorkflowDefinition(DurableWorkflowError, ValueError):
    """A workflow or activity definition cannot be registered."""


class DuplicateRegistrationError(DurableWorkflowError, ValueError):
    """Two registrations claim the same wire name.

    ``registration_kind`` / ``wire_name`` are the SDK's attribute names for ``kind`` / ``name``;
    when both definitions are given the message names them.
    """

    def __init__(self, kind: str, name: str, existing: Any = None, duplicate: Any = None) -> None:
        text = f"duplicate {kind} registration for {name!r}"
        if existing is not None and duplicate is not None:
            text += f": {_definition_name(existing)} and {_definition_name(duplicate)}"
        super().__init__(text)
        self.kind = self.registration_kind = kind
        self.name = self.wire_name = name


def _definition_name(definition: Any) -> str:
    return f"{getattr(definition, '__module__', '?')}.{getattr(definition, '__qualname__', repr(definition))}"


class NonRetryableError(DurableWorkflowError):
    """Raise from an activity to fail it without further retries."""

    def __init__(self, message: str, *, cause: Optional[BaseException] = None, code: Optional[int] = None):
        super().__init__(message)
        self.cause = cause
        if code is not None:
            self.code = code
        if cause is not None:
            self.__cause__ = cause


#: The name the nestjs-durable worker family uses for the same idea.
FatalError = NonRetryableError


class ActivityCancelled(BaseException):
    """The server asked this activity to stop (its run was cancelled or the task revoked).

    A ``BaseException`` so that ``except Exception`` inside the activity cannot swallow it.
    """

    def __init__(self, message: str = "activity was cancelled") -> None:
        super().__init__(message)


class WorkflowCancelled(BaseException):
    """A workflow was cancelled. A ``BaseException``, like ``ActivityCancelled``."""

    def __init__(self, message: str = "workflow was cancelled", *, request_id: Optional[str] = None,
                 context: Any = None):
        super().__init__(message)
        self.request_id = request_id
        #: the cooperative cancellation metadata (``ctx.cancellation_context``); None without 1.20
        self.context = context


# Workflow and activity outcomes and replay errors live in their own module (same hierarchy).
from .external_payloads import (  # noqa: E402
    ExternalPayloadError,
    ExternalPayloadExpired,
    ExternalPayloadIntegrityError,
    ExternalPayloadIntegrityMismatch,
    ExternalPayloadNotFound,
    ExternalPayloadOversized,
    ExternalPayloadUnauthorized,
    ExternalPayloadUnavailable,
    ExternalPayloadUnsupported,
)
from .outcomes import (  # noqa: E402
    ActivityFailed,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    CodePosition,
    NonDeterministicReplayError,
    SagaCompensationFailed,
    StandaloneActivityFailed,
    WorkflowEntryArgumentsMismatchError,
    WorkflowFailed,
    WorkflowPayloadDecodeError,
    WorkflowTerminated,
    WorkflowTimedOut,
)
