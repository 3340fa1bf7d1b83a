"""Result dataclasses of the standalone-activity routes (``durable_workflow`` 2.12 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._common import RawAccess, body_of, decode_payload, mapping, opt_int, opt_str


@dataclass
class StandaloneActivityExecution(RawAccess):
    """One standalone activity: its host run's state and the activity execution's, in one record.

    ``failure`` (not in the published SDK) is the reported failure (``type``, ``message``,
    ``non_retryable``, ...) when the server includes it.
    """

    activity_id: str
    workflow_run_id: Optional[str]
    activity_execution_id: Optional[str]
    workflow_type: str
    activity_type: Optional[str]
    activity_class: Optional[str]
    task_queue: Optional[str]
    namespace: Optional[str]
    status: Optional[str]
    activity_status: Optional[str]
    closed_reason: Optional[str]
    business_key: Optional[str]
    payload_codec: Optional[str]
    started_at: Optional[str]
    closed_at: Optional[str]
    last_progress_at: Optional[str]
    last_heartbeat_at: Optional[str]
    schedule_to_start_deadline_at: Optional[str]
    schedule_to_close_deadline_at: Optional[str]
    attempt_count: Optional[int]
    result: Any = None
    failure: Optional[Dict[str, Any]] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, activity_id: Optional[str] = None,
                  decode: bool = True) -> StandaloneActivityExecution:
        raw = body_of(data)
        codec = opt_str(raw.get("payload_codec"))
        result = raw.get("result")
        if decode and result is not None:
            result = decode_payload(result, codec)
        if isinstance(result, dict) and "blob" in result:
            result = None  # not asked to decode: never hand out an envelope as a value
        if raw.get("result") is not None:
            raw = {**raw, "result": result}  # obj["result"] is the value, as sync_worker 0.1's dict had it
        return cls(
            activity_id=str(raw.get("activity_id") or activity_id or ""),
            workflow_run_id=opt_str(raw.get("workflow_run_id")),
            activity_execution_id=opt_str(raw.get("activity_execution_id")),
            workflow_type=str(raw.get("workflow_type") or ""),
            activity_type=opt_str(raw.get("activity_type")),
            activity_class=opt_str(raw.get("activity_class")),
            task_queue=opt_str(raw.get("task_queue")),
            namespace=opt_str(raw.get("namespace")),
            status=opt_str(raw.get("status")),
            activity_status=opt_str(raw.get("activity_status")),
            closed_reason=opt_str(raw.get("closed_reason")),
            business_key=opt_str(raw.get("business_key")),
            payload_codec=codec,
            started_at=opt_str(raw.get("started_at")),
            closed_at=opt_str(raw.get("closed_at")),
            last_progress_at=opt_str(raw.get("last_progress_at")),
            last_heartbeat_at=opt_str(raw.get("last_heartbeat_at")),
            schedule_to_start_deadline_at=opt_str(raw.get("schedule_to_start_deadline_at")),
            schedule_to_close_deadline_at=opt_str(raw.get("schedule_to_close_deadline_at")),
            attempt_count=opt_int(raw.get("attempt_count")),
            result=result,
            failure=mapping(raw.get("failure")),
            raw=raw,
        )


@dataclass
class StandaloneActivityList(RawAccess):
    """One page of standalone activities."""

    activities: List[StandaloneActivityExecution]
    activity_count: int
    next_page_token: Optional[str] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: object) -> StandaloneActivityList:
        raw = body_of(data)
        items = [StandaloneActivityExecution.from_dict(item, decode=False) for item in raw.get("activities") or []
                 if isinstance(item, dict)]
        count = opt_int(raw.get("activity_count"))
        return cls(activities=items, activity_count=count if count is not None else len(items),
                   next_page_token=opt_str(raw.get("next_page_token")), raw=raw)
