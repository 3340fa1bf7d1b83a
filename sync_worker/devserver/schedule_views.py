"""How a stored schedule row is answered: describe, list item and the audit snapshot."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .store import Row
from .util import iso


def status(row: Row) -> str:
    return str(row["state"])


def remaining_actions(row: Row) -> Optional[int]:
    if row.get("max_runs") is None:
        return None
    return max(0, int(row["max_runs"]) - int(row.get("fires_count") or 0))


def detail(row: Row) -> Dict[str, Any]:
    return {
        "namespace": row["namespace"], "schedule_id": row["schedule_id"], "status": status(row),
        "paused": row["state"] == "paused", "spec": row["spec"], "action": row["action"],
        "overlap_policy": row["overlap_policy"], "memo": row.get("memo"),
        "search_attributes": row.get("search_attributes"), "jitter_seconds": row.get("jitter_seconds") or 0,
        "max_runs": row.get("max_runs"), "remaining_actions": remaining_actions(row),
        "fires_count": row.get("fires_count") or 0, "failures_count": row.get("failures_count") or 0,
        "next_fire_at": iso(row.get("next_occurrence")), "last_fired_at": iso(row.get("last_fired_at")),
        "latest_workflow_instance_id": row.get("latest_workflow_instance_id"), "note": row.get("note"),
        "paused_at": iso(row.get("paused_at")), "created_at": iso(row.get("created_at")),
        "updated_at": iso(row.get("updated_at")), "deleted_at": iso(row.get("deleted_at")),
        "info": {
            "buffered_actions": list(row.get("buffered") or []),
            "skipped_trigger_count": row.get("skipped_trigger_count") or 0,
            "last_skip_reason": row.get("last_skip_reason"), "last_skipped_at": iso(row.get("last_skipped_at")),
            "recent_actions": list(row.get("recent_actions") or []),
        },
    }


def list_item(row: Row) -> Dict[str, Any]:
    full = detail(row)
    keys = ("schedule_id", "status", "paused", "spec", "action", "overlap_policy", "note", "memo",
            "search_attributes", "jitter_seconds", "max_runs", "remaining_actions", "fires_count",
            "failures_count", "next_fire_at", "last_fired_at", "latest_workflow_instance_id", "paused_at",
            "created_at", "updated_at", "info")
    item: Dict[str, Any] = {k: full[k] for k in keys}
    item["workflow_type"] = row["action"].get("workflow_type")
    item["next_fire"] = full["next_fire_at"]
    item["last_fire"] = full["last_fired_at"]
    return item


def snapshot(row: Row) -> Dict[str, Any]:
    """The schedule's state as recorded with each audit event."""
    return {"schedule_id": row["schedule_id"], "namespace": row["namespace"], "status": status(row),
            "overlap_policy": row["overlap_policy"], "fires_count": row.get("fires_count") or 0,
            "skipped_trigger_count": row.get("skipped_trigger_count") or 0,
            "remaining_actions": remaining_actions(row), "next_fire_at": iso(row.get("next_occurrence")),
            "latest_workflow_instance_id": row.get("latest_workflow_instance_id"), "note": row.get("note")}
