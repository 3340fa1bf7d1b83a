"""Polled tasks, typed: parsed once where a poll returns (protocol §4.2, §5.2, §6.2).

:func:`parse_task` turns a poll's ``task`` object into an :class:`ActivityTask`,
:class:`WorkflowTask` or :class:`QueryTask`, or raises :class:`MalformedTask` naming every
field the contract says it **must** carry and does not (a task that cannot be run correctly is
never run: an activity without an attempt id would complete with ``activity_attempt_id: ""``).
The parsed task keeps the wire object (``raw``) for the parts other layers read as the contract
defines them (a workflow task's history and resume context, an activity's metadata).

Field aliases live here only: ``activity_attempt_id`` / ``attempt_id``.
"""

from __future__ import annotations

from collections import abc  # isinstance against abc.Mapping: typing.Mapping's check is ~10x slower
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

__all__ = [
    "ActivityTask",
    "MalformedTask",
    "PolledTask",
    "QueryTask",
    "UpdateValidationTask",
    "WorkflowTask",
    "parse_task",
]


class MalformedTask(ValueError):
    """A polled task the worker must not run: ``problems`` says why; what identifies its lease
    (``task_id``, ``attempt``...) is kept, so it can still be reported."""

    def __init__(self, kind: str, problems: List[str], identity: Mapping[str, Any]) -> None:
        super().__init__(f"malformed {kind} task from the server: {'; '.join(problems)}")
        self.kind = kind
        self.problems = list(problems)
        self.identity = dict(identity)


def _text(raw: Mapping[str, Any], *keys: str) -> Optional[str]:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _attempt(raw: Mapping[str, Any], key: str, problems: List[str]) -> int:
    """An optional attempt counter (default 1); a present but invalid one is a problem."""
    if key not in raw:
        return 1
    value = raw.get(key)
    if not isinstance(value, int) or not _positive(value):
        problems.append(f"{key} is not an integer >= 1")
        return 1
    return value


@dataclass(frozen=True)
class ActivityTask:
    """An activity attempt to run (§5.2)."""

    task_id: str
    attempt_id: str
    activity_type: str
    attempt_number: int
    payload_codec: Any
    arguments: Any
    lease_expires_at: Any
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    kind: str = field(default="activity", init=False)

    @property
    def id(self) -> str:
        return self.task_id


@dataclass(frozen=True)
class WorkflowTask:
    """A workflow task to replay (§4.2); the history and resume context stay in ``raw``."""

    task_id: str
    attempt: int
    workflow_type: str
    workflow_id: Optional[str]
    run_id: Optional[str]
    workflow_update_id: Optional[str]
    lease_expires_at: Any
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    kind: str = field(default="workflow", init=False)

    @property
    def id(self) -> str:
        return self.task_id


@dataclass(frozen=True)
class QueryTask:
    """A query to answer by replay (§6.2); a missing type or name is the query path's own answer."""

    query_task_id: str
    attempt: int
    workflow_type: str
    query_name: str
    workflow_id: Optional[str]
    run_id: Optional[str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    kind: str = field(default="query", init=False)

    @property
    def id(self) -> str:
        return self.query_task_id


@dataclass(frozen=True)
class UpdateValidationTask:
    """A validator to run before the server accepts an update (§4.10), from the multiplexed workflow
    poll (``task_kind: "update_validation"``); a missing type or name is the validation path's answer."""

    update_validation_task_id: str
    attempt: int
    workflow_type: str
    update_name: str
    workflow_id: Optional[str]
    run_id: Optional[str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    kind: str = field(default="update_validation", init=False)

    @property
    def id(self) -> str:
        return self.update_validation_task_id


PolledTask = Union[ActivityTask, WorkflowTask, QueryTask, UpdateValidationTask]


def parse_task(kind: str, raw: Any) -> PolledTask:
    """The typed task of a poll of ``kind`` (``workflow``, ``activity``, ``query``); see the module."""
    if not isinstance(raw, abc.Mapping):
        raise MalformedTask(kind, ["the task is not an object"], {})
    problems: List[str] = []
    if kind == "activity":
        # The well-formed task, checked inline (a poll answers one per task): the same rules as below.
        task_id, attempt_id = raw.get("task_id"), raw.get("activity_attempt_id")
        activity_type, number = raw.get("activity_type"), raw.get("attempt_number", 1)
        if type(task_id) is str and task_id and type(attempt_id) is str and attempt_id and type(activity_type) is str \
                and activity_type and type(number) is int and number >= 1:
            return ActivityTask(task_id, attempt_id, activity_type, number, raw.get("payload_codec"),
                                raw.get("arguments"), raw.get("lease_expires_at"), raw)
        task_id, attempt_id = _text(raw, "task_id"), _text(raw, "activity_attempt_id", "attempt_id")
        activity_type = _text(raw, "activity_type")
        for name, value in (("task_id", task_id), ("activity_attempt_id", attempt_id),
                            ("activity_type", activity_type)):
            if value is None:
                problems.append(f"missing {name}")
        number = _attempt(raw, "attempt_number", problems)
        if problems:
            raise MalformedTask(kind, problems, {"task_id": task_id, "activity_attempt_id": attempt_id})
        assert task_id is not None and attempt_id is not None and activity_type is not None
        return ActivityTask(task_id, attempt_id, activity_type, number, raw.get("payload_codec"),
                            raw.get("arguments"), raw.get("lease_expires_at"), raw)
    if kind == "workflow":
        # The well-formed workflow task, checked inline (one per poll): the same rules as below.
        task_id, workflow_type = raw.get("task_id"), raw.get("workflow_type")
        task_kind, attempt = raw.get("task_kind"), raw.get("workflow_task_attempt", 1)
        if (task_kind is None or task_kind == "workflow") and type(task_id) is str and task_id \
                and type(workflow_type) is str and workflow_type and type(attempt) is int and attempt >= 1:
            return WorkflowTask(task_id, attempt, workflow_type, _text(raw, "workflow_id"), _text(raw, "run_id"),
                                _text(raw, "workflow_update_id"), raw.get("lease_expires_at"), raw)
    if kind == "workflow" and raw.get("task_kind") == "update_validation":
        task_id = _text(raw, "update_validation_task_id")
        if task_id is None:
            problems.append("missing update_validation_task_id")
        attempt = _attempt(raw, "update_validation_attempt", problems)
        if problems:
            raise MalformedTask("update_validation", problems,
                                {"update_validation_task_id": task_id, "update_validation_attempt": attempt})
        assert task_id is not None
        return UpdateValidationTask(task_id, attempt, str(raw.get("workflow_type") or ""),
                                    str(raw.get("update_name") or ""), _text(raw, "workflow_id"),
                                    _text(raw, "run_id"), raw)
    if kind == "workflow" and raw.get("task_kind") not in (None, "workflow"):
        raise MalformedTask(kind, [f"unsupported task_kind {raw.get('task_kind')!r}"],
                            {"task_id": _text(raw, "task_id")})
    if kind == "workflow":
        task_id, workflow_type = _text(raw, "task_id"), _text(raw, "workflow_type")
        for name, value in (("task_id", task_id), ("workflow_type", workflow_type)):
            if value is None:
                problems.append(f"missing {name}")
        attempt = _attempt(raw, "workflow_task_attempt", problems)
        if problems:
            raise MalformedTask(kind, problems, {"task_id": task_id, "workflow_task_attempt": attempt})
        assert task_id is not None and workflow_type is not None
        return WorkflowTask(task_id, attempt, workflow_type, _text(raw, "workflow_id"), _text(raw, "run_id"),
                            _text(raw, "workflow_update_id"), raw.get("lease_expires_at"), raw)
    if kind == "query":
        query_task_id = _text(raw, "query_task_id")
        if query_task_id is None:
            problems.append("missing query_task_id")
        attempt = _attempt(raw, "query_task_attempt", problems)
        if problems:
            raise MalformedTask(kind, problems, {"query_task_id": query_task_id, "query_task_attempt": attempt})
        assert query_task_id is not None
        return QueryTask(query_task_id, attempt, str(raw.get("workflow_type") or ""), str(raw.get("query_name") or ""),
                         _text(raw, "workflow_id"), _text(raw, "run_id"), raw)
    raise ValueError(f"unknown task kind {kind!r}")


def task_dict(task: PolledTask) -> Dict[str, Any]:
    """A mutable copy of the wire object (for the pure workflow functions that take one)."""
    return dict(task.raw)
