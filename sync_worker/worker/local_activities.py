"""Running a workflow task's local activities (``ctx.local_activity``) in its workflow slot.

One :class:`TaskLocalActivities` per workflow task. The replayer hands it each local activity the
workflow reaches for the first time (``sync_worker.workflow.local_activities``); it runs the
attempts the way the published SDK 2.12 does (``Worker._execute_local_activity``):

* before every attempt the workflow task's lease is renewed (``heartbeat_workflow_task``); a
  renewal the server refuses, or the worker abandoning the task at its drain deadline, aborts the
  task without recording anything (:class:`WorkflowTaskLeaseLost`);
* the activity function runs in the calling slot (a thread, or a greenlet under gevent), through
  the ``execute_activity`` interceptors, with ``activity.context()`` bound to a context whose
  ``heartbeat_sync(details)`` renews the workflow lease and records the heartbeat in the attempt;
* retries follow the SDK's policy dict: ``max_attempts`` (default 1), ``backoff_seconds[i]``
  slept between attempts, ``non_retryable_error_types`` by exception class name, plus
  :class:`NonRetryableError` and cancellation; ``schedule_to_close_timeout`` stops retries;
  timeouts are checked at each boundary (a heartbeat, the return) as the SDK does;
* a terminal failure is bounded (protocol §10) *before* the workflow sees it, and the bounded
  message is marked observed, so the first run and every replay read the same text (seed 000).

Blocking code in a local activity holds only its own workflow slot: other slots, pollers and
activities keep running (threads: its own OS thread; gevent: patched blocking calls yield).
The published SDK calls a synchronous local activity on its event loop instead.

Where we differ from the SDK (documented in docs/workflows.md): a worker that stops gracefully
lets a running local activity finish within the drain deadline (the SDK records it as
cancelled at its next boundary), and at the deadline the task is abandoned unrecorded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import activity as activity_api
from .. import payloads
from ..errors import (
    ActivityCancelled,
    ActivityFailed,
    FailureReportTooLarge,
    LocalActivityExecutionAborted,
    NonRetryableError,
    WorkerShutdown,
)
from ..failure_reports import REQUEST_BYTES, ObservedText, bound_request
from ..interceptors import ActivityInterceptorContext, WorkerInterceptor
from ..protocol import WorkerPlane
from ..runtime.inflight import InflightTask
from ..workflow.local_activities import RecordLocalActivity
from .interception import chain

__all__ = ["LocalActivityContext", "TaskLocalActivities", "WorkflowTaskLeaseLost"]

logger = logging.getLogger("sync_worker.worker.local_activity")

_REPORT_LIMIT = 1000  # heartbeat reports per local activity, as the SDK
_ROUTE = "/worker/workflow-tasks/local/complete"  # where the SDK measures a local failure report


class WorkflowTaskLeaseLost(LocalActivityExecutionAborted):
    """The workflow task's lease could not be renewed or the worker abandoned the task: nothing of
    it may be reported (the task is left to its lease expiry, as the SDK leaves it)."""

    abandon_task = True


class _LocalActivityTimedOut(Exception):
    # The SDK's class name: it is what ``exception_type`` records.
    def __init__(self, kind: str) -> None:
        super().__init__(f"local activity {kind} timeout elapsed")
        self.kind = kind


class _InvalidLocalActivityReport(NonRetryableError):
    def __init__(self, message: str) -> None:
        super().__init__(message)


class LocalActivityContext(activity_api.ActivityContext):
    """``activity.context()`` inside a local activity: a heartbeat renews the workflow task's
    lease and is recorded in the attempt (``attempts[i].heartbeats``)."""

    def __init__(self, *, info: activity_api.ActivityInfo, client: Any,
                 on_heartbeat: Callable[[Optional[Dict[str, Any]]], None]) -> None:
        super().__init__(info=info, client=client)
        self._on_heartbeat = on_heartbeat

    def heartbeat_sync(self, details: Optional[Dict[str, Any]] = None) -> None:
        self._on_heartbeat(details)
        self.heartbeats_sent += 1


class _Attempt:
    def __init__(self, number: int, started: float) -> None:
        self.number = number
        self.started = started
        self.last_heartbeat = started
        self.heartbeats: List[Dict[str, Any]] = []


class TaskLocalActivities:
    """The :class:`~sync_worker.workflow.local_activities.LocalActivityRunner` of one workflow task.

    A replay of the same task that reaches the same call again (a sticky resume that fell back to
    a cold replay) gets the outcome already produced: a local activity runs once per task.
    """

    def __init__(self, *, client: WorkerPlane, task: Mapping[str, Any], activities: Mapping[str, Callable[..., Any]],
                 worker_id: str, task_queue: str, inflight: Optional[InflightTask] = None,
                 interceptors: Sequence[WorkerInterceptor] = (), namespace: Optional[str] = None,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client, self.task, self.activities = client, task, activities
        self.worker_id, self.task_queue, self.namespace = worker_id, task_queue, namespace
        self.inflight, self.interceptors = inflight, interceptors
        self.sleep, self.monotonic = sleep, monotonic
        self.task_id = str(task.get("task_id") or "")
        attempt = task.get("workflow_task_attempt", 1)
        self.task_attempt = attempt if type(attempt) is int and attempt >= 1 else 1
        self._done: List[Tuple[Tuple[str, str], RecordLocalActivity]] = []
        self._next = 0
        self._total_heartbeats = 0
        #: how many attempts ran in this task (for tests and logs)
        self.attempts_run = 0

    # -- the runner protocol -----------------------------------------------------------------

    def begin_replay(self) -> None:
        self._next = 0

    def run(self, command: RecordLocalActivity) -> Any:
        key = (command.activity_type, payloads.encode(list(command.arguments)))
        if self._next < len(self._done) and self._done[self._next][0] == key:
            done = self._done[self._next][1]
            self._next += 1
            command.outcome, command.observed = done.outcome, done.observed
            command.arguments_envelope, command.result_envelope = done.arguments_envelope, done.result_envelope
            return done.observed
        value = self._execute(command)
        command.observed = value
        del self._done[self._next:]
        self._done.append((key, command))
        self._next += 1
        return value

    # -- lease ---------------------------------------------------------------------------------

    def _cancel(self) -> Any:
        return self.inflight.cancel if self.inflight is not None else None

    def renew_lease(self) -> None:
        if self.inflight is not None and self.inflight.abandoned:
            raise WorkflowTaskLeaseLost("worker shutdown abandoned its local workflow claim")
        try:
            response = self.client.heartbeat_workflow_task(self.task_id, lease_owner=self.worker_id,
                                                           workflow_task_attempt=self.task_attempt,
                                                           cancel=self._cancel())
        except WorkerShutdown as error:
            raise WorkflowTaskLeaseLost("worker shutdown abandoned its local workflow claim") from error
        except Exception as error:
            raise WorkflowTaskLeaseLost("workflow task lease renewal failed") from error
        if not isinstance(response, Mapping) or (
                response.get("task_id") not in (None, self.task_id)
                or response.get("lease_owner") not in (None, self.worker_id)
                or response.get("workflow_task_attempt") not in (None, self.task_attempt)
                or response.get("renewed") is False):
            raise WorkflowTaskLeaseLost("workflow task lease renewal was not fenced and acknowledged")

    # -- one local activity --------------------------------------------------------------------

    def _execute(self, command: RecordLocalActivity) -> Any:
        inline = payloads.envelope(list(command.arguments))
        command.arguments_envelope = inline
        json.dumps(command.descriptor(), allow_nan=False)
        policy = command.retry_policy or {}
        max_attempts = int(policy.get("max_attempts", 1))
        backoff: List[int] = list(policy.get("backoff_seconds", []))
        non_retryable_types = set(policy.get("non_retryable_error_types", []))
        scheduled = self.monotonic()
        attempts: List[Dict[str, Any]] = []
        for number in range(1, max_attempts + 1):
            self.renew_lease()
            self.attempts_run += 1
            attempt = _Attempt(number, self.monotonic())
            attempt_id = hashlib.sha256("\0".join((self.task_id, command.activity_type, str(number),
                                                   str(inline["blob"]))).encode("utf-8")).hexdigest()
            try:
                result = self._call(command, attempt, attempt_id, scheduled)
                self._check_boundary(command, attempt, scheduled)
            except LocalActivityExecutionAborted:
                raise
            except (Exception, ActivityCancelled) as error:
                report, retry, delay = self._failed_attempt(command, error, attempt, attempt_id, scheduled,
                                                            max_attempts, backoff, non_retryable_types)
                attempts.append(report)
                if retry:
                    if delay:
                        self._sleep(delay)
                    continue
                return self._terminal(command, report, attempts)
            attempts.append({"attempt_id": attempt_id, "attempt_number": number, "outcome": "completed",
                             "duration_ms": self._elapsed_ms(attempt.started), "heartbeats": attempt.heartbeats})
            try:
                command.result_envelope = payloads.envelope(result)
            except Exception:
                message = "local activity result could not be encoded with the avro payload codec"
                attempts[-1].update({"outcome": "failed", "message": message,
                                     "exception_type": "InvalidLocalActivityReport", "non_retryable": True})
                return self._terminal(command, attempts[-1], attempts)
            command.outcome = {"outcome": "completed", "attempts": attempts}
            return result
        raise AssertionError("local activity retry loop has no terminal outcome")

    def _sleep(self, seconds: float) -> None:
        cancel = self._cancel()
        if cancel is not None:
            if cancel.wait(seconds):
                raise WorkflowTaskLeaseLost("worker shutdown abandoned its local workflow claim")
            return
        self.sleep(seconds)

    def _elapsed_ms(self, since: float) -> int:
        return max(0, round((self.monotonic() - since) * 1000))

    def _check_boundary(self, command: RecordLocalActivity, attempt: _Attempt, scheduled: float) -> None:
        if self.inflight is not None and self.inflight.abandoned:
            raise WorkflowTaskLeaseLost("worker shutdown abandoned its local workflow claim")
        if self.task.get("cancel_requested") is True:
            raise ActivityCancelled("local activity cancelled")
        now = self.monotonic()
        if command.heartbeat_timeout is not None and now - attempt.last_heartbeat > command.heartbeat_timeout:
            raise _LocalActivityTimedOut("heartbeat")
        if command.start_to_close_timeout is not None and now - attempt.started > command.start_to_close_timeout:
            raise _LocalActivityTimedOut("start_to_close")
        if command.schedule_to_close_timeout is not None and now - scheduled > command.schedule_to_close_timeout:
            raise _LocalActivityTimedOut("schedule_to_close")

    def _call(self, command: RecordLocalActivity, attempt: _Attempt, attempt_id: str, scheduled: float) -> Any:
        def heartbeat(details: Optional[Dict[str, Any]]) -> None:
            self._check_boundary(command, attempt, scheduled)
            if len(attempt.heartbeats) >= _REPORT_LIMIT or self._total_heartbeats >= _REPORT_LIMIT:
                raise _InvalidLocalActivityReport("local activity heartbeat report limit exceeded")
            if details is not None:
                if not isinstance(details, dict):
                    raise _InvalidLocalActivityReport("local activity heartbeat details must be an object")
                try:
                    payloads.encode(details)
                    json.dumps(details, allow_nan=False)
                except (TypeError, ValueError, UnicodeError) as error:
                    raise _InvalidLocalActivityReport("local activity heartbeat details are not portable") from error
            self.renew_lease()
            elapsed = self._elapsed_ms(attempt.started)
            previous = attempt.heartbeats[-1]["elapsed_ms"] if attempt.heartbeats else 0
            attempt.heartbeats.append({"elapsed_ms": max(elapsed, previous),
                                       **({"details": details} if details is not None else {})})
            self._total_heartbeats += 1
            attempt.last_heartbeat = self.monotonic()

        self._check_boundary(command, attempt, scheduled)
        fn = self.activities.get(command.activity_type)
        if fn is None:
            raise NonRetryableError(f"no local activity handler registered for {command.activity_type!r}")
        info = activity_api.ActivityInfo(
            task_id=self.task_id, activity_type=command.activity_type, activity_attempt_id=attempt_id,
            attempt_number=attempt.number, task_queue=self.task_queue, worker_id=self.worker_id,
            task_metadata={"workflow_id": self.task.get("workflow_id"), "run_id": self.task.get("run_id")})
        context = LocalActivityContext(info=info, client=self.client, on_heartbeat=heartbeat)
        def call(ctx: ActivityInterceptorContext) -> Any:
            return fn(*ctx.args)

        execute = chain(self.interceptors, "execute_activity", call, none_allowed=True)
        previous = getattr(activity_api._local, "context", None)
        activity_api._set_context(context)
        try:
            return execute(ActivityInterceptorContext(
                worker_id=self.worker_id, task_queue=self.task_queue, task=self.task,
                activity_type=command.activity_type, args=tuple(command.arguments), namespace=self.namespace))
        finally:
            activity_api._set_context(previous)

    def _failed_attempt(self, command: RecordLocalActivity, error: BaseException, attempt: _Attempt,
                        attempt_id: str, scheduled: float, max_attempts: int, backoff: List[int],
                        non_retryable_types: Any) -> Tuple[Dict[str, Any], bool, int]:
        timed_out = isinstance(error, _LocalActivityTimedOut)
        cancelled = isinstance(error, ActivityCancelled)
        exception_type = type(error).__name__
        message = str(error).strip() or f"local activity failed with {exception_type}"
        if len(exception_type.encode("utf-8")) > 255:
            raise LocalActivityExecutionAborted("local activity failure type cannot cross the HTTP boundary")
        non_retryable = cancelled or isinstance(error, NonRetryableError) or exception_type in non_retryable_types
        retry = not non_retryable and attempt.number < max_attempts
        delay = backoff[attempt.number - 1] if retry and len(backoff) >= attempt.number else 0
        if (retry and command.schedule_to_close_timeout is not None
                and self.monotonic() - scheduled + delay >= command.schedule_to_close_timeout):
            retry, delay = False, 0
        status = "cancelled" if cancelled else "timed_out" if timed_out else "failed"
        report: Dict[str, Any] = {"attempt_id": attempt_id, "attempt_number": attempt.number, "outcome": status,
                                  "duration_ms": self._elapsed_ms(attempt.started), "message": message,
                                  "exception_type": exception_type, "non_retryable": non_retryable,
                                  "heartbeats": attempt.heartbeats}
        if isinstance(error, _LocalActivityTimedOut):
            report["timeout_kind"] = error.kind
        if retry:
            report["retry_reason"] = "timeout" if timed_out else "failure"
            report["backoff_seconds"] = delay
        logger.info("local activity %s attempt %d %s: %s%s", command.activity_type, attempt.number, status, message,
                    f" (retry in {delay}s)" if retry else "")
        return report, retry, delay

    def _terminal(self, command: RecordLocalActivity, last: Dict[str, Any],
                  attempts: List[Dict[str, Any]]) -> ActivityFailed:
        """The terminal failure, bounded before the workflow sees it (seed 000)."""
        command.outcome = {"outcome": last["outcome"], "message": last["message"],
                           "exception_type": last["exception_type"], "non_retryable": last["non_retryable"],
                           "attempts": attempts}
        if "timeout_kind" in last:
            command.outcome["timeout_kind"] = last["timeout_kind"]
        frame = {key: value for key, value in command.to_wire(self.task_queue).items() if key != "arguments"}
        body = {"lease_owner": self.worker_id, "workflow_task_attempt": self.task_attempt, "commands": [frame]}
        limit = getattr(self.client, "failure_report_limit", None)
        try:
            bounded = bound_request(_ROUTE, body, limit_bytes=limit() if callable(limit) else REQUEST_BYTES)
        except FailureReportTooLarge as error:
            raise LocalActivityExecutionAborted("local failure report cannot fit before workflow observation") \
                from error
        normalized = bounded["commands"][0]
        outcome = {key: normalized[key] for key in command.outcome}
        outcome["message"] = ObservedText(outcome["message"])
        outcome["attempts"] = [dict(item, message=ObservedText(item["message"])) if "message" in item else item
                               for item in outcome["attempts"]]
        command.outcome = outcome
        return ActivityFailed(outcome["message"], activity_type=command.activity_type,
                              exception_type=last["exception_type"], non_retryable=bool(last["non_retryable"]))
