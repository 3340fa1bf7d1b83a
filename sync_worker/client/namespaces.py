"""Namespaces (create, describe, list, update, delete, external storage), the storage probe
and search-attribute definitions, with ``durable_workflow`` 2.12's signatures."""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

from .base import ClientBase, segment
from .results import NamespaceDescription, NamespaceList, SearchAttributeList, StorageTestResult
from .results._common import body_of
from .transport import RetryMode


class NamespacesMixin(ClientBase):
    """Namespace, storage and search-attribute routes."""

    def list_namespaces(self) -> NamespaceList:
        """The namespaces the caller may see."""
        return NamespaceList.from_dict(self._call("control", "GET", "/namespaces", route="/namespaces",
                                                  operation="namespace.list"))

    def describe_namespace(self, name: str) -> NamespaceDescription:
        """One namespace's configuration and status."""
        return NamespaceDescription.from_dict(self._call(
            "control", "GET", f"/namespaces/{segment(name)}", route="/namespaces/{name}",
            operation="namespace.describe"))

    def create_namespace(self, name: str, *, description: Optional[str] = None,
                         retention_days: int = 30) -> NamespaceDescription:
        """Create a namespace (``retention_days`` of closed runs' history)."""
        body = {"name": name, "description": description, "retention_days": retention_days}
        return NamespaceDescription.from_dict(self._call(
            "control", "POST", "/namespaces", route="/namespaces", body=body, retry=RetryMode.CONNECT_ONLY,
            operation="namespace.create"))

    def update_namespace(self, name: str, *, description: Optional[str] = None,
                         retention_days: Optional[int] = None) -> NamespaceDescription:
        """Change a namespace's description and/or retention (only given fields are sent)."""
        body: Dict[str, Any] = {}
        if description is not None:
            body["description"] = description
        if retention_days is not None:
            body["retention_days"] = retention_days
        return NamespaceDescription.from_dict(self._call(
            "control", "PUT", f"/namespaces/{segment(name)}", route="/namespaces/{name}", body=body,
            operation="namespace.update"))

    def delete_namespace(self, name: str) -> NamespaceDescription:
        """Delete a namespace and what it holds; ``deleted`` counts what went, per kind."""
        return NamespaceDescription.from_dict(self._call(
            "control", "DELETE", f"/namespaces/{segment(name)}", route="/namespaces/{name}",
            retry=RetryMode.CONNECT_ONLY, operation="namespace.delete"))

    def set_namespace_external_storage(
        self,
        name: Optional[str] = None,
        *,
        driver: str,
        enabled: bool = True,
        threshold_bytes: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None,
        namespace: Optional[str] = None,
    ) -> NamespaceDescription:
        """Configure the server-side external payload storage of a namespace.

        ``namespace=`` is the published SDK's deprecated alias of ``name``.
        """
        if namespace is not None:
            warnings.warn("set_namespace_external_storage(namespace=...) is deprecated; pass the name first",
                          DeprecationWarning, stacklevel=2)
            if name is not None and name != namespace:
                raise ValueError("name and namespace= name different namespaces")
            name = namespace
        if not name:
            raise ValueError("set_namespace_external_storage needs the namespace name")
        body: Dict[str, Any] = {"driver": driver, "enabled": enabled}
        if threshold_bytes is not None:
            body["threshold_bytes"] = threshold_bytes
        if config is not None:
            body["config"] = dict(config)
        return NamespaceDescription.from_dict(self._call(
            "control", "PUT", f"/namespaces/{segment(name)}/external-storage",
            route="/namespaces/{name}/external-storage", body=body, operation="namespace.set_storage_driver"))

    def test_external_storage(self, *, driver: Optional[str] = None, small_payload_bytes: Optional[int] = None,
                              large_payload_bytes: Optional[int] = None) -> StorageTestResult:
        """Ask the server to round-trip a small and a large payload through its external storage."""
        body: Dict[str, Any] = {}
        if small_payload_bytes is not None:
            body["small_payload_bytes"] = small_payload_bytes
        if large_payload_bytes is not None:
            body["large_payload_bytes"] = large_payload_bytes
        if driver is not None:
            body["driver"] = driver
        return StorageTestResult.from_dict(self._call("control", "POST", "/storage/test", route="/storage/test",
                                                      body=body, operation="storage.test"))

    def list_search_attributes(self) -> SearchAttributeList:
        """System and custom search attribute definitions of the namespace."""
        return SearchAttributeList.from_dict(self._call("control", "GET", "/search-attributes",
                                                        route="/search-attributes", operation="search_attribute.list"))

    def create_search_attribute(self, name: str, attribute_type: str) -> Dict[str, Any]:
        """Define a custom search attribute (``keyword``, ``text``, ``int``, ``double``, ``bool``, ``datetime``)."""
        return body_of(self._call("control", "POST", "/search-attributes", route="/search-attributes",
                                  body={"name": name, "type": attribute_type}, retry=RetryMode.CONNECT_ONLY,
                                  operation="search_attribute.create"))

    def delete_search_attribute(self, name: str) -> Dict[str, Any]:
        """Remove a custom search attribute definition."""
        return body_of(self._call("control", "DELETE", f"/search-attributes/{segment(name)}",
                                  route="/search-attributes/{name}", retry=RetryMode.CONNECT_ONLY,
                                  operation="search_attribute.delete"))
