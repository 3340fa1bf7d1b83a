"""The optional W3C trace-context carrier of the wire (``observability_context``), pure.

The published SDK (``durable_workflow.telemetry_carrier``, 2.12) defines it and this module
speaks it the same way, so a trace started by either client continues in either worker:

* the server advertises ``worker_protocol.server_capabilities.observability_context`` equal to
  :data:`CAPABILITY` (exactly: the SDK compares every key and type);
* a client then adds ``observability_context`` = ``{"schema": "durable-workflow.trace-context",
  "version": 1, "carrier": {"traceparent": ..., "tracestate"?: ..., "baggage"?: ...}}`` to the
  bodies of start, signal, cancel and update, and to ``start_child_workflow`` /
  ``continue_as_new`` commands;
* the server keeps the start's carrier with the run and hands it back as the
  ``observability_context`` of the run's tasks; signals and updates come back as
  ``observability_links`` (``{"schema": "durable-workflow.trace-links", "version": 1, "task_id",
  "run_id", "namespace", "links": [{"kind": "command", "command_id", "context"}]}``) on the task
  that applies them.

Limits are the SDK's: ``traceparent`` ≤ 256, ``tracestate`` ≤ 512 and ``baggage`` ≤ 2048 bytes, the
whole context ≤ 4096 bytes of compact JSON, at most 32 links. No OpenTelemetry import here: the dev
server validates carriers without it (``traceparent`` by the W3C grammar, version ``00``).
"""

from __future__ import annotations

import json
import re
from collections import abc  # isinstance against abc.Mapping: typing.Mapping's check is ~10x slower
from collections.abc import Mapping
from typing import Any, Dict, List, Optional

__all__ = [
    "CAPABILITY",
    "CONTEXT_SCHEMA",
    "LINKS_SCHEMA",
    "CarrierError",
    "advertised",
    "carrier_of",
    "context_for",
    "links_body",
    "parse_traceparent",
    "validate_context",
]

CONTEXT_SCHEMA = "durable-workflow.trace-context"
DISPATCH_SCHEMA = "durable-workflow.queue-trace"
LINKS_SCHEMA = "durable-workflow.trace-links"
HEADER_LIMITS = {"traceparent": 256, "tracestate": 512, "baggage": 2048}
MAX_CONTEXT_BYTES = 4096
MAX_LINKS = 32

#: What a server that keeps and hands back carriers advertises (the SDK's ``CAPABILITY``, key for key).
CAPABILITY: Dict[str, Any] = {
    "supported": True, "schema": CONTEXT_SCHEMA, "version": 1,
    "dispatch_schema": DISPATCH_SCHEMA, "links_schema": LINKS_SCHEMA,
    "max_context_bytes": MAX_CONTEXT_BYTES, "max_links": MAX_LINKS, "max_links_bytes": MAX_CONTEXT_BYTES,
}

# W3C Trace Context level 1: version "00", 32 hex trace id, 16 hex parent id, 2 hex flags, lowercase.
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class CarrierError(ValueError):
    """A carrier that is not the v1 trace-context shape (the message says which part)."""


def advertised(capabilities: Mapping[str, Any]) -> bool:
    """Whether ``server_capabilities`` advertises exactly the v1 carrier (the SDK's test, type for type)."""
    value = capabilities.get("observability_context") if isinstance(capabilities, abc.Mapping) else None
    return isinstance(value, dict) and all(
        type(value.get(key)) is type(expected) and value[key] == expected for key, expected in CAPABILITY.items())


def parse_traceparent(value: Any) -> Optional[Dict[str, Any]]:
    """``{"trace_id", "span_id", "flags"}`` (ints) of a valid version-00 ``traceparent``, else None.

    All-zero trace or span ids are invalid, as the W3C grammar says.
    """
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.match(value.strip())
    if match is None:
        return None
    trace_id, span_id, flags = (int(part, 16) for part in match.groups())
    if trace_id == 0 or span_id == 0:
        return None
    return {"trace_id": trace_id, "span_id": span_id, "flags": flags}


def _size(value: Any) -> int:
    # The SDK's conservative budget: compact JSON, ASCII, slashes escaped as the PHP server does.
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=True).replace("/", "\\/").encode("utf-8"))


def validate_context(value: Any, where: str = "observability_context") -> Dict[str, Any]:
    """The v1 context ``value`` with only its known headers, or :class:`CarrierError` naming the fault."""
    if not isinstance(value, dict):
        raise CarrierError(f"{where} must be an object")
    if set(value) != {"schema", "version", "carrier"}:
        raise CarrierError(f"{where} must have exactly the keys schema, version and carrier")
    if value.get("schema") != CONTEXT_SCHEMA:
        raise CarrierError(f"{where}.schema must be {CONTEXT_SCHEMA!r}")
    if type(value.get("version")) is not int or value["version"] != 1:
        raise CarrierError(f"{where}.version must be 1")
    carrier = value.get("carrier")
    if not isinstance(carrier, dict) or not carrier:
        raise CarrierError(f"{where}.carrier must be an object with a traceparent")
    unknown = sorted(set(carrier) - set(HEADER_LIMITS))
    if unknown:
        raise CarrierError(f"{where}.carrier has unknown header(s) {', '.join(unknown)}")
    for name, header in carrier.items():
        if not isinstance(header, str):
            raise CarrierError(f"{where}.carrier.{name} must be a string")
        if len(header.encode("utf-8")) > HEADER_LIMITS[name]:
            raise CarrierError(f"{where}.carrier.{name} is longer than {HEADER_LIMITS[name]} bytes")
    if parse_traceparent(carrier.get("traceparent")) is None:
        raise CarrierError(f"{where}.carrier.traceparent is not a W3C traceparent (00-<trace id>-<span id>-<flags>)")
    normalized = {"schema": CONTEXT_SCHEMA, "version": 1, "carrier": dict(carrier)}
    if _size(normalized) > MAX_CONTEXT_BYTES:
        raise CarrierError(f"{where} is larger than {MAX_CONTEXT_BYTES} bytes")
    return normalized


def carrier_of(value: Any) -> Optional[Dict[str, str]]:
    """The headers of a valid v1 context (``{"traceparent": ...}``), or None for anything else."""
    try:
        return dict(validate_context(value)["carrier"])
    except CarrierError:
        return None


def context_for(headers: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """The v1 context that carries ``headers`` (only the known ones), or None when they do not fit."""
    kept = {name: value for name, value in headers.items() if name in HEADER_LIMITS and isinstance(value, str)}
    try:
        return validate_context({"schema": CONTEXT_SCHEMA, "version": 1, "carrier": kept})
    except CarrierError:
        return None


def links_body(task_id: str, run_id: str, namespace: str, links: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A task's ``observability_links`` document, or None when there is nothing to link.

    Each link is ``{"kind": "command", "command_id": ..., "context": <v1 context>}``; links past
    :data:`MAX_LINKS`, or past the byte budget, are left out (newest first kept out), so the
    document always fits the advertised limits.
    """
    body: Dict[str, Any] = {"schema": LINKS_SCHEMA, "version": 1, "task_id": task_id, "run_id": run_id,
                            "namespace": namespace, "links": []}
    for link in links[:MAX_LINKS]:
        body["links"].append(link)
        if _size(body) > MAX_CONTEXT_BYTES:
            body["links"].pop()
            break
    return body if body["links"] else None
