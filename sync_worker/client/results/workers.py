"""Worker-record results of the operator routes (``durable_workflow`` 2.12 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._common import RawAccess, body_of, dict_list, mapping, opt_int, opt_str, str_list


@dataclass
class WorkerDescription(RawAccess):
    """One registered worker: runtime, capacity, heartbeat and the types it serves."""

    worker_id: str
    task_queue: Optional[str] = None
    runtime: Optional[str] = None
    namespace: Optional[str] = None
    sdk_version: Optional[str] = None
    build_id: Optional[str] = None
    status: Optional[str] = None
    max_concurrent_workflow_tasks: Optional[int] = None
    max_concurrent_activity_tasks: Optional[int] = None
    supported_workflow_types: Optional[List[str]] = None
    supported_activity_types: Optional[List[str]] = None
    last_heartbeat_at: Optional[str] = None
    registered_at: Optional[str] = None
    updated_at: Optional[str] = None
    task_slots: Optional[Dict[str, Optional[int]]] = None
    process_metrics: Optional[Dict[str, Any]] = None
    heartbeat_interval_seconds: Optional[int] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, data: object, *, worker_id: Optional[str] = None) -> WorkerDescription:
        raw = body_of(data)
        workflow_types, activity_types = raw.get("supported_workflow_types"), raw.get("supported_activity_types")
        return cls(
            worker_id=str(raw.get("worker_id") or worker_id or ""), task_queue=opt_str(raw.get("task_queue")),
            runtime=opt_str(raw.get("runtime")), namespace=opt_str(raw.get("namespace")),
            sdk_version=opt_str(raw.get("sdk_version")), build_id=opt_str(raw.get("build_id")),
            status=opt_str(raw.get("status")),
            max_concurrent_workflow_tasks=opt_int(raw.get("max_concurrent_workflow_tasks")),
            max_concurrent_activity_tasks=opt_int(raw.get("max_concurrent_activity_tasks")),
            supported_workflow_types=str_list(workflow_types) if isinstance(workflow_types, list) else None,
            supported_activity_types=str_list(activity_types) if isinstance(activity_types, list) else None,
            last_heartbeat_at=opt_str(raw.get("last_heartbeat_at")), registered_at=opt_str(raw.get("registered_at")),
            updated_at=opt_str(raw.get("updated_at")), task_slots=mapping(raw.get("task_slots")),
            process_metrics=mapping(raw.get("process_metrics")),
            heartbeat_interval_seconds=opt_int(raw.get("heartbeat_interval_seconds")), raw=raw,
        )


@dataclass
class WorkerList(RawAccess):
    """The namespace's worker roster."""

    namespace: Optional[str]
    workers: List[WorkerDescription]
    stale_after_seconds: Optional[int] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, data: object) -> WorkerList:
        raw = body_of(data)
        return cls(namespace=opt_str(raw.get("namespace")),
                   workers=[WorkerDescription.from_dict(item) for item in dict_list(raw.get("workers"))],
                   stale_after_seconds=opt_int(raw.get("stale_after_seconds")), raw=raw)
