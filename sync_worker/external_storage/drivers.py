"""Storage drivers: where externally stored payload bytes live.

A driver has three methods (the SDK's ``ExternalStorageDriver`` protocol): ``put(data, *,
sha256, codec) -> uri``, ``get(uri) -> bytes``, ``delete(uri)``. Objects are content-addressed
under ``<prefix>/<codec>/<sha256[:2]>/<sha256>``, the layout of the published SDK 2.12, so an SDK
process and a sync_worker process configured with the same directory or bucket write the same
objects. Missing objects raise :class:`ExternalPayloadNotFound`; refused credentials
:class:`ExternalPayloadUnauthorized`; anything else from the store
:class:`ExternalPayloadUnavailable` (retryable).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union
from urllib.parse import quote, unquote, urlsplit

from ..errors.external_payloads import (
    ExternalPayloadNotFound,
    ExternalPayloadUnauthorized,
    ExternalPayloadUnavailable,
    ExternalPayloadUnsupported,
)

try:  # Python 3.8+: typing.Protocol
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore[assignment]

__all__ = ["ExternalStorageDriver", "LocalFilesystemExternalStorage", "S3ExternalStorage"]


class ExternalStorageDriver(Protocol):
    """What a payload store provides (structural: any object with these methods will do)."""

    def put(self, data: bytes, *, sha256: str, codec: str) -> str:
        """Keep ``data`` and return a URI that ``get`` accepts."""

    def get(self, uri: str) -> bytes:
        """The bytes ``put`` kept under ``uri``."""

    def delete(self, uri: str) -> None:
        """Remove the object (a missing one is not an error)."""


def _object_key(prefix: str, sha256: str, codec: str) -> str:
    if len(sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha256):
        raise ExternalPayloadUnsupported("external_payload_unsupported: sha256 must be a 64-character hex digest")
    if not codec or not all(c.isalnum() or c in "-_." for c in codec) or codec in (".", ".."):
        raise ExternalPayloadUnsupported(f"external_payload_unsupported: codec {codec!r} is not a safe path segment")
    key = f"{codec}/{sha256[:2]}/{sha256}"
    return f"{prefix}/{key}" if prefix else key


def _intact(path: Path, size: int, sha256: str) -> bool:
    """Whether ``path`` already holds exactly these bytes (a damaged copy is written again)."""
    try:
        if path.stat().st_size != size:
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256.lower()
    except OSError:
        return False


def _clean_prefix(prefix: str) -> str:
    parts = [p for p in prefix.strip("/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"external storage prefix {prefix!r} has a '.' or '..' segment")
    return "/".join(quote(p, safe="-_.~") for p in parts)


class LocalFilesystemExternalStorage:
    """Objects as files under one directory; URIs are ``file://`` paths inside it.

    For development, tests and hosts that share a volume (NFS, a Kubernetes PVC). Writes are
    atomic (a temporary file renamed into place), so a reader never sees half an object.
    ``get`` refuses a URI outside the root, so a forged reference cannot read arbitrary files.
    """

    def __init__(self, root: Union[str, os.PathLike[str]]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes, *, sha256: str, codec: str) -> str:
        path = self.root / _object_key("", sha256, codec)
        if _intact(path, len(data), sha256):
            return path.as_uri()  # content-addressed: the same bytes are already there
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path.as_uri()

    def get(self, uri: str) -> bytes:
        path = self._path(uri)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise ExternalPayloadNotFound(f"external_payload_not_found: {uri}", uri=uri) from None
        except PermissionError as exc:
            raise ExternalPayloadUnauthorized(f"external_payload_unauthorized: {uri}: {exc}", uri=uri) from None
        except OSError as exc:
            raise ExternalPayloadUnavailable(f"external_payload_unavailable: {uri}: {exc}", uri=uri) from None

    def delete(self, uri: str) -> None:
        try:
            self._path(uri).unlink()
        except FileNotFoundError:
            pass

    def _path(self, uri: str) -> Path:
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise ExternalPayloadUnsupported(
                f"external_payload_unsupported: {uri!r} is not a local file:// URI", uri=uri)
        path = Path(unquote(parts.path)).resolve()
        if path != self.root and self.root not in path.parents:
            raise ExternalPayloadUnsupported(
                f"external_payload_unsupported: {uri!r} is outside the storage root {self.root}", uri=uri)
        return path


class S3ExternalStorage:
    """Objects in an S3 (or S3-compatible) bucket; URIs are ``s3://bucket/key``.

    ``client`` is a boto3 S3 client (anything with ``put_object``/``get_object``/``delete_object``),
    as the SDK takes it; without one, ``boto3.client("s3", **client_kwargs)`` is built (the
    ``s3`` extra: ``pip install "sync-worker[s3]"``). Error codes map to the typed errors:
    ``NoSuchKey``/404 not found, ``AccessDenied``/403 unauthorized, the rest unavailable.
    """

    def __init__(self, client: Any = None, *, bucket: str, prefix: str = "", **client_kwargs: Any) -> None:
        if not bucket:
            raise ValueError("s3 external storage needs a bucket")
        if client is None:
            try:
                import boto3  # type: ignore[import-untyped,unused-ignore]
            except ImportError:  # pragma: no cover - depends on the environment
                raise ImportError('S3ExternalStorage needs boto3: pip install "sync-worker[s3]"') from None
            client = boto3.client("s3", **client_kwargs)
        self.client = client
        self.bucket = bucket
        self.prefix = _clean_prefix(prefix)

    def put(self, data: bytes, *, sha256: str, codec: str) -> str:
        key = _object_key(self.prefix, sha256, codec)
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType="application/octet-stream",
                                   Metadata={"sha256": sha256, "codec": codec})
        except Exception as exc:
            raise _s3_error(exc, f"s3://{self.bucket}/{key}") from exc
        return f"s3://{self.bucket}/{key}"

    def get(self, uri: str) -> bytes:
        key = self._key(uri)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            data = body.read() if hasattr(body, "read") else body
        except Exception as exc:
            raise _s3_error(exc, uri) from exc
        if not isinstance(data, (bytes, bytearray)):
            raise ExternalPayloadUnavailable(f"external_payload_unavailable: {uri}: the S3 client returned "
                                             f"{type(data).__name__}", uri=uri)
        return bytes(data)

    def delete(self, uri: str) -> None:
        key = self._key(uri)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            error = _s3_error(exc, uri)
            if not isinstance(error, ExternalPayloadNotFound):
                raise error from exc

    def _key(self, uri: str) -> str:
        parts = urlsplit(uri)
        key = parts.path.lstrip("/")
        if parts.scheme != "s3" or parts.netloc != self.bucket or not key:
            raise ExternalPayloadUnsupported(
                f"external_payload_unsupported: {uri!r} is not an object of s3://{self.bucket}", uri=uri)
        if any(p in ("", ".", "..") for p in key.split("/")):
            raise ExternalPayloadUnsupported(f"external_payload_unsupported: {uri!r} has an unsafe key", uri=uri)
        if self.prefix and not key.startswith(self.prefix + "/"):
            raise ExternalPayloadUnsupported(
                f"external_payload_unsupported: {uri!r} is outside the prefix {self.prefix!r}", uri=uri)
        return key


def _s3_error(exc: BaseException, uri: str) -> Exception:
    response: Optional[Any] = getattr(exc, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    code = str(error.get("Code", "")) if isinstance(error, dict) else ""
    if code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket"):
        return ExternalPayloadNotFound(f"external_payload_not_found: {uri} ({code})", uri=uri)
    if code in ("AccessDenied", "403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return ExternalPayloadUnauthorized(f"external_payload_unauthorized: {uri} ({code})", uri=uri)
    return ExternalPayloadUnavailable(f"external_payload_unavailable: {uri}: {exc}", uri=uri)
