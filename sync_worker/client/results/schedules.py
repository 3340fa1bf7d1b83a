"""Schedule requests (``ScheduleSpec``, ``ScheduleAction``) and results, as ``durable_workflow`` 2.12 names them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ... import payloads
from ._common import RawAccess, body_of, dict_list, mapping, opt_int, opt_str


@dataclass
class ScheduleSpec:
    """When a schedule fires: cron expressions and/or ISO-8601 intervals (``{"every": "PT30M"}``)."""

    cron_expressions: Optional[List[str]] = None
    intervals: Optional[List[Dict[str, str]]] = None
    timezone: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {}
        if self.cron_expressions is not None:
            body["cron_expressions"] = list(self.cron_expressions)
        if self.intervals is not None:
            body["intervals"] = [dict(item) for item in self.intervals]
        if self.timezone is not None:
            body["timezone"] = self.timezone
        return body


@dataclass
class ScheduleAction:
    """The workflow start a schedule issues each time it fires."""

    workflow_type: str
    task_queue: Optional[str] = None
    input: Optional[List[Any]] = None
    execution_timeout_seconds: Optional[int] = None
    run_timeout_seconds: Optional[int] = None

    def to_dict(self, *, input_encoder: Optional[Callable[[List[Any]], Any]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"workflow_type": self.workflow_type}
        if self.task_queue is not None:
            body["task_queue"] = self.task_queue
        if self.input is not None:
            body["input"] = (input_encoder or payloads.envelope)(list(self.input))
        if self.execution_timeout_seconds is not None:
            body["execution_timeout_seconds"] = self.execution_timeout_seconds
        if self.run_timeout_seconds is not None:
            body["run_timeout_seconds"] = self.run_timeout_seconds
        return body


def spec_from(value: Any) -> Optional[ScheduleSpec]:
    """A ``ScheduleSpec`` from a spec or its dict form (``None`` passes through)."""
    if value is None or isinstance(value, ScheduleSpec):
        return value
    if isinstance(value, dict):
        return ScheduleSpec(cron_expressions=value.get("cron_expressions"), intervals=value.get("intervals"),
                            timezone=value.get("timezone"))
    raise TypeError(f"spec must be a ScheduleSpec or a dict, not {type(value).__name__}")


def action_from(value: Any) -> Optional[ScheduleAction]:
    """A ``ScheduleAction`` from an action or its dict form (``None`` passes through)."""
    if value is None or isinstance(value, ScheduleAction):
        return value
    if isinstance(value, dict):
        if not value.get("workflow_type"):
            raise ValueError("a schedule action needs workflow_type")
        return ScheduleAction(
            workflow_type=str(value["workflow_type"]), task_queue=value.get("task_queue"),
            input=value.get("input"), execution_timeout_seconds=value.get("execution_timeout_seconds"),
            run_timeout_seconds=value.get("run_timeout_seconds"))
    raise TypeError(f"action must be a ScheduleAction or a dict, not {type(value).__name__}")


@dataclass
class ScheduleDescription(RawAccess):
    """A schedule and its recent firing state."""

    schedule_id: str
    status: Optional[str] = None
    spec: Optional[Dict[str, Any]] = None
    action: Optional[Dict[str, Any]] = None
    overlap_policy: Optional[str] = None
    note: Optional[str] = None
    memo: Optional[Dict[str, Any]] = None
    search_attributes: Optional[Dict[str, Any]] = None
    jitter_seconds: Optional[int] = None
    max_runs: Optional[int] = None
    remaining_actions: Optional[int] = None
    fires_count: int = 0
    failures_count: int = 0
    next_fire_at: Optional[str] = None
    last_fired_at: Optional[str] = None
    latest_workflow_instance_id: Optional[str] = None
    paused_at: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    info: Optional[Dict[str, Any]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, schedule_id: Optional[str] = None) -> ScheduleDescription:
        raw = body_of(data)
        return cls(
            schedule_id=str(raw.get("schedule_id") or schedule_id or ""),
            status=opt_str(raw.get("status")),
            spec=mapping(raw.get("spec")),
            action=mapping(raw.get("action")),
            overlap_policy=opt_str(raw.get("overlap_policy")),
            note=opt_str(raw.get("note")),
            memo=mapping(raw.get("memo")),
            search_attributes=mapping(raw.get("search_attributes")),
            jitter_seconds=opt_int(raw.get("jitter_seconds")),
            max_runs=opt_int(raw.get("max_runs")),
            remaining_actions=opt_int(raw.get("remaining_actions")),
            fires_count=opt_int(raw.get("fires_count")) or 0,
            failures_count=opt_int(raw.get("failures_count")) or 0,
            next_fire_at=opt_str(raw.get("next_fire_at")),
            last_fired_at=opt_str(raw.get("last_fired_at")),
            latest_workflow_instance_id=opt_str(raw.get("latest_workflow_instance_id")),
            paused_at=opt_str(raw.get("paused_at")),
            created_at=opt_str(raw.get("created_at")),
            updated_at=opt_str(raw.get("updated_at")),
            info=mapping(raw.get("info")),
            raw=raw,
        )


@dataclass
class ScheduleList:
    """One page of schedules."""

    schedules: List[ScheduleDescription]
    next_page_token: Optional[str] = None


@dataclass
class ScheduleTriggerResult(RawAccess):
    """What a manual trigger did (``triggered``, ``skipped``, ``buffered``...)."""

    schedule_id: str
    outcome: str
    workflow_id: Optional[str] = None
    run_id: Optional[str] = None
    reason: Optional[str] = None
    buffer_depth: Optional[int] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, schedule_id: str) -> ScheduleTriggerResult:
        raw = body_of(data)
        return cls(schedule_id=str(raw.get("schedule_id") or schedule_id), outcome=str(raw.get("outcome") or ""),
                   workflow_id=opt_str(raw.get("workflow_id")), run_id=opt_str(raw.get("run_id")),
                   reason=opt_str(raw.get("reason")), buffer_depth=opt_int(raw.get("buffer_depth")), raw=raw)


@dataclass
class ScheduleBackfillResult(RawAccess):
    """How many past fires a backfill attempted, and each one's outcome."""

    schedule_id: str
    outcome: str
    fires_attempted: int = 0
    results: Optional[List[Dict[str, Any]]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, schedule_id: str) -> ScheduleBackfillResult:
        raw = body_of(data)
        results = raw.get("results")
        return cls(schedule_id=str(raw.get("schedule_id") or schedule_id), outcome=str(raw.get("outcome") or ""),
                   fires_attempted=opt_int(raw.get("fires_attempted")) or 0,
                   results=dict_list(results) if isinstance(results, list) else None, raw=raw)


@dataclass
class ScheduleHistoryEvent:
    """One entry of a schedule's audit stream (ScheduleCreated, ScheduleTriggered, ...)."""

    sequence: int
    event_type: Optional[str] = None
    recorded_at: Optional[str] = None
    workflow_instance_id: Optional[str] = None
    workflow_run_id: Optional[str] = None
    payload: Optional[Dict[str, Any]] = None
    id: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ScheduleHistoryEvent:
        return cls(sequence=opt_int(data.get("sequence")) or 0, event_type=opt_str(data.get("event_type")),
                   recorded_at=opt_str(data.get("recorded_at")),
                   workflow_instance_id=opt_str(data.get("workflow_instance_id")),
                   workflow_run_id=opt_str(data.get("workflow_run_id")), payload=mapping(data.get("payload")),
                   id=opt_str(data.get("id")))


@dataclass
class ScheduleHistoryPage:
    """One page of a schedule's audit stream; ask again with ``after_sequence=next_cursor`` while ``has_more``."""

    schedule_id: str
    events: List[ScheduleHistoryEvent]
    has_more: bool = False
    next_cursor: Optional[int] = None
    namespace: Optional[str] = None

    @classmethod
    def from_dict(cls, data: object, *, schedule_id: str) -> ScheduleHistoryPage:
        raw = body_of(data)
        cursor = raw.get("next_cursor")
        try:
            next_cursor = None if cursor is None else int(cursor)
        except (TypeError, ValueError):
            next_cursor = None
        return cls(schedule_id=str(raw.get("schedule_id") or schedule_id),
                   events=[ScheduleHistoryEvent.from_dict(item) for item in dict_list(raw.get("events"))],
                   has_more=bool(raw.get("has_more")), next_cursor=next_cursor,
                   namespace=opt_str(raw.get("namespace")))
