"""Namespace, storage-probe and search-attribute results (``durable_workflow`` 2.12 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._common import RawAccess, body_of, dict_list, mapping, opt_int, opt_str


@dataclass
class NamespaceDescription(RawAccess):
    """One namespace's configuration and lifecycle state.

    ``external_payload_storage`` is the server's policy object as a dict (the published SDK
    wraps it in its own class); ``deleted`` counts what a delete removed, per kind.
    """

    name: str
    description: Optional[str] = None
    retention_days: Optional[int] = None
    status: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    deleted: Optional[Dict[str, int]] = None
    external_payload_storage: Optional[Dict[str, Any]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object) -> NamespaceDescription:
        raw = body_of(data)
        deleted = raw.get("deleted")
        return cls(
            name=str(raw.get("name") or ""),
            description=opt_str(raw.get("description")),
            retention_days=opt_int(raw.get("retention_days")),
            status=opt_str(raw.get("status")),
            created_at=opt_str(raw.get("created_at")),
            updated_at=opt_str(raw.get("updated_at")),
            deleted={str(k): v for k, v in deleted.items() if isinstance(v, int)} if isinstance(deleted, dict)
            else None,
            external_payload_storage=mapping(raw.get("external_payload_storage")),
            raw=raw,
        )


@dataclass
class NamespaceList:
    """The namespaces the caller may see."""

    namespaces: List[NamespaceDescription]

    @classmethod
    def from_dict(cls, data: object) -> NamespaceList:
        return cls([NamespaceDescription.from_dict(item) for item in dict_list(body_of(data).get("namespaces"))])


@dataclass
class StoragePayloadTestResult:
    """One payload size of a storage probe."""

    status: str
    bytes: Optional[int] = None
    sha256: Optional[str] = None
    reference_uri: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> StoragePayloadTestResult:
        return cls(status=str(data.get("status") or ""), bytes=opt_int(data.get("bytes")),
                   sha256=opt_str(data.get("sha256")), reference_uri=opt_str(data.get("reference_uri")))


@dataclass
class StorageTestResult:
    """The server's external payload storage probe (a small and a large round trip)."""

    status: str
    namespace: Optional[str] = None
    driver: Optional[str] = None
    small_payload: Optional[StoragePayloadTestResult] = None
    large_payload: Optional[StoragePayloadTestResult] = None
    raw: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, data: object) -> StorageTestResult:
        raw = body_of(data)
        small, large = raw.get("small_payload"), raw.get("large_payload")
        return cls(
            status=str(raw.get("status") or ""), namespace=opt_str(raw.get("namespace")),
            driver=opt_str(raw.get("driver")),
            small_payload=StoragePayloadTestResult.from_dict(small) if isinstance(small, dict) else None,
            large_payload=StoragePayloadTestResult.from_dict(large) if isinstance(large, dict) else None,
            raw=raw,
        )


@dataclass
class SearchAttributeList:
    """Search attribute definitions of the namespace: name → type."""

    system_attributes: Dict[str, str]
    custom_attributes: Dict[str, str]

    @classmethod
    def from_dict(cls, data: object) -> SearchAttributeList:
        raw = body_of(data)
        return cls(system_attributes=dict(mapping(raw.get("system_attributes")) or {}),
                   custom_attributes=dict(mapping(raw.get("custom_attributes")) or {}))
