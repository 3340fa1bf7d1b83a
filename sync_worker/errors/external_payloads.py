"""Errors of external payload storage (payloads kept outside workflow history, issue 24).

Part of the one hierarchy of :mod:`sync_worker.errors`. The names, ``reason`` codes and the
``retryable`` default follow the published SDK 2.12 (``durable_workflow.errors``), so
``except ExternalPayloadNotFound`` survives the import swap. Every fetch of a reference raises
one of these, never a bare ``FileNotFoundError`` or a boto3 ``ClientError``.
"""

from __future__ import annotations

from typing import Optional

from . import PayloadError

__all__ = [
    "ExternalPayloadError",
    "ExternalPayloadExpired",
    "ExternalPayloadIntegrityError",
    "ExternalPayloadIntegrityMismatch",
    "ExternalPayloadNotFound",
    "ExternalPayloadOversized",
    "ExternalPayloadUnauthorized",
    "ExternalPayloadUnavailable",
    "ExternalPayloadUnsupported",
]


class ExternalPayloadError(PayloadError):
    """A payload reference could not be stored, fetched or trusted.

    A :class:`PayloadError` (so a ``ValueError``): wherever an undecodable payload fails an
    activity attempt or a workflow task, an unreadable reference does the same, with its reason.

    ``reason`` is the machine-readable code; ``retryable`` says whether trying again can help
    (only :class:`ExternalPayloadUnavailable` is, by default); ``uri`` names the object when one
    is known; ``status`` and ``body`` carry an HTTP answer when the failure came from one.
    """

    reason: str = "external_payload_error"
    default_retryable = False

    def copy(self) -> ExternalPayloadError:
        """The same error afresh (raised again where a deferred payload is decoded)."""
        twin = type(self)(str(self), uri=self.uri, status=self.status, retryable=self.retryable,
                          reference_id=self.reference_id, body=self.body)
        twin.__cause__ = self.__cause__
        return twin

    def __init__(
        self,
        message: str,
        *,
        uri: Optional[str] = None,
        status: Optional[int] = None,
        retryable: Optional[bool] = None,
        reference_id: Optional[str] = None,
        body: object = None,
    ) -> None:
        super().__init__(message, reason=self.reason)
        self.uri = uri
        self.status = status
        self.retryable = self.default_retryable if retryable is None else bool(retryable)
        self.reference_id = reference_id
        self.body = body


class ExternalPayloadNotFound(ExternalPayloadError):
    """The referenced object is not in the store (deleted, never written, another bucket)."""

    reason = "external_payload_not_found"


class ExternalPayloadExpired(ExternalPayloadError):
    """The reference carries an ``expires_at`` that has passed: its bytes are not to be used."""

    reason = "external_payload_expired"


class ExternalPayloadUnauthorized(ExternalPayloadError):
    """The store refused the credentials (S3 ``AccessDenied``, a file the process may not read)."""

    reason = "external_payload_unauthorized"


class ExternalPayloadUnavailable(ExternalPayloadError):
    """The store could not be reached or failed; a retry may succeed."""

    reason = "external_payload_unavailable"
    default_retryable = True


class ExternalPayloadOversized(ExternalPayloadError):
    """A fetched object is larger than the caller allows (``max_bytes`` of the fetch)."""

    reason = "external_payload_oversized"


class ExternalPayloadUnsupported(ExternalPayloadError):
    """The reference is malformed, has another schema or codec, or no driver is configured."""

    reason = "external_payload_unsupported"


class ExternalPayloadIntegrityMismatch(ExternalPayloadError):
    """The fetched bytes do not match the reference's ``size_bytes`` or ``sha256`` (tampered)."""

    reason = "external_payload_integrity_mismatch"


class ExternalPayloadIntegrityError(ExternalPayloadIntegrityMismatch):
    """The SDK's name for an integrity mismatch found while verifying fetched bytes."""


for _cls in (ExternalPayloadError, ExternalPayloadNotFound, ExternalPayloadExpired, ExternalPayloadUnauthorized,
             ExternalPayloadUnavailable, ExternalPayloadOversized, ExternalPayloadUnsupported,
             ExternalPayloadIntegrityMismatch, ExternalPayloadIntegrityError):
    _cls.__module__ = "sync_worker.errors"
