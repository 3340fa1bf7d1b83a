"""Payloads as an operator reads them: an Avro envelope (``{"codec": "avro", "blob": "wwHi..."}``)
shown as the value it carries, so ``sync-worker workflow describe`` prints ``input: ["ada", 2]``
instead of base64. ``--raw`` keeps the server's document."""

from __future__ import annotations

from typing import Any

from .. import payloads

__all__ = ["decoded_payloads"]


def _is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("blob"), str) and isinstance(value.get("codec"), str)


def _decode(envelope: Any) -> Any:
    try:
        return payloads.decode_envelope(envelope)
    except Exception as error:  # show what it is rather than fail the command
        return f"<undecodable {envelope.get('codec')} payload: {type(error).__name__}>"


def decoded_payloads(value: Any, depth: int = 0) -> Any:
    """``value`` with every payload envelope replaced by its decoded value; an ``X_envelope`` field
    that repeats ``X`` is dropped (it is the same payload)."""
    if depth > 32:
        return value
    if _is_envelope(value):
        return _decode(value)
    if isinstance(value, list):
        return [decoded_payloads(item, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        base = key[:-len("_envelope")] if isinstance(key, str) and key.endswith("_envelope") else None
        if base is not None and base in value and value[base] == item:
            continue
        out[key] = decoded_payloads(item, depth + 1)
    return out
