"""The commands a workflow yields, and their wire shape (protocol §4.5.1).

A workflow never builds these by hand: ``ctx.schedule_activity(...)`` and friends return
them and the workflow yields them. Each command knows its *history shape* (the label the
replayer matches against recorded events, e.g. ``"activity"``) and renders itself with
``to_wire(task_queue)``. Payload values are encoded here as Avro envelopes; wire-time
validation errors (impossible timeouts, unencodable values) surface as ``ValueError`` /
``PayloadEncodeError`` and the task layer reports them as a workflow-task failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union

from .. import payloads
from ..worker_session import WorkerSessionOptions
from .local_activities import RecordLocalActivity

if TYPE_CHECKING:  # (select imports this module)
    from .select import CancelDurableOperation
from .policies import (
    CancellationPolicy,
    ParentClosePolicy,
    RetryPolicyInput,
    canonical_policy,
    retry_policy_wire,
)

__all__ = [
    "Command",
    "CompleteUpdate",
    "CompleteWorkflow",
    "ContinueAsNew",
    "FailUpdate",
    "FailWorkflow",
    "RecordLocalActivity",
    "RecordSideEffect",
    "RecordVersionMarker",
    "ScheduleActivity",
    "StartChildWorkflow",
    "StartTimer",
    "UpsertMemo",
    "UpsertSearchAttributes",
    "WaitCondition",
    "canonical_memo_entries",
]

ParallelPath = List[Dict[str, Any]]


def _positive(name: str, value: Optional[int]) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be >= 1 second")


def _with_parallel_path(wire: Dict[str, Any], path: Optional[ParallelPath]) -> Dict[str, Any]:
    # The innermost group entry is copied to the top level; the full path rides along.
    if path:
        wire.update(path[-1])
        wire["parallel_group_path"] = [dict(entry) for entry in path]
    return wire


@dataclass
class ScheduleActivity:
    """Run an activity on a worker of ``queue`` (default: the workflow worker's queue)."""

    activity_type: str
    arguments: List[Any]
    queue: Optional[str] = None
    retry_policy: Optional[RetryPolicyInput] = None
    start_to_close_timeout: Optional[int] = None
    schedule_to_start_timeout: Optional[int] = None
    schedule_to_close_timeout: Optional[int] = None
    heartbeat_timeout: Optional[int] = None
    cancellation_policy: Optional[Union[str, CancellationPolicy]] = None
    parallel_path: Optional[ParallelPath] = field(default=None, repr=False, compare=False)
    #: pin the activity to a worker session (``WorkerSessionOptions``; docs/sessions.md)
    worker_session: Optional[WorkerSessionOptions] = None

    shape = "activity"
    blocking = True

    def describe(self) -> str:
        return f"activity:{self.activity_type}"

    def validate(self) -> None:
        for name in ("start_to_close_timeout", "schedule_to_start_timeout", "schedule_to_close_timeout",
                     "heartbeat_timeout"):
            _positive(name, getattr(self, name))
        if (self.heartbeat_timeout is not None and self.start_to_close_timeout is not None
                and self.heartbeat_timeout > self.start_to_close_timeout):
            raise ValueError("heartbeat_timeout must be <= start_to_close_timeout")
        if self.schedule_to_close_timeout is not None:
            for name in ("start_to_close_timeout", "schedule_to_start_timeout"):
                value = getattr(self, name)
                if value is not None and value > self.schedule_to_close_timeout:
                    raise ValueError(f"{name} must be <= schedule_to_close_timeout")
        if self.worker_session is not None and not isinstance(self.worker_session, WorkerSessionOptions):
            raise TypeError("worker_session must be a WorkerSessionOptions")

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        self.validate()
        wire: Dict[str, Any] = {
            "type": "schedule_activity",
            "activity_type": self.activity_type,
            "arguments": payloads.envelope(list(self.arguments)),
            "queue": self.queue or task_queue,
        }
        if self.retry_policy is not None:
            wire["retry_policy"] = retry_policy_wire(self.retry_policy)
        for name in ("start_to_close_timeout", "schedule_to_start_timeout", "schedule_to_close_timeout",
                     "heartbeat_timeout"):
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        policy = canonical_policy(self.cancellation_policy, CancellationPolicy, "activity cancellation_policy")
        if policy is not None:
            wire["cancellation_policy"] = policy
        if self.worker_session is not None:
            wire["worker_session"] = self.worker_session.to_wire()
        return _with_parallel_path(wire, self.parallel_path)


@dataclass
class StartTimer:
    """A durable timer of ``delay_seconds`` whole seconds."""

    delay_seconds: int
    parallel_path: Optional[ParallelPath] = field(default=None, repr=False, compare=False)

    shape = "timer"
    blocking = True

    def describe(self) -> str:
        return "timer"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return _with_parallel_path({"type": "start_timer", "delay_seconds": self.delay_seconds}, self.parallel_path)


@dataclass
class StartChildWorkflow:
    """Start a child run of ``workflow_type`` and wait for its result."""

    workflow_type: str
    arguments: List[Any] = field(default_factory=list)
    task_queue: Optional[str] = None
    parent_close_policy: Optional[Union[str, ParentClosePolicy]] = None
    retry_policy: Optional[RetryPolicyInput] = None
    execution_timeout_seconds: Optional[int] = None
    run_timeout_seconds: Optional[int] = None
    cancellation_policy: Optional[Union[str, CancellationPolicy]] = None
    parallel_path: Optional[ParallelPath] = field(default=None, repr=False, compare=False)

    shape = "child workflow"
    blocking = True

    def __post_init__(self) -> None:
        self.policies()

    def describe(self) -> str:
        return f"child workflow:{self.workflow_type}"

    def policies(self) -> Dict[str, str]:
        """The explicitly requested policies, canonicalised (absent ones are omitted)."""
        out: Dict[str, str] = {}
        close = canonical_policy(self.parent_close_policy, ParentClosePolicy, "child workflow parent_close_policy")
        if close is not None:
            out["parent_close_policy"] = close
        cancel = canonical_policy(self.cancellation_policy, CancellationPolicy, "child workflow cancellation_policy")
        if cancel is not None:
            out["cancellation_policy"] = cancel
        return out

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        _positive("execution_timeout_seconds", self.execution_timeout_seconds)
        _positive("run_timeout_seconds", self.run_timeout_seconds)
        if (self.execution_timeout_seconds is not None and self.run_timeout_seconds is not None
                and self.run_timeout_seconds > self.execution_timeout_seconds):
            raise ValueError("run_timeout_seconds must be <= execution_timeout_seconds")
        wire: Dict[str, Any] = {
            "type": "start_child_workflow",
            "workflow_type": self.workflow_type,
            "arguments": payloads.envelope(list(self.arguments)),
            "queue": self.task_queue or task_queue,
        }
        wire.update(self.policies())
        if self.retry_policy is not None:
            wire["retry_policy"] = retry_policy_wire(self.retry_policy)
        if self.execution_timeout_seconds is not None:
            wire["execution_timeout_seconds"] = self.execution_timeout_seconds
        if self.run_timeout_seconds is not None:
            wire["run_timeout_seconds"] = self.run_timeout_seconds
        return _with_parallel_path(wire, self.parallel_path)


@dataclass
class RecordSideEffect:
    """Record the result of a non-deterministic function, run once on first execution."""

    effect: Optional[Callable[[], Any]] = field(default=None, repr=False, compare=False)
    result: Any = None
    #: a workflow-stream directive riding this side effect (``output_streams``), sent as is
    workflow_stream: Optional[Dict[str, Any]] = None

    shape = "side effect"
    blocking = False

    def describe(self) -> str:
        return "side effect"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        # The contract sends a bare blob here, not an envelope.
        wire: Dict[str, Any] = {"type": "record_side_effect"}
        if self.workflow_stream is not None:
            wire["workflow_stream"] = self.workflow_stream
        wire["result"] = payloads.encode(self.result)
        return wire


@dataclass
class RecordVersionMarker:
    """Record (or read back) the code version chosen for ``change_id``."""

    change_id: str
    version: int
    min_supported: int
    max_supported: int
    result_kind: str = "version"  # "version" | "patched" | "deprecate_patch"

    shape = "version marker"
    blocking = False

    def describe(self) -> str:
        return f"version marker:{self.change_id}"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return {
            "type": "record_version_marker",
            "change_id": self.change_id,
            "version": self.version,
            "min_supported": self.min_supported,
            "max_supported": self.max_supported,
        }

    def result_for(self, version: int) -> Any:
        if self.result_kind == "patched":
            return version == 1
        if self.result_kind == "deprecate_patch":
            return None
        return version


@dataclass
class UpsertSearchAttributes:
    """Merge indexed search attributes (a plain JSON object on the wire)."""

    attributes: Dict[str, Any]

    shape = "search attributes upsert"
    blocking = False

    def describe(self) -> str:
        return "search attributes upsert"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return {"type": "upsert_search_attributes", "attributes": dict(self.attributes)}


_MEMO_KEY = re.compile(r"^(?!-?[0-9]+$)[A-Za-z0-9_.:-]{1,64}$")
_MEMO_MAX_ENTRIES = 100
_MEMO_MAX_VALUE_BYTES = 10_240
_MEMO_MAX_TOTAL_BYTES = 65_536


def _sorted_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_value(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_value(item) for item in value]
    return value


def canonical_memo_entries(entries: Mapping[str, Any], *, require_entries: bool = True) -> Dict[str, Any]:
    """Validate memo entries (key pattern, count and Avro size limits) and sort them."""
    if require_entries and not entries:
        raise ValueError("workflow memo updates require at least one entry")
    if len(entries) > _MEMO_MAX_ENTRIES:
        raise ValueError(f"workflow memo updates may contain at most {_MEMO_MAX_ENTRIES} entries")
    out: Dict[str, Any] = {}
    for key in sorted(entries):
        if not isinstance(key, str) or _MEMO_KEY.fullmatch(key) is None:
            raise ValueError(f"workflow memo key {key!r} must match {_MEMO_KEY.pattern}")
        value = _sorted_value(entries[key])
        if len(payloads.encode_bytes(value)) > _MEMO_MAX_VALUE_BYTES:
            raise ValueError(f"workflow memo value {key!r} exceeds the {_MEMO_MAX_VALUE_BYTES}-byte limit")
        out[key] = value
    if len(payloads.encode_bytes(out)) > _MEMO_MAX_TOTAL_BYTES:
        raise ValueError(f"workflow memo update exceeds the {_MEMO_MAX_TOTAL_BYTES}-byte total limit")
    return out


@dataclass
class UpsertMemo:
    """Merge non-indexed memo entries; a ``None`` value deletes its key."""

    entries: Dict[str, Any]

    shape = "memo upsert"
    blocking = False

    def __post_init__(self) -> None:
        self.entries = canonical_memo_entries(self.entries)

    def describe(self) -> str:
        return "memo upsert"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return {"type": "upsert_memo", "entries": payloads.envelope(self.entries)}


@dataclass
class WaitCondition:
    """Block until ``predicate()`` is true (``True``) or ``timeout_seconds`` pass (``False``)."""

    predicate: Callable[[], Any]
    condition_key: Optional[str] = None
    condition_definition_fingerprint: Optional[str] = None
    timeout_seconds: Optional[int] = None

    shape = "condition wait"
    blocking = True

    def describe(self) -> str:
        return "condition wait"

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        wire: Dict[str, Any] = {"type": "open_condition_wait"}
        if self.condition_key is not None:
            wire["condition_key"] = self.condition_key
        if self.condition_definition_fingerprint is not None:
            wire["condition_definition_fingerprint"] = self.condition_definition_fingerprint
        if self.timeout_seconds is not None:
            wire["timeout_seconds"] = self.timeout_seconds
        return wire


@dataclass
class ContinueAsNew:
    """Close this run and start a fresh one with new arguments (yield or return it)."""

    workflow_type: Optional[str] = None
    arguments: List[Any] = field(default_factory=list)
    task_queue: Optional[str] = None

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        wire: Dict[str, Any] = {"type": "continue_as_new"}
        if self.workflow_type is not None:
            wire["workflow_type"] = self.workflow_type
        wire["arguments"] = payloads.envelope(list(self.arguments))
        wire["queue"] = self.task_queue or task_queue
        return wire


@dataclass
class CompleteWorkflow:
    """Terminal: the run completed with ``result``."""

    result: Any

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return {"type": "complete_workflow", "result": payloads.envelope(self.result)}


@dataclass
class FailWorkflow:
    """Terminal: the workflow code raised; the run fails with this diagnostic."""

    message: str
    exception_type: Optional[str] = None
    exception_class: Optional[str] = None
    exception: Optional[Dict[str, Any]] = None
    non_retryable: bool = False
    failed_step_sequence: Optional[int] = None
    failed_activity_execution_id: Optional[str] = None

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        wire: Dict[str, Any] = {"type": "fail_workflow", "message": self.message}
        if self.exception_type is not None:
            wire["exception_type"] = self.exception_type
        if self.exception_class is not None:
            wire["exception_class"] = self.exception_class
        if self.exception is not None:
            wire["exception"] = self.exception
        if self.non_retryable:
            wire["non_retryable"] = True
        if self.failed_step_sequence is not None and self.failed_activity_execution_id is not None:
            wire["failed_step_sequence"] = self.failed_step_sequence
            wire["failed_activity_execution_id"] = self.failed_activity_execution_id
        return wire


@dataclass
class CompleteUpdate:
    """Answer of an update-application task: the handler returned ``result``."""

    update_id: str
    result: Any

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        return {"type": "complete_update", "update_id": self.update_id, "result": payloads.envelope(self.result)}


@dataclass
class FailUpdate:
    """Answer of an update-application task: the update could not be applied."""

    update_id: str
    message: str
    exception_type: Optional[str] = None
    exception_class: Optional[str] = None
    non_retryable: bool = True

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        wire: Dict[str, Any] = {"type": "fail_update", "update_id": self.update_id, "message": self.message}
        if self.exception_type is not None:
            wire["exception_type"] = self.exception_type
        if self.exception_class is not None:
            wire["exception_class"] = self.exception_class
        if self.non_retryable:
            wire["non_retryable"] = True
        return wire


Command = Union[
    ScheduleActivity, StartTimer, StartChildWorkflow, RecordSideEffect, RecordVersionMarker,
    UpsertSearchAttributes, UpsertMemo, WaitCondition, ContinueAsNew, CompleteWorkflow, FailWorkflow,
    CompleteUpdate, FailUpdate, RecordLocalActivity, "CancelDurableOperation",
]
"""Everything a replay can produce."""

#: Commands that take part in replay matching (have a history shape).
STEP_TYPES = (ScheduleActivity, StartTimer, StartChildWorkflow, RecordSideEffect, RecordVersionMarker,
              UpsertSearchAttributes, UpsertMemo, WaitCondition, RecordLocalActivity)
