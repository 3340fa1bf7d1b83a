"""External payload storage: payloads above a size threshold travel as references (issue 24).

A payload whose encoded blob is larger than the threshold is written to a store (a local
directory, an S3 bucket) and the wire carries ``{"codec": "avro", "external_storage":
{"schema", "uri", "sha256", "size_bytes", "codec"}}`` with no ``blob``. Whoever reads it fetches
the bytes, checks size and sha256, and decodes them as the blob they were. This is the
published SDK 2.12's contract (``durable_workflow/external_storage.py``: the reference schema,
the stored bytes being the base64 blob text, the ``codec/sha256[:2]/sha256`` object key) and
the server's (``src/V2/Support/PayloadEnvelopeResolver.php`` and ``ExternalPayloads.php`` of
durable-workflow/workflow accept ``{codec, external_storage}`` wherever ``{codec, blob}`` goes),
so the SDK and sync_worker read each other's references.

Pure code plus the drivers' own I/O; no runtime imports. The request/response transform the
Client applies is :mod:`sync_worker.external_storage.wire`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Optional, Tuple

from ..errors.external_payloads import (
    ExternalPayloadError,
    ExternalPayloadExpired,
    ExternalPayloadIntegrityError,
    ExternalPayloadNotFound,
    ExternalPayloadOversized,
    ExternalPayloadUnauthorized,
    ExternalPayloadUnavailable,
    ExternalPayloadUnsupported,
)
from .cloud import AzureBlobExternalStorage, GCSExternalStorage
from .drivers import ExternalStorageDriver, LocalFilesystemExternalStorage, S3ExternalStorage
from .policy import ExternalPayloadStoragePolicy, external_storage_driver_from_policy
from .runtime_reference import RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA, RuntimeExternalPayloadReference

__all__ = [
    "EXTERNAL_PAYLOAD_REFERENCE_SCHEMA",
    "RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA",
    "RuntimeExternalPayloadReference",
    "AzureBlobExternalStorage",
    "GCSExternalStorage",
    "ExternalPayloadCache",
    "ExternalPayloadReference",
    "ExternalPayloadStoragePolicy",
    "ExternalStorageDriver",
    "LocalFilesystemExternalStorage",
    "S3ExternalStorage",
    "delete_external_payload",
    "external_storage_driver_from_policy",
    "external_storage_envelope",
    "fetch_external_payload",
    "is_reference_envelope",
    "reference_envelope",
    "resolve_envelope",
    "store_external_payload",
]

EXTERNAL_PAYLOAD_REFERENCE_SCHEMA = "durable-workflow.v2.external-payload-reference.v1"
_CODEC = "avro"
_HEX = frozenset("0123456789abcdef")


def _unsupported(message: str, uri: Optional[str] = None) -> ExternalPayloadUnsupported:
    return ExternalPayloadUnsupported(f"external_payload_unsupported: {message}", uri=uri)


def _parse_rfc3339(value: str) -> datetime:
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _unsupported(f"expires_at {value!r} is not an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise _unsupported(f"expires_at {value!r} has no timezone")
    return parsed


def _check_sha256(sha256: object) -> str:
    if not isinstance(sha256, str) or len(sha256) != 64 or not set(sha256.lower()) <= _HEX:
        raise _unsupported("sha256 must be a 64-character hex digest")
    return sha256


@dataclass(frozen=True)
class ExternalPayloadReference:
    """Where a payload's bytes are, and what they must hash to (the wire's ``external_storage``)."""

    uri: str
    sha256: str
    size_bytes: int
    codec: str = _CODEC
    expires_at: Optional[str] = None
    schema: str = EXTERNAL_PAYLOAD_REFERENCE_SCHEMA

    def __post_init__(self) -> None:
        if self.schema != EXTERNAL_PAYLOAD_REFERENCE_SCHEMA:
            raise _unsupported(f"reference schema {self.schema!r} is not {EXTERNAL_PAYLOAD_REFERENCE_SCHEMA!r}")
        if self.codec != _CODEC:
            raise _unsupported(f"reference codec {self.codec!r}: only 'avro' payloads are stored", self.uri)
        if not isinstance(self.uri, str) or not self.uri:
            raise _unsupported("reference uri must be a non-empty string")
        _check_sha256(self.sha256)
        if type(self.size_bytes) is not int or self.size_bytes < 0:
            raise _unsupported("reference size_bytes must be a non-negative integer", self.uri)
        if self.expires_at is not None:
            if not isinstance(self.expires_at, str):
                raise _unsupported("reference expires_at must be an RFC 3339 string", self.uri)
            _parse_rfc3339(self.expires_at)

    def to_dict(self) -> Dict[str, Any]:
        """The wire form (``expires_at`` only when set), as the SDK writes it."""
        out: Dict[str, Any] = {"schema": self.schema, "uri": self.uri, "sha256": self.sha256,
                               "size_bytes": self.size_bytes, "codec": self.codec}
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at
        return out

    @classmethod
    def from_dict(cls, data: object) -> ExternalPayloadReference:
        """Parse the wire form; anything malformed is :class:`ExternalPayloadUnsupported` (a ValueError)."""
        if not isinstance(data, dict):
            raise _unsupported("the external payload reference must be an object")
        size = data.get("size_bytes")
        return cls(uri=data.get("uri"), sha256=data.get("sha256"),  # type: ignore[arg-type]
                   size_bytes=size if type(size) is int else -1,
                   codec=data.get("codec"), expires_at=data.get("expires_at"),  # type: ignore[arg-type]
                   schema=data.get("schema"))  # type: ignore[arg-type]

    def expired(self, now: Optional[datetime] = None) -> bool:
        """Whether ``expires_at`` has passed (a reference without one never expires)."""
        if self.expires_at is None:
            return False
        return _parse_rfc3339(self.expires_at) <= (now or datetime.now(timezone.utc))


_Key = Tuple[str, str, int, str]


class ExternalPayloadCache:
    """A bounded LRU of verified payload bytes, so replay does not fetch the same object again.

    Bounded by entries and by bytes (an object larger than ``max_bytes`` is not cached).
    Only :func:`fetch_external_payload` inserts, after the size and sha256 check, so a hit is
    as trustworthy as a fresh fetch. Thread-safe: one cache serves every slot of a worker.
    """

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 16 * 1024 * 1024) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("external payload cache max_entries and max_bytes must be at least 1")
        self.max_entries = int(max_entries)
        self.max_bytes = int(max_bytes)
        self.current_bytes = 0
        self._entries: OrderedDict[_Key, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(reference: ExternalPayloadReference) -> _Key:
        return (reference.uri, reference.sha256.lower(), reference.size_bytes, reference.codec)

    def get(self, reference: ExternalPayloadReference) -> Optional[bytes]:
        key = self._key(reference)
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
            return data

    def put(self, reference: ExternalPayloadReference, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        key = self._key(reference)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.current_bytes -= len(old)
            self._entries[key] = data
            self.current_bytes += len(data)
            while len(self._entries) > self.max_entries or self.current_bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.current_bytes -= len(evicted)

    def discard(self, reference: ExternalPayloadReference) -> None:
        with self._lock:
            data = self._entries.pop(self._key(reference), None)
            if data is not None:
                self.current_bytes -= len(data)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.current_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def store_external_payload(
    driver: ExternalStorageDriver, data: bytes, *, codec: str = _CODEC, expires_at: Optional[str] = None,
) -> ExternalPayloadReference:
    """Write ``data`` (a payload's blob text, UTF-8) through ``driver``; return its reference."""
    if codec != _CODEC:
        raise _unsupported(f"codec {codec!r}: only 'avro' payloads are stored")
    if expires_at is not None:
        _parse_rfc3339(expires_at)
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        uri = driver.put(bytes(data), sha256=sha256, codec=codec)
    except ExternalPayloadError:
        raise
    except PermissionError as exc:
        raise ExternalPayloadUnauthorized(f"external_payload_unauthorized: upload refused: {exc}") from exc
    except Exception as exc:
        raise ExternalPayloadUnavailable(f"external_payload_unavailable: upload failed: {exc}") from exc
    return ExternalPayloadReference(uri=uri, sha256=sha256, size_bytes=len(data), codec=codec,
                                    expires_at=expires_at)


def fetch_external_payload(
    driver: ExternalStorageDriver,
    reference: ExternalPayloadReference,
    *,
    cache: Optional[ExternalPayloadCache] = None,
    max_bytes: Optional[int] = None,
    now: Optional[datetime] = None,
) -> bytes:
    """The referenced bytes, verified: typed errors for expired, missing, oversized and tampered."""
    uri = reference.uri
    if reference.expired(now):
        raise ExternalPayloadExpired(f"external_payload_expired: {uri} expired at {reference.expires_at}", uri=uri)
    if max_bytes is not None and reference.size_bytes > max_bytes:
        raise ExternalPayloadOversized(
            f"external_payload_oversized: {uri} is {reference.size_bytes} bytes, the limit is {max_bytes}", uri=uri)
    if cache is not None:
        hit = cache.get(reference)
        if hit is not None:
            return hit
    try:
        data = driver.get(uri)
    except ExternalPayloadError:
        raise
    except (FileNotFoundError, KeyError) as exc:
        raise ExternalPayloadNotFound(f"external_payload_not_found: {uri}", uri=uri) from exc
    except PermissionError as exc:
        raise ExternalPayloadUnauthorized(f"external_payload_unauthorized: {uri}: {exc}", uri=uri) from exc
    except Exception as exc:
        raise ExternalPayloadUnavailable(f"external_payload_unavailable: {uri}: {exc}", uri=uri) from exc
    if not isinstance(data, (bytes, bytearray)):
        raise ExternalPayloadUnavailable(f"external_payload_unavailable: the driver returned "
                                         f"{type(data).__name__} for {uri}, not bytes", uri=uri)
    data = bytes(data)
    if len(data) != reference.size_bytes:
        raise ExternalPayloadIntegrityError(
            f"external_payload_integrity_mismatch: {uri} is {len(data)} bytes, the reference says "
            f"{reference.size_bytes}", uri=uri)
    if hashlib.sha256(data).hexdigest() != reference.sha256.lower():
        raise ExternalPayloadIntegrityError(
            f"external_payload_integrity_mismatch: the sha256 of {uri} does not match its reference", uri=uri)
    if cache is not None:
        cache.put(reference, data)
    return data


def delete_external_payload(
    driver: ExternalStorageDriver, reference: ExternalPayloadReference, *,
    cache: Optional[ExternalPayloadCache] = None,
) -> None:
    """Delete the object (retention cleanup) and drop it from ``cache``; a missing object is fine."""
    driver.delete(reference.uri)
    if cache is not None:
        cache.discard(reference)


# -- envelopes ------------------------------------------------------------------------------


def is_reference_envelope(candidate: object) -> bool:
    """Whether ``candidate`` is shaped ``{codec, external_storage}`` (the server's test: exactly those keys)."""
    return isinstance(candidate, dict) and len(candidate) == 2 and "external_storage" in candidate \
        and "codec" in candidate


def reference_envelope(reference: ExternalPayloadReference) -> Dict[str, Any]:
    return {"codec": reference.codec, "external_storage": reference.to_dict()}


def parse_reference_envelope(envelope: Dict[str, Any]) -> ExternalPayloadReference:
    reference = ExternalPayloadReference.from_dict(envelope.get("external_storage"))
    codec = envelope.get("codec", reference.codec)
    if codec != reference.codec:
        raise _unsupported(f"envelope codec {codec!r} does not match the reference codec {reference.codec!r}",
                           reference.uri)
    return reference


def resolve_envelope(
    envelope: Dict[str, Any], driver: Optional[ExternalStorageDriver], *,
    cache: Optional[ExternalPayloadCache] = None,
) -> Dict[str, str]:
    """``{codec, external_storage}`` → the ``{codec, blob}`` it stands for (fetched and verified)."""
    reference = parse_reference_envelope(envelope)
    if driver is None:
        raise _unsupported("a payload is stored externally and no external_storage driver is configured "
                           "(Client(external_storage=...) / Worker(external_storage=...))", reference.uri)
    data = fetch_external_payload(driver, reference, cache=cache)
    try:
        blob = data.decode("ascii")
    except UnicodeDecodeError:
        raise ExternalPayloadIntegrityError(
            f"external_payload_integrity_mismatch: {reference.uri} is not a base64 payload blob",
            uri=reference.uri) from None
    return {"codec": reference.codec, "blob": blob}


def external_storage_envelope(
    value: Any, *, external_storage: ExternalStorageDriver, threshold_bytes: int,
    codec: str = _CODEC,
) -> Dict[str, Any]:
    """Encode ``value``; a blob over ``threshold_bytes`` is stored and its reference envelope returned."""
    from ..payloads import encode

    if threshold_bytes < 1:
        raise ValueError("external storage threshold must be at least 1 byte")
    if codec != _CODEC:
        raise _unsupported(f"codec {codec!r}: only 'avro' payloads are stored")
    blob = encode(value)
    if len(blob) <= threshold_bytes:
        return {"codec": codec, "blob": blob}
    return reference_envelope(store_external_payload(external_storage, blob.encode("ascii"), codec=codec))


