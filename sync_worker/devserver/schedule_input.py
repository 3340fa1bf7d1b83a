"""Validation of schedule request bodies at the door: every bad field is a 422 naming it."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import schedule_specs
from .payload_checks import check_payload
from .util import SAFE_ID, ApiError

OVERLAP_POLICIES = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all")
#: how many fires a buffer policy holds while the previous run is still going
BUFFER_LIMITS = {"buffer_one": 1, "buffer_all": 1000}
_MAX_JITTER_SECONDS = 7 * 86400
_TIMEOUT_ALIASES = {"workflow_execution_timeout": "execution_timeout_seconds",
                    "workflow_run_timeout": "run_timeout_seconds"}


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{field} {message}", errors={field: [message]},
                    validation_errors={field: [message]})


def check_overlap_policy(value: Any) -> Optional[str]:
    if value is None:
        return None
    if value not in OVERLAP_POLICIES:
        raise _invalid("overlap_policy", f"must be one of {', '.join(OVERLAP_POLICIES)}")
    return str(value)


def optional_note(body: Dict[str, Any]) -> Optional[str]:
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > 1000):
        raise _invalid("note", "must be a string of at most 1000 characters")
    return None if note is None else str(note)


def _int(body: Dict[str, Any], key: str, *, minimum: int, maximum: int) -> Optional[int]:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _invalid(key, f"must be an integer between {minimum} and {maximum}")
    return int(value)


def _object(body: Dict[str, Any], key: str) -> Optional[Dict[str, Any]]:
    value = body.get(key)
    if value is not None and not isinstance(value, dict):
        raise _invalid(key, "must be an object")
    return None if value is None else dict(value)


def _action(raw: Any, *, creating: bool) -> Dict[str, Any]:
    if not isinstance(raw, dict):
        raise _invalid("action", "must be an object")
    action: Dict[str, Any] = {}
    workflow_type = raw.get("workflow_type")
    if workflow_type is not None or creating:
        if not isinstance(workflow_type, str) or not workflow_type or len(workflow_type) > 255:
            raise _invalid("action.workflow_type", "must be a non-empty string")
        action["workflow_type"] = workflow_type
    queue = raw.get("task_queue")
    if queue is not None:
        if not isinstance(queue, str) or not queue or len(queue) > 255:
            raise _invalid("action.task_queue", "must be a non-empty string")
        action["task_queue"] = queue
    if raw.get("input") is not None:
        check_payload(raw.get("input"), "action.input")
        action["input"] = raw["input"]
    for key in ("execution_timeout_seconds", "run_timeout_seconds", *_TIMEOUT_ALIASES):
        value = _int(raw, key, minimum=1, maximum=10 * 365 * 86400)
        if value is not None:
            action[_TIMEOUT_ALIASES.get(key, key)] = value
    return action


def _common(body: Dict[str, Any]) -> Dict[str, Any]:
    fields: Dict[str, Any] = {}
    policy = check_overlap_policy(body.get("overlap_policy"))
    if policy is not None:
        fields["overlap_policy"] = policy
    for key, maximum in (("jitter_seconds", _MAX_JITTER_SECONDS), ("max_runs", 1_000_000_000)):
        value = _int(body, key, minimum=0 if key == "jitter_seconds" else 1, maximum=maximum)
        if value is not None:
            fields[key] = value
    for key in ("memo", "search_attributes"):
        if key in body:
            fields[key] = _object(body, key)
    if "note" in body:
        fields["note"] = optional_note(body)
    return fields


def validate_create(body: Dict[str, Any]) -> Dict[str, Any]:
    schedule_id = body.get("schedule_id")
    if schedule_id is not None and (not isinstance(schedule_id, str) or len(schedule_id) > 128
                                    or not SAFE_ID.match(schedule_id)):
        raise _invalid("schedule_id", "must be at most 128 URL-safe characters [A-Za-z0-9_.:@~-]")
    if body.get("spec") is None:
        raise _invalid("spec", "is required")
    if body.get("action") is None:
        raise _invalid("action", "is required")
    paused = body.get("paused")
    if paused is not None and not isinstance(paused, bool):
        raise _invalid("paused", "must be a boolean")
    return {"schedule_id": schedule_id, "spec": schedule_specs.validate(body["spec"]),
            "action": _action(body["action"], creating=True), "paused": bool(paused), **_common(body)}


def validate_update(body: Dict[str, Any]) -> Dict[str, Any]:
    fields = _common(body)
    if body.get("spec") is not None:
        fields["spec"] = schedule_specs.validate(body["spec"])
    if body.get("action") is not None:
        fields["action"] = _action(body["action"], creating=False)
    return fields
