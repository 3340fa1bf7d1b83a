"""Helpers shared by the result dataclasses: typed reads of server bodies, dict-style access."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ... import payloads


class RawAccess:
    """``obj["key"]`` / ``obj.get("key")`` read the server body a result was built from.

    Kept for code written against sync_worker 0.1, where these calls returned the body as a
    plain ``dict``; attribute access (the published SDK's shape) is the documented way.
    """

    raw: Optional[Dict[str, Any]]

    def __getitem__(self, key: str) -> Any:
        return (self.raw or {})[key]

    def get(self, key: str, default: Any = None) -> Any:
        return (self.raw or {}).get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in (self.raw or {})


def mapping(value: object) -> Optional[Dict[str, Any]]:
    """``value`` if it is a JSON object, else ``None``."""
    return dict(value) if isinstance(value, dict) else None


def body_of(value: object) -> Dict[str, Any]:
    """A response body as a dict (``{}`` for anything else)."""
    return value if isinstance(value, dict) else {}


def opt_int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def opt_str(value: object) -> Optional[str]:
    return value if isinstance(value, str) else None


def str_list(value: object) -> List[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def dict_list(value: object) -> List[Dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def decode_payload(value: Any, codec: Optional[str] = None) -> Any:
    """Decode an Avro envelope (or a bare blob with an ``avro`` codec); plain JSON passes through."""
    # a reference left unresolved (no driver, or a failed fetch) raises its typed error
    if isinstance(value, dict) and ("blob" in value or "external_storage" in value):
        return payloads.decode_envelope(value)
    if isinstance(value, str) and codec == payloads.CODEC:
        return payloads.decode_envelope(value, codec=codec)
    return value


def decode_first(raw: Dict[str, Any], *names: str) -> Any:
    """The first present field of ``names``, decoded."""
    codec = opt_str(raw.get("payload_codec"))
    for name in names:
        value = raw.get(name)
        if value is not None:
            return decode_payload(value, codec)
    return None
