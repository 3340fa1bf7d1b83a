"""A namespace's external payload storage policy, and the driver it describes.

The server keeps a policy per namespace (``external_payload_storage`` on the namespace
document: ``driver``, ``enabled``, ``threshold_bytes``, ``config`` with ``bucket`` /
``container`` / ``prefix`` / ``uri``, a provider ``reference``; server
``app/Support/NamespaceExternalPayloadStorage.php``). :class:`ExternalPayloadStoragePolicy`
reads it as the published SDK 2.12 does, and :func:`external_storage_driver_from_policy` turns
it into a driver. Credentials stay the application's: the cloud clients are passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple, Union
from urllib.parse import unquote, urlsplit

from .cloud import AzureBlobExternalStorage, GCSExternalStorage
from .drivers import ExternalStorageDriver, LocalFilesystemExternalStorage, S3ExternalStorage

__all__ = ["ExternalPayloadStoragePolicy", "external_storage_driver_from_policy"]


def _text(value: object, name: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"external payload storage policy {name} must be a string")
    return value


def _flag(value: object, name: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"external payload storage policy {name} must be a boolean")
    return value


@dataclass(frozen=True)
class ExternalPayloadStoragePolicy:
    """The policy as the server (or Cloud) describes it; ``from_dict`` validates."""

    enabled: bool
    driver: Optional[str] = None
    threshold_bytes: Optional[int] = None
    config: Mapping[str, Any] = field(default_factory=dict)
    reference: Optional[str] = None
    prefix: str = ""
    mode: Optional[str] = None
    status: Optional[str] = None
    integrity_required: bool = True

    @classmethod
    def from_dict(cls, data: object) -> ExternalPayloadStoragePolicy:
        """Read a policy, or a namespace document holding one under ``external_payload_storage``."""
        if not isinstance(data, Mapping):
            raise ValueError("external payload storage policy must be an object")
        nested = data.get("external_payload_storage")
        if nested is not None:
            if not isinstance(nested, Mapping):
                raise ValueError("external_payload_storage must be an object")
            data = nested
        driver = _text(data.get("driver"), "driver")
        threshold = data.get("threshold_bytes")
        if threshold is not None and (type(threshold) is not int or threshold < 1):
            raise ValueError("external payload storage policy threshold_bytes must be a positive integer")
        config = data.get("config")
        config = {} if config is None else config
        if not isinstance(config, Mapping):
            raise ValueError("external payload storage policy config must be an object")
        prefix = _text(data.get("prefix"), "prefix") or _text(config.get("prefix"), "config.prefix") or ""
        return cls(enabled=_flag(data.get("enabled"), "enabled", driver is not None), driver=driver,
                   threshold_bytes=threshold, config=dict(config), reference=_text(data.get("reference"), "reference"),
                   prefix=prefix, mode=_text(data.get("mode"), "mode"), status=_text(data.get("status"), "status"),
                   integrity_required=_flag(data.get("integrity_required"), "integrity_required", True))

    def setting(self, key: str) -> Optional[str]:
        return _text(self.config.get(key), f"config.{key}")


def _name_from_reference(reference: Optional[str], schemes: Tuple[str, ...],
                         marker: Optional[str] = None) -> Optional[str]:
    if not reference:
        return None
    if reference.startswith("arn:aws:s3:::"):
        return reference[len("arn:aws:s3:::"):].split("/", 1)[0] or None
    if marker and marker in reference:
        return reference.rsplit(marker, 1)[1].split("/", 1)[0] or None
    parts = urlsplit(reference)
    if parts.scheme in schemes and parts.netloc:
        return parts.netloc
    return None if parts.scheme else reference


def external_storage_driver_from_policy(
    policy: Union[ExternalPayloadStoragePolicy, Mapping[str, Any]],
    *,
    s3_client: Any = None,
    gcs_client: Any = None,
    azure_container_client: Any = None,
    local_root: Any = None,
) -> ExternalStorageDriver:
    """The driver ``policy`` names (``local``, ``s3``, ``gcs``, ``azure``/``azure-blob``).

    The SDK's keywords: pass the configured cloud client for a cloud policy (for S3 without
    one, boto3's default client is built: the ``s3`` extra). A disabled or driverless policy,
    a missing bucket/container/root or an unknown driver is a ``ValueError``.
    """
    p = policy if isinstance(policy, ExternalPayloadStoragePolicy) else ExternalPayloadStoragePolicy.from_dict(policy)
    if not p.enabled:
        raise ValueError("external payload storage policy is disabled")
    if p.driver is None:
        raise ValueError("external payload storage policy has no driver")
    kind = p.driver.lower()
    prefix = p.setting("prefix") or p.prefix
    if kind == "local":
        root = local_root or p.setting("uri") or p.reference
        if not root:
            raise ValueError("a local external payload storage policy needs config.uri or local_root")
        if isinstance(root, str):
            parts = urlsplit(root)
            if parts.scheme == "file":
                if parts.netloc not in ("", "localhost"):
                    raise ValueError("a local external payload storage file URI must be local")
                root = unquote(parts.path)
            elif parts.scheme:
                raise ValueError("a local external payload storage policy needs a file:// URI or a path")
        return LocalFilesystemExternalStorage(root)
    if kind == "s3":
        bucket = p.setting("bucket") or _name_from_reference(p.reference, ("s3",))
        if not bucket:
            raise ValueError("an s3 external payload storage policy needs config.bucket or a bucket reference")
        return S3ExternalStorage(s3_client, bucket=bucket, prefix=prefix)
    if kind == "gcs":
        if gcs_client is None:
            raise ValueError("a gcs external payload storage policy needs gcs_client")
        bucket = p.setting("bucket") or _name_from_reference(p.reference, ("gs",), "/buckets/")
        if not bucket:
            raise ValueError("a gcs external payload storage policy needs config.bucket or a bucket reference")
        return GCSExternalStorage(gcs_client, bucket=bucket, prefix=prefix)
    if kind in ("azure", "azure-blob"):
        if azure_container_client is None:
            raise ValueError("an azure external payload storage policy needs azure_container_client")
        container = (p.setting("container") or p.setting("bucket")
                     or _name_from_reference(p.reference, ("azure", "azure-blob")))
        if not container:
            raise ValueError("an azure external payload storage policy needs config.container or a container reference")
        return AzureBlobExternalStorage(azure_container_client, container=container, prefix=prefix)
    raise ValueError(f"unsupported external payload storage driver {p.driver!r}")

