"""Task-queue visibility and build-id rollout results (``durable_workflow`` 2.12 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from ._common import RawAccess, body_of, dict_list, mapping, opt_int, opt_str, str_list


def _typed(cls: Any, data: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of dataclass ``cls`` read from ``data``, each kept only when its JSON type fits."""
    out: Dict[str, Any] = {}
    for item in fields(cls):
        value = data.get(item.name)
        kind = str(item.type)
        if "bool" in kind:
            out[item.name] = value if isinstance(value, bool) else None
        elif "int" in kind:
            out[item.name] = opt_int(value)
        else:
            out[item.name] = opt_str(value)
    return out


@dataclass
class TaskQueueTaskAdmission:
    """Workflow- or activity-task admission budgets of one queue."""

    status: Optional[str] = None
    budget_source: Optional[str] = None
    server_budget_source: Optional[str] = None
    active_worker_count: Optional[int] = None
    configured_slot_count: Optional[int] = None
    leased_count: Optional[int] = None
    ready_count: Optional[int] = None
    available_slot_count: Optional[int] = None
    server_max_active_leases_per_queue: Optional[int] = None
    server_active_lease_count: Optional[int] = None
    server_remaining_active_lease_capacity: Optional[int] = None
    server_max_active_leases_per_namespace: Optional[int] = None
    server_namespace_active_lease_count: Optional[int] = None
    server_remaining_namespace_active_lease_capacity: Optional[int] = None
    server_max_dispatches_per_minute: Optional[int] = None
    server_dispatch_count_this_minute: Optional[int] = None
    server_remaining_dispatch_capacity: Optional[int] = None
    server_max_dispatches_per_minute_per_namespace: Optional[int] = None
    server_namespace_dispatch_count_this_minute: Optional[int] = None
    server_remaining_namespace_dispatch_capacity: Optional[int] = None
    server_dispatch_budget_group: Optional[str] = None
    server_max_dispatches_per_minute_per_budget_group: Optional[int] = None
    server_budget_group_dispatch_count_this_minute: Optional[int] = None
    server_remaining_budget_group_dispatch_capacity: Optional[int] = None
    server_lock_required: Optional[bool] = None
    server_lock_supported: Optional[bool] = None

    @classmethod
    def from_dict(cls, data: object) -> Optional[TaskQueueTaskAdmission]:
        return cls(**_typed(cls, data)) if isinstance(data, dict) else None


@dataclass
class TaskQueueQueryAdmission:
    """Query-task admission of one queue."""

    status: Optional[str] = None
    budget_source: Optional[str] = None
    max_pending_per_queue: Optional[int] = None
    approximate_pending_count: Optional[int] = None
    remaining_pending_capacity: Optional[int] = None
    lock_required: Optional[bool] = None
    lock_supported: Optional[bool] = None

    @classmethod
    def from_dict(cls, data: object) -> Optional[TaskQueueQueryAdmission]:
        return cls(**_typed(cls, data)) if isinstance(data, dict) else None


@dataclass
class TaskQueueAdmission:
    """Admission budgets for workflow, activity and query tasks."""

    workflow_tasks: Optional[TaskQueueTaskAdmission] = None
    activity_tasks: Optional[TaskQueueTaskAdmission] = None
    query_tasks: Optional[TaskQueueQueryAdmission] = None
    raw: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, data: object) -> TaskQueueAdmission:
        raw = body_of(data)
        return cls(workflow_tasks=TaskQueueTaskAdmission.from_dict(raw.get("workflow_tasks")),
                   activity_tasks=TaskQueueTaskAdmission.from_dict(raw.get("activity_tasks")),
                   query_tasks=TaskQueueQueryAdmission.from_dict(raw.get("query_tasks")), raw=raw)


@dataclass
class TaskQueueDescription(RawAccess):
    """Backlog, pollers, leases and admission of one task queue."""

    name: str
    namespace: Optional[str] = None
    stats: Optional[Dict[str, Any]] = None
    admission: Optional[TaskQueueAdmission] = None
    pollers: Optional[List[Dict[str, Any]]] = None
    current_leases: Optional[List[Dict[str, Any]]] = None
    raw: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, data: object) -> TaskQueueDescription:
        raw = body_of(data)
        pollers, leases = raw.get("pollers"), raw.get("current_leases")
        return cls(name=str(raw.get("name") or ""), namespace=opt_str(raw.get("namespace")),
                   stats=mapping(raw.get("stats")), admission=TaskQueueAdmission.from_dict(raw.get("admission")),
                   pollers=dict_list(pollers) if isinstance(pollers, list) else None,
                   current_leases=dict_list(leases) if isinstance(leases, list) else None, raw=raw)


@dataclass
class TaskQueueList:
    """The namespace's task queues."""

    namespace: Optional[str]
    task_queues: List[TaskQueueDescription]

    @classmethod
    def from_dict(cls, data: object) -> TaskQueueList:
        raw = body_of(data)
        return cls(namespace=opt_str(raw.get("namespace")),
                   task_queues=[TaskQueueDescription.from_dict(item) for item in dict_list(raw.get("task_queues"))])


@dataclass
class TaskQueueBuildIdCohort:
    """The workers of one build id on a queue (``build_id`` ``None``: the unversioned ones)."""

    build_id: Optional[str]
    rollout_status: str
    active_worker_count: int
    draining_worker_count: int
    stale_worker_count: int
    total_worker_count: int
    runtimes: List[str]
    sdk_versions: List[str]
    last_heartbeat_at: Optional[str] = None
    first_seen_at: Optional[str] = None
    drain_intent: Optional[str] = None
    drained_at: Optional[str] = None
    promoted_at: Optional[str] = None
    rolled_back_at: Optional[str] = None
    new_start_selected: bool = False
    workflow_definition_fingerprint_count: int = 0
    workflow_definition_fingerprint_conflicts: Optional[List[Dict[str, Any]]] = None
    raw: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> TaskQueueBuildIdCohort:
        conflicts = data.get("workflow_definition_fingerprint_conflicts")
        return cls(
            build_id=opt_str(data.get("build_id")), rollout_status=str(data.get("rollout_status") or ""),
            active_worker_count=opt_int(data.get("active_worker_count")) or 0,
            draining_worker_count=opt_int(data.get("draining_worker_count")) or 0,
            stale_worker_count=opt_int(data.get("stale_worker_count")) or 0,
            total_worker_count=opt_int(data.get("total_worker_count")) or 0,
            runtimes=str_list(data.get("runtimes")), sdk_versions=str_list(data.get("sdk_versions")),
            last_heartbeat_at=opt_str(data.get("last_heartbeat_at")), first_seen_at=opt_str(data.get("first_seen_at")),
            drain_intent=opt_str(data.get("drain_intent")), drained_at=opt_str(data.get("drained_at")),
            promoted_at=opt_str(data.get("promoted_at")), rolled_back_at=opt_str(data.get("rolled_back_at")),
            new_start_selected=bool(data.get("new_start_selected")),
            workflow_definition_fingerprint_count=opt_int(data.get("workflow_definition_fingerprint_count")) or 0,
            workflow_definition_fingerprint_conflicts=dict_list(conflicts) if isinstance(conflicts, list) else None,
            raw=data,
        )


@dataclass
class TaskQueueBuildIdRollout:
    """Every build-id cohort of one queue."""

    namespace: Optional[str]
    task_queue: str
    stale_after_seconds: Optional[int]
    build_ids: List[TaskQueueBuildIdCohort]

    @classmethod
    def from_dict(cls, data: object) -> TaskQueueBuildIdRollout:
        raw = body_of(data)
        return cls(namespace=opt_str(raw.get("namespace")), task_queue=str(raw.get("task_queue") or ""),
                   stale_after_seconds=opt_int(raw.get("stale_after_seconds")),
                   build_ids=[TaskQueueBuildIdCohort.from_dict(item) for item in dict_list(raw.get("build_ids"))])


@dataclass
class TaskQueueBuildIdRolloutState(RawAccess):
    """The operator intent recorded for one (queue, build id) by drain, promote or resume."""

    namespace: Optional[str]
    task_queue: str
    build_id: Optional[str]
    drain_intent: str
    drained_at: Optional[str]
    promoted_at: Optional[str] = None
    rolled_back_at: Optional[str] = None
    new_start_selected: bool = False
    deployment: Optional[Dict[str, Any]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, data: object) -> TaskQueueBuildIdRolloutState:
        raw = body_of(data)
        return cls(namespace=opt_str(raw.get("namespace")), task_queue=str(raw.get("task_queue") or ""),
                   build_id=opt_str(raw.get("build_id")), drain_intent=str(raw.get("drain_intent") or ""),
                   drained_at=opt_str(raw.get("drained_at")), promoted_at=opt_str(raw.get("promoted_at")),
                   rolled_back_at=opt_str(raw.get("rolled_back_at")),
                   new_start_selected=bool(raw.get("new_start_selected")),
                   deployment=mapping(raw.get("deployment")), raw=raw)
