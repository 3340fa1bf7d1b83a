"""``RuntimeExternalPayloadReference``: the published SDK's reference to a runtime-owned payload.

A hosted Durable Workflow runtime can own the storage itself: a client uploads the bytes to the
runtime's ``/external-payloads/v1`` route and gets back a reference naming an ``ep_<ULID>`` id
instead of a URI in a store of its own. This is that reference's value type, with the SDK's
name, fields, schema and checks (``durable_workflow/external_storage.py`` 2.12): typed
validation and ``to_dict`` / ``from_dict`` for code that reads or writes such references.

The upload route itself is not served by the open-source server (durable-workflow/server
``routes/``) nor by the dev server, so no sync_worker client uploads to it; payloads stored in a
store of your own use :class:`~sync_worker.external_storage.ExternalPayloadReference`
(docs/external-storage.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Union

from ..errors.external_payloads import ExternalPayloadUnsupported

__all__ = ["RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA", "RuntimeExternalPayloadReference"]

RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA = "durable-workflow.v2.runtime-external-payload-reference.v1"
_REFERENCE_ID = re.compile(r"\Aep_[0-9A-HJKMNP-TV-Z]{26}\Z")  # ep_ + a Crockford base32 ULID
_KEYS = frozenset({"schema", "reference_id", "codec", "size_bytes", "sha256"})
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class RuntimeExternalPayloadReference:
    """A provider-neutral reference owned by the authenticated namespace's runtime.

    Every field is checked on construction; a malformed one raises
    :class:`~sync_worker.errors.ExternalPayloadUnsupported` (with ``reference_id`` when known).
    """

    reference_id: str
    sha256: str
    size_bytes: int
    codec: str
    schema: str = RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA

    def __post_init__(self) -> None:
        if self.schema != RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA:
            raise ExternalPayloadUnsupported("unsupported runtime external payload reference schema")
        if not isinstance(self.reference_id, str) or _REFERENCE_ID.fullmatch(self.reference_id) is None:
            raise ExternalPayloadUnsupported("runtime external payload reference_id is malformed",
                                             reference_id=str(self.reference_id))
        if self.codec != "avro":
            rendered = self.codec if isinstance(self.codec, str) and self.codec else "<missing>"
            raise ExternalPayloadUnsupported(
                f'unsupported_payload_codec: workflow payload codec "{rendered}" is not supported; use "avro"',
                reference_id=self.reference_id)
        if type(self.size_bytes) is not int or self.size_bytes < 0:
            raise ExternalPayloadUnsupported("runtime external payload size_bytes must be a non-negative integer",
                                             reference_id=self.reference_id)
        if not isinstance(self.sha256, str) or len(self.sha256) != 64 or not set(self.sha256) <= _HEX:
            raise ExternalPayloadUnsupported("runtime external payload sha256 must be a lowercase hex digest",
                                             reference_id=self.reference_id)

    def to_dict(self) -> Dict[str, Union[str, int]]:
        return {"schema": self.schema, "reference_id": self.reference_id, "codec": self.codec,
                "size_bytes": self.size_bytes, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any) -> RuntimeExternalPayloadReference:
        """A reference from its wire object: exactly the five keys, each checked."""
        if not isinstance(data, dict):
            raise ExternalPayloadUnsupported("runtime external payload reference must be an object")
        if set(data) != _KEYS:
            raise ExternalPayloadUnsupported("runtime external payload reference must contain exactly schema, "
                                             "reference_id, codec, size_bytes, and sha256")
        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        size = data.get("size_bytes")
        return cls(schema=text("schema"), reference_id=text("reference_id"), codec=text("codec"),
                   size_bytes=size if type(size) is int else -1, sha256=text("sha256"))
