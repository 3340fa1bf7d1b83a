"""Payload validation at the boundary: every envelope is decoded once so bad framing is a 422."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import ExternalPayloadError, PayloadError
from ..payloads import decode_envelope
from .util import ApiError


def check_payload(value: Any, where: str, *, codec: Optional[str] = "avro", allow_none: bool = True) -> None:
    """Refuse anything that is not a valid Avro envelope (or bare blob with an ``avro`` codec)."""
    if value is None:
        if allow_none:
            return
        raise ApiError(422, "validation_failed", f"{where} is required",
                       errors={where: ["is required"]}, validation_errors={where: ["is required"]})
    if isinstance(value, dict) and "external_storage" in value and "blob" not in value:
        _check_reference(value, where)
        return
    try:
        decode_envelope(value, codec=codec)
    except PayloadError as exc:
        raise ApiError(422, exc.reason, f"{where}: {exc}", field=where) from None
    except Exception as exc:  # a codec bug must still be a refusal, not a 500
        raise ApiError(422, "invalid_payload_framing", f"{where}: {exc}", field=where) from None


def _check_reference(value: Dict[str, Any], where: str) -> None:
    """Accept ``{codec, external_storage}`` as the server does, keeping it as sent.

    The server takes a reference wherever an envelope goes (durable-workflow/workflow
    ``src/V2/Support/PayloadEnvelopeResolver.php``: exactly the keys ``codec`` and
    ``external_storage``, an avro codec matching the reference's, a well-formed
    ``durable-workflow.v2.external-payload-reference.v1``; anything else is a 422 on
    ``<field>.external_storage``). The real server then fetches the bytes with the namespace's
    own driver and may re-externalize them (``src/V2/Support/ExternalPayloads.php``); the dev
    server has no access to the worker's store, so it keeps the reference and hands it back
    unchanged wherever the payload appears (task inputs, history, describe, results), and the
    SDK or sync_worker reading it fetches and verifies the bytes.
    """
    from ..external_storage import parse_reference_envelope

    field = f"{where}.external_storage"
    if set(value) != {"codec", "external_storage"}:
        extra = sorted(set(value) - {"codec", "external_storage"})
        why = f"unexpected keys beside external_storage: {extra}" if extra else "codec is required"
        raise ApiError(422, "validation_failed", f"{where}: {why}", errors={where: [why]},
                       validation_errors={where: [why]})
    try:
        parse_reference_envelope(value)
    except ExternalPayloadError as exc:
        raise ApiError(422, "validation_failed", f"{field}: {exc}", field=field,
                       errors={field: [str(exc)]}, validation_errors={field: [str(exc)]}) from None


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
