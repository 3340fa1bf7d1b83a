"""Google Cloud Storage and Azure Blob Storage drivers (the ``gcs`` and ``azure`` extras).

Like the SDK's, each takes an application-configured client (credentials and endpoints stay
yours): ``google.cloud.storage.Client`` for :class:`GCSExternalStorage`, an
``azure.storage.blob.ContainerClient`` for :class:`AzureBlobExternalStorage`. Objects use the
same ``<prefix>/<codec>/<sha256[:2]>/<sha256>`` key as the other drivers; URIs are
``gs://bucket/key`` and ``azure-blob://container/key`` (the SDK's schemes). HTTP statuses map to
the typed errors: 404 not found, 401/403 unauthorized, anything else unavailable.
"""

from __future__ import annotations

from typing import Any

from ..errors.external_payloads import (
    ExternalPayloadNotFound,
    ExternalPayloadUnauthorized,
    ExternalPayloadUnavailable,
    ExternalPayloadUnsupported,
)
from .drivers import _clean_prefix, _object_key

__all__ = ["AzureBlobExternalStorage", "GCSExternalStorage"]


def _status_error(exc: BaseException, uri: str) -> Exception:
    status = getattr(exc, "code", None)  # google.api_core.exceptions.GoogleAPICallError
    if not isinstance(status, int):
        status = getattr(exc, "status_code", None)  # azure.core.exceptions.HttpResponseError
    if status == 404:
        return ExternalPayloadNotFound(f"external_payload_not_found: {uri}", uri=uri, status=404)
    if status in (401, 403):
        return ExternalPayloadUnauthorized(f"external_payload_unauthorized: {uri} ({status})", uri=uri, status=status)
    return ExternalPayloadUnavailable(f"external_payload_unavailable: {uri}: {exc}", uri=uri,
                                      status=status if isinstance(status, int) else None)


def _key_of(uri: str, scheme: str, container: str, prefix: str) -> str:
    head = f"{scheme}://{container}/"
    key = uri[len(head):] if uri.startswith(head) else ""
    if not key or any(part in ("", ".", "..") for part in key.split("/")):
        raise ExternalPayloadUnsupported(
            f"external_payload_unsupported: {uri!r} is not an object of {head}", uri=uri)
    if prefix and not key.startswith(prefix + "/"):
        raise ExternalPayloadUnsupported(
            f"external_payload_unsupported: {uri!r} is outside the prefix {prefix!r}", uri=uri)
    return key


class GCSExternalStorage:
    """Objects in a Google Cloud Storage bucket (``client.bucket(name).blob(key)``)."""

    def __init__(self, client: Any, *, bucket: str, prefix: str = "") -> None:
        if not bucket:
            raise ValueError("gcs external storage needs a bucket")
        self.client = client
        self.bucket = bucket
        self.prefix = _clean_prefix(prefix)

    def _blob(self, key: str) -> Any:
        return self.client.bucket(self.bucket).blob(key)

    def put(self, data: bytes, *, sha256: str, codec: str) -> str:
        key = _object_key(self.prefix, sha256, codec)
        uri = f"gs://{self.bucket}/{key}"
        try:
            blob = self._blob(key)
            blob.metadata = {"sha256": sha256, "codec": codec}
            blob.upload_from_string(data, content_type="application/octet-stream")
        except Exception as exc:
            raise _status_error(exc, uri) from exc
        return uri

    def get(self, uri: str) -> bytes:
        key = _key_of(uri, "gs", self.bucket, self.prefix)
        try:
            data = self._blob(key).download_as_bytes()
        except Exception as exc:
            raise _status_error(exc, uri) from exc
        return bytes(data)

    def delete(self, uri: str) -> None:
        key = _key_of(uri, "gs", self.bucket, self.prefix)
        try:
            self._blob(key).delete()
        except Exception as exc:
            error = _status_error(exc, uri)
            if not isinstance(error, ExternalPayloadNotFound):
                raise error from exc


class AzureBlobExternalStorage:
    """Blobs in an Azure Storage container (a ``ContainerClient``)."""

    def __init__(self, container_client: Any, *, container: str, prefix: str = "") -> None:
        if not container:
            raise ValueError("azure external storage needs a container")
        self.container_client = container_client
        self.container = container
        self.prefix = _clean_prefix(prefix)

    def put(self, data: bytes, *, sha256: str, codec: str) -> str:
        key = _object_key(self.prefix, sha256, codec)
        uri = f"azure-blob://{self.container}/{key}"
        try:
            self.container_client.upload_blob(name=key, data=data, overwrite=True,
                                              metadata={"sha256": sha256, "codec": codec})
        except Exception as exc:
            raise _status_error(exc, uri) from exc
        return uri

    def get(self, uri: str) -> bytes:
        key = _key_of(uri, "azure-blob", self.container, self.prefix)
        try:
            data = self.container_client.download_blob(key).readall()
        except Exception as exc:
            raise _status_error(exc, uri) from exc
        return bytes(data)

    def delete(self, uri: str) -> None:
        key = _key_of(uri, "azure-blob", self.container, self.prefix)
        try:
            self.container_client.delete_blob(key)
        except Exception as exc:
            error = _status_error(exc, uri)
            if not isinstance(error, ExternalPayloadNotFound):
                raise error from exc
