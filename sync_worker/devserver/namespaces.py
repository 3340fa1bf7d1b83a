"""Namespaces: create / describe / list / update / delete, and the cross-namespace fences.

The served set lives in the ``namespaces`` table (seeded from ``--namespace`` on start) and is
mirrored into :attr:`Engine.namespaces`, which admission reads on every request. Isolation
follows the ServerParity ``namespace-isolation`` case: a workflow id is reserved across all
namespaces (``409 workflow_id_reserved_in_namespace``), and a read or mutation aimed at another
namespace's workflow answers ``404 instance_not_found`` / ``run_not_found`` without touching it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .store import Row
from .util import ApiError, iso

if TYPE_CHECKING:  # the engine imports this module for its fences
    from .engine import Engine

_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,128}$")
DEFAULT_RETENTION_DAYS = 30
_MAX_RETENTION_DAYS = 365


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{field} {message}", errors={field: [message]},
                    validation_errors={field: [message]})


def normalize_name(raw: Any, field: str = "name") -> str:
    if not isinstance(raw, str) or not _NAME.match(raw):
        raise _invalid(field, "must be 1-128 characters of [A-Za-z0-9._-]")
    return raw.lower()


def _description(body: Dict[str, Any]) -> Optional[str]:
    value = body.get("description")
    if value is not None and (not isinstance(value, str) or len(value) > 1000):
        raise _invalid("description", "must be a string of at most 1000 characters")
    return None if value is None else str(value)


def _retention(body: Dict[str, Any]) -> Optional[int]:
    value = body.get("retention_days")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_RETENTION_DAYS:
        raise _invalid("retention_days", f"must be an integer between 1 and {_MAX_RETENTION_DAYS}")
    return int(value)


def view(row: Row) -> Dict[str, Any]:
    return {"name": row["name"], "description": row.get("description"),
            "retention_days": row.get("retention_days"), "retention_mode": "bounded",
            "status": row.get("status", "active"), "external_payload_storage": None,
            "created_at": iso(row.get("created_at")), "updated_at": iso(row.get("updated_at"))}


def refresh(engine: Engine) -> None:
    """Mirror the active namespaces into the tuple admission checks."""
    names = [row["name"] for row in engine.store.select("namespaces", "status = 'active'", order="name")]
    engine.namespaces = tuple(names)


def bootstrap(engine: Engine) -> None:
    """Make sure every configured namespace exists (a restarted file database keeps its own)."""
    with engine.tx():
        ts = engine.now()
        for name in engine.config.namespaces or ("default",):
            key = name.lower()
            if engine.store.get("namespaces", key) is None:
                engine.store.put("namespaces", {
                    "name": key, "status": "active", "description": None,
                    "retention_days": DEFAULT_RETENTION_DAYS, "created_at": ts, "updated_at": ts})
        refresh(engine)


def _require(engine: Engine, raw_name: str) -> Row:
    name = raw_name.lower()
    row = engine.store.get("namespaces", name)
    if row is None or row.get("status") != "active":
        raise ApiError(404, "namespace_not_found", f"namespace {name!r} was not found", namespace=name)
    return row


def list_namespaces(engine: Engine) -> Dict[str, Any]:
    rows = engine.store.select("namespaces", "status = 'active'", order="created_at, name")
    return {"namespaces": [view(row) for row in rows]}


def describe(engine: Engine, name: str) -> Dict[str, Any]:
    return view(_require(engine, name))


def create(engine: Engine, body: Dict[str, Any]) -> Dict[str, Any]:
    name = normalize_name(body.get("name"))
    description = _description(body)
    retention = _retention(body)
    if engine.store.get("namespaces", name) is not None:
        raise ApiError(409, "namespace_already_exists", f"namespace {name!r} already exists", namespace=name)
    ts = engine.now()
    row: Row = {"name": name, "status": "active", "description": description,
                "retention_days": retention or DEFAULT_RETENTION_DAYS, "created_at": ts, "updated_at": ts}
    engine.store.put("namespaces", row)
    refresh(engine)
    return view(row)


def update(engine: Engine, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
    row = _require(engine, name)
    description = _description(body)
    retention = _retention(body)
    if description is not None:
        row["description"] = description
    if retention is not None:
        row["retention_days"] = retention
    row["updated_at"] = engine.now()
    engine.store.put("namespaces", row)
    return view(row)


def delete(engine: Engine, name: str) -> Dict[str, Any]:
    """Remove a namespace with everything in it; the last namespace cannot go."""
    row = _require(engine, name)
    name = row["name"]
    if len(engine.namespaces) <= 1:
        raise ApiError(409, "namespace_in_use", f"namespace {name!r} is the last one served", namespace=name)
    store = engine.store
    run_ids = [r["run_id"] for r in store.select("runs", "namespace = ?", (name,))]
    for run_id in run_ids:
        store.delete_where("events", "run_id = ?", (run_id,))
    deleted = {
        "workflow_runs": store.delete_where("runs", "namespace = ?", (name,)),
        "workflow_schedules": store.delete_where("schedules", "namespace = ?", (name,)),
        "search_attribute_definitions": store.delete_where("kv", "namespace = ? AND kind = 'search_attribute'",
                                                           (name,)),
        "workflow_worker_registrations": store.delete_where("workers", "namespace = ?", (name,)),
    }
    for table in ("wf_tasks", "activities", "timers", "kv", "schedule_events"):
        store.delete_where(table, "namespace = ?", (name,))
    store.delete("namespaces", name)
    refresh(engine)
    engine.notify_everyone()  # long polls in that namespace see it gone and return empty
    return {"name": name, "status": "deleted", "deleted": deleted}


def set_external_storage(engine: Engine, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
    _require(engine, name)
    raise ApiError(422, "external_payload_storage_unsupported",
                   "the dev server keeps payloads inline; external payload storage is not available",
                   namespace=name.lower())


# -- cross-namespace fences ----------------------------------------------------------------------
def reserved_elsewhere(engine: Engine, namespace: str, workflow_id: str) -> bool:
    return bool(engine.store.select("runs", "workflow_id = ? AND namespace != ?", (workflow_id, namespace), limit=1))


def refuse_reserved(workflow_id: str) -> ApiError:
    message = f"Workflow [{workflow_id}] is already reserved in another namespace."
    return ApiError(409, "workflow_id_reserved_in_namespace", message, workflow_id=workflow_id, run_id=None,
                    outcome="rejected_workflow_id_reserved_in_namespace", command_status="rejected",
                    command_source="control_plane", rejection_reason="workflow_id_reserved_in_namespace")


def foreign_refusal(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str]) -> Optional[ApiError]:
    """The refusal for a workflow (or run) that exists, but in another namespace."""
    if run_id is not None:
        found: List[Row] = engine.store.select("runs", "run_id = ? AND namespace != ?", (run_id, namespace), limit=1)
        if found or reserved_elsewhere(engine, namespace, workflow_id):
            return ApiError(404, "run_not_found", f"run {run_id} of workflow {workflow_id} was not found",
                            workflow_id=workflow_id, run_id=run_id)
        return None
    if reserved_elsewhere(engine, namespace, workflow_id):
        return ApiError(404, "instance_not_found", f"workflow {workflow_id} was not found", workflow_id=workflow_id)
    return None
