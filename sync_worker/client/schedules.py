"""Schedules: create, list, describe, update, pause, resume, trigger, backfill, delete, history.

Signatures follow ``durable_workflow.sync`` 2.12; ``spec`` and ``action`` may also be given
in their dict form. The action's ``input`` is sent as an Avro envelope.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Union

from .. import payloads
from .base import ClientBase, segment
from .handles import ScheduleHandle
from .results import (
    ScheduleAction,
    ScheduleBackfillResult,
    ScheduleDescription,
    ScheduleHistoryEvent,
    ScheduleHistoryPage,
    ScheduleList,
    ScheduleSpec,
    ScheduleTriggerResult,
)
from .results._common import body_of, dict_list
from .results.schedules import action_from, spec_from
from .transport import RetryMode

SpecLike = Union[ScheduleSpec, Dict[str, Any]]
ActionLike = Union[ScheduleAction, Dict[str, Any]]


def _options(body: Dict[str, Any], **values: Any) -> Dict[str, Any]:
    body.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in values.items() if v is not None})
    return body


class SchedulesMixin(ClientBase):
    """Schedule routes."""

    def get_schedule_handle(self, schedule_id: str) -> ScheduleHandle:
        """A handle for an existing schedule (no request is made)."""
        return ScheduleHandle(self, schedule_id)  # type: ignore[arg-type]

    def create_schedule(
        self,
        *,
        schedule_id: Optional[str] = None,
        spec: SpecLike,
        action: ActionLike,
        overlap_policy: Optional[str] = None,
        jitter_seconds: Optional[int] = None,
        max_runs: Optional[int] = None,
        memo: Optional[Dict[str, Any]] = None,
        search_attributes: Optional[Dict[str, Any]] = None,
        paused: bool = False,
        note: Optional[str] = None,
    ) -> ScheduleHandle:
        """Create a schedule (``overlap_policy``: skip, buffer_one, buffer_all, cancel_other, ...)."""
        spec_value, action_value = spec_from(spec), action_from(action)
        assert spec_value is not None and action_value is not None
        body: Dict[str, Any] = {"spec": spec_value.to_dict(),
                                "action": action_value.to_dict(input_encoder=payloads.envelope)}
        _options(body, schedule_id=schedule_id, overlap_policy=overlap_policy, jitter_seconds=jitter_seconds,
                 max_runs=max_runs, memo=memo, search_attributes=search_attributes)
        if paused:
            body["paused"] = True
        _options(body, note=note)
        response = body_of(self._call("control", "POST", "/schedules", route="/schedules", body=body,
                                      retry=RetryMode.CONNECT_ONLY, operation="schedule.create"))
        return ScheduleHandle(self, str(response.get("schedule_id") or schedule_id or ""))  # type: ignore[arg-type]

    def list_schedules(self, *, status: Optional[str] = None, workflow_type: Optional[str] = None,
                       query: Optional[str] = None, page_size: Optional[int] = None,
                       next_page_token: Optional[str] = None) -> ScheduleList:
        """One page of schedules; filters combine with AND."""
        body = body_of(self._call("control", "GET", "/schedules", route="/schedules", params={
            "status": status, "workflow_type": workflow_type, "query": query, "page_size": page_size,
            "next_page_token": next_page_token}, operation="schedule.list"))
        token = body.get("next_page_token")
        return ScheduleList([ScheduleDescription.from_dict(item) for item in dict_list(body.get("schedules"))],
                            token if isinstance(token, str) else None)

    def describe_schedule(self, schedule_id: str) -> ScheduleDescription:
        """A schedule, its status and fire counters."""
        body = self._call("control", "GET", f"/schedules/{segment(schedule_id)}", route="/schedules/{id}",
                          operation="schedule.describe")
        return ScheduleDescription.from_dict(body, schedule_id=schedule_id)

    def update_schedule(self, schedule_id: str, *, spec: Optional[SpecLike] = None,
                        action: Optional[ActionLike] = None, overlap_policy: Optional[str] = None,
                        jitter_seconds: Optional[int] = None, max_runs: Optional[int] = None,
                        memo: Optional[Dict[str, Any]] = None, search_attributes: Optional[Dict[str, Any]] = None,
                        note: Optional[str] = None) -> None:
        """Change the given fields of a schedule (``None`` leaves a field as it is)."""
        spec_value, action_value = spec_from(spec), action_from(action)
        body: Dict[str, Any] = {}
        if spec_value is not None:
            body["spec"] = spec_value.to_dict()
        if action_value is not None:
            body["action"] = action_value.to_dict(input_encoder=payloads.envelope)
        _options(body, overlap_policy=overlap_policy, jitter_seconds=jitter_seconds, max_runs=max_runs, memo=memo,
                 search_attributes=search_attributes, note=note)
        self._call("control", "PUT", f"/schedules/{segment(schedule_id)}", route="/schedules/{id}", body=body,
                   operation="schedule.update")

    def pause_schedule(self, schedule_id: str, *, note: Optional[str] = None) -> None:
        """Stop a schedule firing until resumed (running workflows go on)."""
        self._action(schedule_id, "pause", _options({}, note=note))

    def resume_schedule(self, schedule_id: str, *, note: Optional[str] = None) -> None:
        """Let a paused schedule fire again."""
        self._action(schedule_id, "resume", _options({}, note=note))

    def trigger_schedule(self, schedule_id: str, *, overlap_policy: Optional[str] = None) -> ScheduleTriggerResult:
        """Fire a schedule now (``overlap_policy`` overrides it for this fire only)."""
        response = self._action(schedule_id, "trigger", _options({}, overlap_policy=overlap_policy))
        return ScheduleTriggerResult.from_dict(response, schedule_id=schedule_id)

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; workflows it started are not touched."""
        self._call("control", "DELETE", f"/schedules/{segment(schedule_id)}", route="/schedules/{id}",
                   operation="schedule.delete")

    def backfill_schedule(self, schedule_id: str, *, start_time: str, end_time: str,
                          overlap_policy: Optional[str] = None) -> ScheduleBackfillResult:
        """Fire for every moment of ``[start_time, end_time)`` (ISO-8601) the schedule would have."""
        body = _options({"start_time": start_time, "end_time": end_time}, overlap_policy=overlap_policy)
        response = self._action(schedule_id, "backfill", body)
        return ScheduleBackfillResult.from_dict(response, schedule_id=schedule_id)

    def get_schedule_history(self, schedule_id: str, *, limit: Optional[int] = None,
                             after_sequence: Optional[int] = None) -> ScheduleHistoryPage:
        """One page of a schedule's audit stream, oldest first (also after the schedule is deleted)."""
        if limit is not None and limit < 1:
            raise ValueError("limit must be >= 1")
        if after_sequence is not None and after_sequence < 0:
            raise ValueError("after_sequence must be >= 0")
        body = self._call("control", "GET", f"/schedules/{segment(schedule_id)}/history",
                          route="/schedules/{id}/history", params={"limit": limit, "after_sequence": after_sequence},
                          operation="schedule.history")
        return ScheduleHistoryPage.from_dict(body, schedule_id=schedule_id)

    def iter_schedule_history(self, schedule_id: str, *, limit: Optional[int] = None,
                              after_sequence: Optional[int] = None) -> Iterator[ScheduleHistoryEvent]:
        """Every audit event of a schedule, paging as needed."""
        cursor = after_sequence
        while True:
            page = self.get_schedule_history(schedule_id, limit=limit, after_sequence=cursor)
            yield from page.events
            if not page.has_more or page.next_cursor is None or page.next_cursor == cursor:
                return
            cursor = page.next_cursor

    def _action(self, schedule_id: str, action: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return body_of(self._call("control", "POST", f"/schedules/{segment(schedule_id)}/{action}",
                                  route=f"/schedules/{{id}}/{action}", body=body,
                                  retry=RetryMode.CONNECT_ONLY, operation=f"schedule.{action}"))
