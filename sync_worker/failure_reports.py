"""Bounded failure reports (protocol §10): keep failure requests under the encoded size limit.

Pure: a request body goes in, a new request body comes out. Only diagnostic text and optional
metadata are reduced; identity keys, claim fields and retry semantics are never shortened. When
they alone cannot fit, :class:`~sync_worker.errors.FailureReportTooLarge` is raised instead of
altering them.

Sizes are UTF-8 bytes of the compact JSON encoding used on the wire
(``separators=(",", ":")``, ``ensure_ascii=False``, no NaN/Infinity).

The order of names inside an omitted-fields marker follows the order in which the fields were
found oversized (carried sizes first, then message, stack trace, metadata), which is the order
the published SDK produces; the verified example of §10.3.6 comes out alphabetical this way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from sync_worker.errors import FailureReportTooLarge

__all__ = [
    "DETAIL_BYTES",
    "task_failure_note",
    "MESSAGE_BYTES",
    "ObservedText",
    "REQUEST_BYTES",
    "STACK_BYTES",
    "bound_request",
    "effective_limit",
    "encoded_size",
]

MESSAGE_BYTES = 63488
STACK_BYTES = 131072
DETAIL_BYTES = 65536
REQUEST_BYTES = 1048576

_STACK_MARKER = "\n[truncated]"
_OPTIONAL_FIELDS = ("details", "diagnostics", "runtime_diagnostics", "validation_errors")
_IDENTITY_KEYS = frozenset(
    {
        "type",
        "class",
        "code",
        "reason",
        "non_retryable",
        "retryable",
        "retry_after_seconds",
        "next_retry_delay",
        "activity_type",
        "activity_attempt_id",
        "activity_execution_id",
        "failed_step_sequence",
        "failed_activity_execution_id",
    }
)
_CARRIABLE_FIELDS = frozenset({*_OPTIONAL_FIELDS, "exception", "message", "stack_trace"})

class ObservedText(str):
    """A failure message workflow code has already seen (a local activity's, bounded before the
    workflow observed it). It is sent as it is: a later batch or a lower limit that cannot fit it
    raises :class:`FailureReportTooLarge` rather than change a value replay must see again."""


Location = Tuple[Union[str, int], ...]
Omitted = Dict[str, Optional[int]]


# ---------------------------------------------------------------------------
# Sizes and text


def _encode(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def encoded_size(body: object) -> int:
    """UTF-8 bytes of the compact JSON encoding of ``body`` (raises if it cannot be encoded)."""
    return len(_encode(body))


def _size(value: object) -> Optional[int]:
    """Encoded size, or None for values JSON cannot carry (NaN, lone surrogates, cycles, objects)."""
    try:
        return len(_encode(value))
    except (TypeError, ValueError, RecursionError):
        return None


def _utf8(text: str) -> bytes:
    # Lone surrogates cannot be sent; they are measured (and later written) as "?".
    return text.encode("utf-8", errors="replace")


def _utf8_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` UTF-8 bytes, never splitting a code point."""
    return _utf8(text)[: max(0, limit)].decode("utf-8", errors="ignore")


def _is_clean_utf8(text: str) -> bool:
    return _utf8(text).decode("utf-8", errors="ignore") == text


def _message_marker(omitted: Omitted) -> str:
    return "\n[truncated " + _encode({"omitted_fields": omitted}).decode("utf-8") + "]"


# ---------------------------------------------------------------------------
# Limits


def effective_limit(client_limit: Optional[int], server_max_payload_bytes: Optional[int]) -> int:
    """The encoded-request budget: the client's limit (≤ 1 MiB), lowered by a positive server limit."""
    if client_limit is None:
        limit = REQUEST_BYTES
    elif type(client_limit) is not int or client_limit < 1:
        raise ValueError("failure_report_limit_bytes must be a positive integer")
    else:
        limit = min(REQUEST_BYTES, client_limit)
    if type(server_max_payload_bytes) is int and server_max_payload_bytes > 0:
        limit = min(limit, server_max_payload_bytes)
    return limit


# ---------------------------------------------------------------------------
# Where the reports are


@dataclass(frozen=True)
class _Site:
    """One failure report inside a request body.

    ``terminal`` reports (``fail_workflow``) keep their optional metadata in ``exception``;
    ``structured`` reports also record omissions in ``diagnostics.failure_report``.
    """

    location: Location
    terminal: bool = False
    structured: bool = False


def _worker_route(path: str) -> Optional[str]:
    # The SDK measures paths relative to /api; accept the absolute form too.
    if path.startswith("/api/worker/"):
        path = path[len("/api") :]
    return path if path.startswith("/worker/") else None


def _command_sites(index: int, command: Dict[str, Any]) -> List[_Site]:
    kind = command.get("type")
    sites: List[_Site] = []
    if kind == "fail_workflow":
        sites.append(_Site(("commands", index), terminal=True, structured=True))
    elif kind == "fail_update" or (kind == "record_local_activity" and "message" in command):
        sites.append(_Site(("commands", index)))
    if kind == "record_local_activity":
        for position, attempt in enumerate(command.get("attempts", [])):
            if isinstance(attempt, dict) and "message" in attempt:
                sites.append(_Site(("commands", index, "attempts", position)))
    return sites


def _find_sites(route: str, body: Dict[str, Any]) -> List[_Site]:
    if isinstance(body.get("failure"), dict) and route.endswith(("/fail", "/reject")):
        return [_Site(("failure",), structured="/activity-tasks/" in route)]
    if "/local-activities/" in route and route.endswith("/outcome"):
        report = body.get("report")
        if isinstance(report, dict) and "message" in report:
            return [_Site(("report",))]
    commands = body.get("commands")
    if not route.endswith("/complete") or not isinstance(commands, list):
        return []
    sites: List[_Site] = []
    for index, command in enumerate(commands):
        if isinstance(command, dict):
            sites.extend(_command_sites(index, command))
    return sites


def _get_at(body: Any, location: Location) -> Any:
    for key in location:
        body = body[key]
    return body


def _set_at(body: Any, location: Location, value: Any) -> Any:
    """A copy of ``body`` with ``value`` at ``location``; only the containers on the way are copied."""
    if not location:
        return value
    head = location[0]
    copy: Any = dict(body) if isinstance(body, dict) else list(body)
    copy[head] = _set_at(body[head], location[1:], value)
    return copy


# ---------------------------------------------------------------------------
# One report


def _working_copy(report: Dict[str, Any], site: _Site) -> Dict[str, Any]:
    copy = dict(report)
    if site.terminal and isinstance(copy.get("exception"), dict):
        copy["exception"] = dict(copy["exception"])
    return copy


def _metadata_holder(report: Dict[str, Any], site: _Site) -> Any:
    return report.get("exception", {}) if site.terminal else report


def _carried_sizes(report: Dict[str, Any], site: _Site) -> Omitted:
    """Sizes recorded by an earlier truncation in ``diagnostics.failure_report.omitted_fields``."""
    carried: Omitted = {}
    holder = _metadata_holder(report, site)
    diagnostics = holder.get("diagnostics") if isinstance(holder, dict) else None
    record = diagnostics.get("failure_report") if isinstance(diagnostics, dict) else None
    sizes = record.get("omitted_fields") if isinstance(record, dict) else None
    if isinstance(sizes, dict):
        for name, size in sizes.items():
            if name in _CARRIABLE_FIELDS and (size is None or (type(size) is int and size >= 0)):
                carried[name] = size
    return carried


def _optional_metadata(container: Dict[str, Any]) -> Dict[str, Any]:
    return {name: container[name] for name in _OPTIONAL_FIELDS if name in container}


def _report_metadata(report: Dict[str, Any], site: _Site) -> Any:
    return report.get("exception", {}) if site.terminal else _optional_metadata(report)


def _drop_metadata(report: Dict[str, Any], omitted: Omitted, limit: int, site: _Site) -> None:
    """If the optional metadata together exceeds ``limit``, drop every field whole.

    A terminal report's ``exception`` is reduced to its identity keys instead of removed.
    """
    names = ("exception",) if site.terminal else _OPTIONAL_FIELDS
    present = {name: report[name] for name in names if name in report}
    size = _size(present)
    if size is not None and size <= limit:
        return
    for name, value in present.items():
        omitted.setdefault(name, _size(value))
        if name == "exception" and isinstance(value, dict):
            report[name] = {key: item for key, item in value.items() if key in _IDENTITY_KEYS}
        else:
            del report[name]


def _cut_stack(report: Dict[str, Any], omitted: Omitted, limit: int) -> None:
    stack = report.get("stack_trace")
    if not isinstance(stack, str):
        return
    size = len(_utf8(stack))
    if size <= limit:
        return
    omitted.setdefault("stack_trace", size)
    if limit >= len(_STACK_MARKER):
        report["stack_trace"] = _utf8_prefix(stack, limit - len(_STACK_MARKER)) + _STACK_MARKER
    else:
        del report["stack_trace"]


def _record_diagnostics(
    report: Dict[str, Any], omitted: Omitted, original: Dict[str, Any], site: _Site
) -> None:
    """Write ``diagnostics.failure_report`` for structured reports, merged into existing diagnostics.

    If that pushes the optional metadata over DETAIL_BYTES, every optional field goes (the
    existing diagnostics counted as omitted too) and only the failure_report record stays.
    """
    if not site.structured:
        return
    container = report.setdefault("exception", {}) if site.terminal else report
    omitted.update(_carried_sizes(original, site))
    holder = _metadata_holder(original, site)
    existing = holder.get("diagnostics") if isinstance(holder, dict) else None
    diagnostics: Dict[str, Any] = {}
    if isinstance(existing, dict) and "diagnostics" not in omitted:
        diagnostics = dict(existing)
    diagnostics["failure_report"] = {"omitted_fields": dict(omitted)}
    container["diagnostics"] = diagnostics
    size = _size(container if site.terminal else _optional_metadata(container))
    if size is not None and size <= DETAIL_BYTES:
        return
    if existing is not None:
        omitted.setdefault("diagnostics", _size(existing))
    for key in list(container):
        if key == "diagnostics":
            continue
        if site.terminal and key not in _IDENTITY_KEYS:
            omitted.setdefault("exception", _size(container.pop(key)))
        elif not site.terminal and key in _OPTIONAL_FIELDS:
            omitted.setdefault(key, _size(container.pop(key)))
    container["diagnostics"] = {"failure_report": {"omitted_fields": dict(omitted)}}


def _prepare(original: Dict[str, Any], site: _Site) -> Dict[str, Any]:
    """Omit oversized metadata of a structured report before any fitting (§10.3.1)."""
    report = _working_copy(original, site)
    omitted: Omitted = {}
    _drop_metadata(report, omitted, DETAIL_BYTES, site)
    if omitted:
        _record_diagnostics(report, omitted, original, site)
    return report


def _already_bounded(original: Dict[str, Any], carried: Omitted, budget: int) -> bool:
    """True when ``original`` is the output of an earlier identical truncation that still fits."""
    message = original.get("message", "")
    stack = original.get("stack_trace")
    return (
        isinstance(message, str)
        and message.endswith(_message_marker(carried))
        and len(_utf8(message)) <= min(MESSAGE_BYTES, budget)
        and (not isinstance(stack, str) or len(_utf8(stack)) <= min(STACK_BYTES, budget))
    )


def _render(original: Dict[str, Any], site: _Site, budget: int) -> Dict[str, Any]:
    """The report with message, stack and metadata each within ``budget`` (and their own caps)."""
    report = _working_copy(original, site)
    if isinstance(original.get("message"), ObservedText):
        return report
    carried = _carried_sizes(original, site) if site.structured else {}
    omitted: Omitted = dict(carried)
    raw_message = original.get("message", "")
    message = raw_message if isinstance(raw_message, str) else ""
    message_size = len(_utf8(message))
    message_limit = min(MESSAGE_BYTES, budget)
    if message_size > message_limit or not _is_clean_utf8(message):
        omitted.setdefault("message", message_size)
    _cut_stack(report, omitted, min(STACK_BYTES, budget))
    _drop_metadata(report, omitted, min(DETAIL_BYTES, budget), site)
    if not omitted:
        return report
    if carried and carried == omitted and _already_bounded(original, carried, budget):
        return report
    # The marker and the diagnostics record can each cause a further omission (a message
    # pushed over its cap, metadata pushed over 64 KiB); the set of names is finite, so
    # repeat until it stops growing.
    while True:
        before = dict(omitted)
        _record_diagnostics(report, omitted, original, site)
        marker = _message_marker(omitted)
        if message_size + len(_utf8(marker)) > message_limit:
            omitted.setdefault("message", message_size)
        if omitted == before:
            break
    report["message"] = _utf8_prefix(message, message_limit - len(_utf8(marker))) + marker
    return report


# ---------------------------------------------------------------------------
# The whole request


def _render_all(body: Dict[str, Any], sites: List[_Site], budget: int, limit: int) -> Dict[str, Any]:
    result = body
    for site in sites:
        rendered = _render(_get_at(body, site.location), site, budget)
        size = _size(_report_metadata(rendered, site))
        if size is None or size > DETAIL_BYTES:
            raise FailureReportTooLarge(limit)
        result = _set_at(result, site.location, rendered)
    return result


def bound_request(path: str, body: Dict[str, Any], *, limit_bytes: int = REQUEST_BYTES) -> Dict[str, Any]:
    """Bound every failure report in a ``/worker/...`` request so the encoded body fits ``limit_bytes``.

    Returns a new body (the input is never mutated); a body without failure reports is
    returned as is. Raises :class:`FailureReportTooLarge` when identity and other
    non-diagnostic content cannot fit even with every optional text removed.
    """
    route = _worker_route(path)
    if route is None or not isinstance(body, dict):
        return body
    sites = _find_sites(route, body)
    if not sites:
        return body
    prepared: Dict[str, Any] = body
    for site in sites:
        if site.structured:
            prepared = _set_at(prepared, site.location, _prepare(_get_at(body, site.location), site))
    limit = min(limit_bytes, REQUEST_BYTES)
    budget = STACK_BYTES
    while True:
        candidate = _render_all(prepared, sites, budget, limit)
        size = _size(candidate)
        if size is not None and size <= limit:
            return candidate
        if budget == 0:
            raise FailureReportTooLarge(limit)
        budget //= 2


def task_failure_note(raw: Mapping[str, Any]) -> str:
    """Why a run is stuck, from the server's ``last_task_failure`` (empty when there is none)."""
    failure = raw.get("last_task_failure")
    if not isinstance(failure, Mapping):
        return ""
    kind = failure.get("type") or failure.get("exception_type") or "failure"
    message = str(failure.get("message") or "").strip().splitlines()
    reason = message[0][:300] if message else "(no message)"
    return f"; its workflow tasks keep failing: {kind}: {reason}"
