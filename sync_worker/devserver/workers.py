"""Worker registrations: register, heartbeat, fenced and legacy deregistration, operator views."""

from __future__ import annotations

import re
import secrets
from typing import Any, Dict, List, Optional

from . import tasks
from .engine import Engine
from .store import LEASED_WF_TASKS, Row
from .util import ApiError, iso, require_str

_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def _key(namespace: str, worker_id: str) -> str:
    return f"{namespace}\0{worker_id}"


def _status(engine: Engine, worker: Row) -> str:
    if worker["status"] != "active":
        return str(worker["status"])
    if engine.now() - worker["last_seen_at"] > engine.config.stale_after_seconds:
        return "stale"
    return "active"


def view(engine: Engine, worker: Row) -> Dict[str, Any]:
    fields = ("worker_id", "namespace", "task_queue", "runtime", "sdk_version", "build_id",
              "supported_workflow_types", "supported_activity_types", "capabilities", "task_slots",
              "process_metrics", "max_concurrent_workflow_tasks", "max_concurrent_activity_tasks",
              "max_concurrent_worker_sessions")
    out = {k: worker.get(k) for k in fields}
    out.update({"status": _status(engine, worker), "registered_at": iso(worker["registered_at"]),
                "last_heartbeat_at": iso(worker.get("last_heartbeat_at")),
                "updated_at": iso(worker.get("last_heartbeat_at") or worker["registered_at"]),
                "heartbeat_interval_seconds": engine.config.heartbeat_interval_seconds,
                "stale_after_seconds": engine.config.stale_after_seconds})
    return out


def register(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    worker_id = require_str(body, "worker_id")
    task_queue = require_str(body, "task_queue")
    assert worker_id is not None and task_queue is not None
    fingerprints = body.get("workflow_definition_fingerprints") or {}
    if not isinstance(fingerprints, dict):
        raise ApiError(422, "validation_failed", "workflow_definition_fingerprints must be an object",
                       errors={"workflow_definition_fingerprints": ["must be an object"]},
                       validation_errors={"workflow_definition_fingerprints": ["must be an object"]})
    existing = engine.store.get("workers", _key(namespace, worker_id))
    if existing is not None and _status(engine, existing) == "active":
        for wf_type, fingerprint in fingerprints.items():
            old = (existing.get("fingerprints") or {}).get(wf_type)
            if old is not None and old != fingerprint:
                raise ApiError(409, "workflow_definition_changed",
                               f"worker {worker_id} is active with a different definition of {wf_type!r}",
                               worker_id=worker_id, workflow_type=wf_type)
    ts = engine.now()
    worker: Row = {
        "key": _key(namespace, worker_id), "namespace": namespace, "worker_id": worker_id, "task_queue": task_queue,
        "runtime": body.get("runtime"), "sdk_version": body.get("sdk_version"), "build_id": body.get("build_id"),
        "supported_workflow_types": body.get("supported_workflow_types") or [],
        "supported_activity_types": body.get("supported_activity_types") or [],
        "capabilities": body.get("capabilities") or [], "fingerprints": fingerprints,
        "workflow_command_contracts": _contracts(body.get("workflow_command_contracts")),
        # which lists the registration sent (an empty one routes nothing; an absent one, anything)
        "declared_types": [k for k in ("supported_workflow_types", "supported_activity_types")
                           if isinstance(body.get(k), list)],
        "task_slots": body.get("task_slots"), "process_metrics": body.get("process_metrics"),
        "max_concurrent_workflow_tasks": body.get("max_concurrent_workflow_tasks"),
        "max_concurrent_activity_tasks": body.get("max_concurrent_activity_tasks"),
        "max_concurrent_worker_sessions": body.get("max_concurrent_worker_sessions"),
        "registration_token": secrets.token_hex(16), "status": "active", "registered_at": ts,
        "last_heartbeat_at": None, "last_seen_at": ts,
    }
    engine.store.put("workers", worker)
    return {"worker_id": worker_id, "registered": True, "registration_token": worker["registration_token"],
            "namespace": namespace, "task_queue": task_queue,
            "heartbeat_interval_seconds": engine.config.heartbeat_interval_seconds,
            "stale_after_seconds": engine.config.stale_after_seconds}


def _contracts(raw: Any) -> Dict[str, Any]:
    """``workflow_command_contracts`` as registered: workflow type -> its signal / query / update contract."""
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, dict)}


def heartbeat(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    worker_id = require_str(body, "worker_id")
    assert worker_id is not None
    worker = engine.store.get("workers", _key(namespace, worker_id))
    if worker is None or worker["status"] != "active":
        raise ApiError(404, "worker_not_registered", f"worker {worker_id} is not registered", worker_id=worker_id)
    ts = engine.now()
    worker["last_heartbeat_at"] = ts
    worker["last_seen_at"] = ts
    for key in ("task_slots", "process_metrics"):
        if body.get(key) is not None:
            worker[key] = body[key]
    engine.store.put("workers", worker)
    return {"worker_id": worker_id, "acknowledged": True,
            "heartbeat_interval_seconds": engine.config.heartbeat_interval_seconds,
            "stale_after_seconds": engine.config.stale_after_seconds}


# A poll refreshes ``last_seen_at`` at most this often (a quarter of the staleness window when that
# is shorter): liveness needs seconds of precision, and rewriting the row on every poll was a
# write per request.
TOUCH_EVERY_SECONDS = 2.0


def touch(engine: Engine, namespace: str, worker_id: Any) -> Optional[Row]:
    """Polls count as liveness for an already registered worker; returns its row (``None`` if unknown).

    The caller holds a transaction; the row is rewritten only when the throttle says so, so most
    polls cost one read here.
    """
    if not isinstance(worker_id, str):
        return None
    worker = peek(engine, namespace, worker_id)
    if worker is None or worker["status"] != "active":
        return worker
    ts = engine.now()
    every = min(TOUCH_EVERY_SECONDS, engine.config.stale_after_seconds / 4.0)
    if ts - float(worker.get("last_seen_at") or 0) >= every:
        worker = {**worker, "last_seen_at": ts}  # the row peek shares stays as stored
        engine.store.put("workers", worker)
    return worker


def may_lease(engine: Engine, namespace: str, worker_id: str) -> bool:
    """A worker that deregistered gets no new leases (its recovered tasks must go elsewhere)."""
    worker = lookup(engine, namespace, worker_id)
    return worker is None or worker["status"] == "active"


def lookup(engine: Engine, namespace: str, worker_id: Any) -> Optional[Row]:
    """The worker's registration row, or ``None`` (never registered here)."""
    if not isinstance(worker_id, str):
        return None
    return engine.store.get("workers", _key(namespace, worker_id))


def peek(engine: Engine, namespace: str, worker_id: Any) -> Optional[Row]:
    """:func:`lookup` for a reader that does not change the row (a poll's check of its worker, every
    round): decoded once while the row stays the same (``Store.get_shared``). Never mutate it."""
    if not isinstance(worker_id, str):
        return None
    return engine.store.get_shared("workers", _key(namespace, worker_id))


def _recover(engine: Engine, namespace: str, worker_id: str) -> int:
    leased = engine.store.select("wf_tasks", f"namespace = ? AND {LEASED_WF_TASKS}", (namespace,))
    count = 0
    for task in leased:
        if task.get("lease_owner") == worker_id:
            tasks.requeue(engine, task)
            count += 1
    return count


def deregister_fenced(engine: Engine, namespace: str, worker_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    token = body.get("registration_token")
    if not isinstance(token, str) or not _TOKEN.match(token):
        raise ApiError(422, "validation_failed", "registration_token must be 32 lowercase hex characters",
                       errors={"registration_token": ["must be 32 lowercase hex characters"]},
                       validation_errors={"registration_token": ["must be 32 lowercase hex characters"]})
    receipt_key = f"{namespace}\0dereg\0{worker_id}\0{token}"
    stored = engine.store.get("kv", receipt_key)
    if stored is not None:
        return dict(stored["receipt"])
    worker = engine.store.get("workers", _key(namespace, worker_id))
    if worker is None:
        raise ApiError(404, "worker_not_found", f"worker {worker_id} is not registered", worker_id=worker_id)
    if worker["registration_token"] != token or worker["status"] != "active":
        raise ApiError(409, "registration_token_mismatch",
                       f"registration token does not match the live registration of {worker_id}",
                       worker_id=worker_id)
    receipt = {"worker_id": worker_id, "outcome": "deregistered",
               "recovered_workflow_task_count": _recover(engine, namespace, worker_id),
               "registration_token": token}
    worker["status"] = "deregistered"
    worker["deregistered_at"] = engine.now()
    engine.store.put("workers", worker)
    _sessions_lost(engine, namespace, worker_id)
    engine.store.put("kv", {"key": receipt_key, "namespace": namespace, "kind": "dereg", "receipt": receipt})
    return receipt


def deregister_legacy(engine: Engine, namespace: str, worker_id: str) -> Dict[str, Any]:
    worker = engine.store.get("workers", _key(namespace, worker_id))
    if worker is None or worker["status"] != "active":
        raise ApiError(404, "worker_not_found", f"worker {worker_id} is not registered", worker_id=worker_id)
    count = _recover(engine, namespace, worker_id)
    worker["status"] = "deregistered"
    worker["deregistered_at"] = engine.now()
    engine.store.put("workers", worker)
    _sessions_lost(engine, namespace, worker_id)
    return {"worker_id": worker_id, "outcome": "deregistered", "recovered_workflow_task_count": count}


def _sessions_lost(engine: Engine, namespace: str, worker_id: str) -> None:
    """A deregistered worker holds no session any more: they are orphaned at once (``sessions``)."""
    from . import sessions  # sessions reads registrations through this module

    sessions.holder_gone(engine, namespace, worker_id)


def list_workers(engine: Engine, namespace: str, task_queue: Optional[str], status: Optional[str]) -> Dict[str, Any]:
    rows: List[Dict[str, Any]] = []
    for worker in engine.store.select("workers", "namespace = ?", (namespace,), order="worker_id"):
        item = view(engine, worker)
        if task_queue and item["task_queue"] != task_queue:
            continue
        if status and item["status"] != status:
            continue
        rows.append(item)
    return {"workers": rows, "namespace": namespace, "stale_after_seconds": engine.config.stale_after_seconds}


def get_worker(engine: Engine, namespace: str, worker_id: str) -> Dict[str, Any]:
    worker = engine.store.get("workers", _key(namespace, worker_id))
    if worker is None:
        raise ApiError(404, "worker_not_found", f"worker {worker_id} was not found", worker_id=worker_id)
    return view(engine, worker)
