"""Payload validation at the boundary: every envelope is decoded once so bad framing is a 422."""

from __future__ import annotations

from typing import Any, List, Optional

from ..errors import PayloadError
from ..payloads import decode_envelope
from .util import ApiError


def check_payload(value: Any, where: str, *, codec: Optional[str] = "avro", allow_none: bool = True) -> None:
    """Refuse anything that is not a valid Avro envelope (or bare blob with an ``avro`` codec)."""
    if value is None:
        if allow_none:
            return
        raise ApiError(422, "validation_failed", f"{where} is required",
                       errors={where: ["is required"]}, validation_errors={where: ["is required"]})
    try:
        decode_envelope(value, codec=codec)
    except PayloadError as exc:
        raise ApiError(422, exc.reason, f"{where}: {exc}", field=where) from None
    except Exception as exc:  # a codec bug must still be a refusal, not a 500
        raise ApiError(422, "invalid_payload_framing", f"{where}: {exc}", field=where) from None


def plain_json_arguments(body: Any) -> Any:
    """A control-plane body with plain-JSON argument lists stored as their Avro envelope.

    The Durable Workflow CLI sends ``input`` (and a schedule's ``action.input``) as a JSON
    array; the server accepts that and keeps the list as one Avro value, as the SDKs send it.
    Envelopes and every other shape pass unchanged (and are validated where they are used).
    """
    if not isinstance(body, dict):
        return body
    out = dict(body)
    if isinstance(out.get("input"), list):
        out["input"] = _envelope(out["input"], "input")
    action = out.get("action")
    if isinstance(action, dict) and isinstance(action.get("input"), list):
        out["action"] = {**action, "input": _envelope(action["input"], "action.input")}
    return out


def _envelope(arguments: List[Any], where: str) -> Any:
    from ..payloads import envelope

    try:
        return envelope(arguments)
    except PayloadError as exc:
        raise ApiError(422, exc.reason, f"{where}: {exc}", field=where) from None
