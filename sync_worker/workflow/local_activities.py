"""Local activities: ``ctx.local_activity(...)`` runs the activity inside the workflow task.

The workflow yields a :class:`RecordLocalActivity`. On first execution the replayer hands it
to the task's :class:`LocalActivityRunner` (the worker's, ``worker.local_activities``), which
runs every attempt in the workflow slot, renewing the workflow task's lease before each one,
and stores the terminal outcome and the list of attempts on the command. The workflow code
gets the result at once (a failure is thrown as :class:`~sync_worker.errors.ActivityFailed`)
and goes on in the same task; the outcome is sent as one ``record_local_activity`` command
(protocol §4.5.1), which the server records as an ``ActivityScheduled`` /
``ActivityCompleted`` (or failed, timed out, cancelled) pair with ``execution_mode: local``.
Replay reads that pair like any activity result and never runs the activity again.

What the published SDK 2.12 refuses without prepared admission (a 1.20 server feature neither
the dev server nor this worker negotiates) is refused here with its messages: a local activity
inside a parallel group or a selection, and an explicit ``cancellation_policy`` (``abandon``
already when the call is built). Replays without a runner (queries, update tasks) stop at a
local activity the history does not hold yet, as the SDK's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Union

from .. import payloads
from ..errors import ActivityFailed, LocalActivityExecutionAborted
from .policies import CancellationPolicy, canonical_policy

__all__ = ["LocalActivityRunner", "RecordLocalActivity", "canonical_local_retry_policy", "refuse_local_in_group"]

_TIMEOUTS = ("start_to_close_timeout", "schedule_to_close_timeout", "heartbeat_timeout")
_RETRY_KEYS = ("max_attempts", "backoff_seconds", "non_retryable_error_types")
_POLICY_REASON = "prepared_local_activity_cancellation_policy_not_supported"


def canonical_local_retry_policy(policy: Mapping[str, Any]) -> Dict[str, Any]:
    """The SDK's local retry dict, validated: ``max_attempts`` 1..100, ``backoff_seconds`` (at most
    one entry per retry) and ``non_retryable_error_types`` (stripped, de-duplicated); nothing else."""
    if not isinstance(policy, Mapping):
        raise TypeError("local activity retry_policy must be an object")
    unknown = sorted(str(key) for key in policy if not isinstance(key, str) or key not in _RETRY_KEYS)
    if unknown:
        raise ValueError(f"local activity retry_policy does not accept {unknown!r}")
    max_attempts = policy.get("max_attempts", 1)
    if type(max_attempts) is not int or not 1 <= max_attempts <= 100:
        raise ValueError("local activity max_attempts must be an integer from 1 to 100")
    backoff = policy.get("backoff_seconds", [])
    if not isinstance(backoff, list) or any(type(value) is not int or value < 0 for value in backoff):
        raise ValueError("local activity backoff_seconds must be a list of non-negative integers")
    if len(backoff) > max_attempts - 1:
        raise ValueError("local activity backoff_seconds exceeds possible retries")
    names = policy.get("non_retryable_error_types", [])
    if not isinstance(names, list) or any(not isinstance(name, str) or not name.strip() for name in names):
        raise ValueError("local activity non_retryable_error_types must be a list of non-empty strings")
    out: Dict[str, Any] = {}
    if "max_attempts" in policy:
        out["max_attempts"] = max_attempts
    if "backoff_seconds" in policy:
        out["backoff_seconds"] = list(backoff)
    if "non_retryable_error_types" in policy:
        out["non_retryable_error_types"] = list(dict.fromkeys(name.strip() for name in names))
    return out


@dataclass
class RecordLocalActivity:
    """Run ``activity_type`` in this workflow worker and record its terminal outcome."""

    activity_type: str
    arguments: List[Any]
    retry_policy: Optional[Mapping[str, Any]] = None
    start_to_close_timeout: Optional[int] = None
    schedule_to_close_timeout: Optional[int] = None
    heartbeat_timeout: Optional[int] = None
    cancellation_policy: Optional[Union[str, CancellationPolicy]] = None
    #: ``{"outcome": ..., "attempts": [...], ...}`` once the runner executed it
    outcome: Optional[Dict[str, Any]] = field(default=None, init=False, repr=False)
    arguments_envelope: Optional[Dict[str, Any]] = field(default=None, init=False, repr=False)
    result_envelope: Optional[Dict[str, Any]] = field(default=None, init=False, repr=False)
    #: what the workflow code was given: the value, or the ActivityFailed it was thrown
    observed: Any = field(default=None, init=False, repr=False, compare=False)
    parallel_path: Optional[List[Dict[str, Any]]] = field(default=None, init=False, repr=False, compare=False)

    shape = "activity"
    blocking = False

    def __post_init__(self) -> None:
        try:
            self.cancellation_policy = canonical_policy(self.cancellation_policy, CancellationPolicy,
                                                        "local activity cancellation_policy")
        except ValueError as error:
            raise ValueError("local activity cancellation_policy must be a supported prepared policy") from error
        if self.cancellation_policy == CancellationPolicy.ABANDON.value:
            raise ValueError("local activity abandon is not supported by prepared callback ownership")
        if not isinstance(self.activity_type, str):
            raise TypeError("local activity type must be a string")
        self.activity_type = self.activity_type.strip()
        if not self.activity_type:
            raise ValueError("local activity type must be a non-empty string")
        self.arguments = list(self.arguments)
        for name in _TIMEOUTS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"local activity {name} must be a positive integer")
        if (self.start_to_close_timeout is not None and self.schedule_to_close_timeout is not None
                and self.start_to_close_timeout > self.schedule_to_close_timeout):
            raise ValueError("local activity schedule_to_close_timeout must be >= start_to_close_timeout")
        if (self.start_to_close_timeout is not None and self.heartbeat_timeout is not None
                and self.heartbeat_timeout > self.start_to_close_timeout):
            raise ValueError("local activity heartbeat_timeout must be <= start_to_close_timeout")
        if self.retry_policy is not None:
            self.retry_policy = canonical_local_retry_policy(self.retry_policy)

    def describe(self) -> str:
        return f"activity:local:{self.activity_type}"

    def check_admissible(self) -> None:
        """Refuse what needs prepared admission (the SDK's check before running anything)."""
        if self.cancellation_policy is not None:
            raise LocalActivityExecutionAborted(
                f"{_POLICY_REASON}: {self.cancellation_policy} requires installed Server discovery and a prepared "
                "consumer")

    def detail_mismatch(self, details: Mapping[str, Any]) -> Optional[str]:
        """Why the recorded step is not this call (None when it is)."""
        if details.get("execution_mode") != "local":
            return "Recorded remote activity cannot replay as a local activity."
        recorded = details.get("activity_type")
        if isinstance(recorded, str) and recorded != self.activity_type:
            return (f"Recorded local activity_type {recorded!r}, but current workflow requested "
                    f"{self.activity_type!r}.")
        wanted = self.cancellation_policy or "try_cancel"
        if details.get("cancellation_policy", "try_cancel") != wanted:
            return (f"local_activity_cancellation_policy_changed: recorded "
                    f"{details.get('cancellation_policy', 'try_cancel')!r}, but current workflow requested {wanted!r}.")
        return None

    def descriptor(self) -> Dict[str, Any]:
        """The command as known before execution (what an outcome report is measured against)."""
        wire: Dict[str, Any] = {"type": "record_local_activity", "activity_type": self.activity_type,
                                "execution_mode": "local",
                                "arguments": self.arguments_envelope or payloads.envelope(list(self.arguments))}
        if self.retry_policy is not None:
            wire["retry_policy"] = dict(self.retry_policy)
        for name in _TIMEOUTS:
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        return wire

    def to_wire(self, task_queue: str) -> Dict[str, Any]:
        if self.cancellation_policy is not None:
            raise LocalActivityExecutionAborted(f"{_POLICY_REASON}: explicit policies require prepared admission")
        if self.outcome is None or self.arguments_envelope is None:
            raise ValueError("local activity has no recorded terminal outcome")
        status = self.outcome.get("outcome")
        if status == "completed" and self.result_envelope is None:
            raise ValueError("completed local activity has no encoded result")
        wire: Dict[str, Any] = {"type": "record_local_activity", "activity_type": self.activity_type,
                                "execution_mode": "local", "arguments": self.arguments_envelope, **self.outcome}
        wire.pop("result", None)
        if status == "completed":
            wire["result"] = self.result_envelope
        if self.retry_policy is not None:
            wire["retry_policy"] = dict(self.retry_policy)
        for name in _TIMEOUTS:
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        if self.parallel_path:
            wire.update(self.parallel_path[-1])
            wire["parallel_group_path"] = [dict(entry) for entry in self.parallel_path]
        return wire

    def same_as_recorded(self, recorded: Any) -> bool:
        """Whether the recorded result is what this execution gave the workflow (sticky resume)."""
        if isinstance(self.observed, ActivityFailed):
            return isinstance(recorded, ActivityFailed) and str(recorded) == str(self.observed)
        if isinstance(recorded, BaseException) or self.result_envelope is None:
            return False
        try:
            return payloads.encode(recorded) == payloads.encode(self.observed)
        except Exception:
            return False


class LocalActivityRunner(Protocol):
    """Runs one workflow task's local activities (the worker supplies it; replay stays pure).

    ``run`` executes every attempt, fills ``command.outcome`` / ``arguments_envelope`` /
    ``result_envelope`` and returns the value, or the bounded :class:`ActivityFailed` the workflow
    is to see. It raises :class:`LocalActivityExecutionAborted` when the task's lease cannot be
    trusted any more (nothing is recorded then).
    """

    def run(self, command: RecordLocalActivity) -> Any: ...

    def begin_replay(self) -> None:
        """A replay of the task starts again: calls are numbered from the first live one."""


def refuse_local_in_group(leaves: List[Any]) -> None:
    """An ordinary group or selection with a local activity needs atomic prepared admission."""
    if any(isinstance(leaf, RecordLocalActivity) for leaf in leaves):
        raise LocalActivityExecutionAborted("local groups require negotiated atomic prepared admission")
