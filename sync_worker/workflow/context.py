"""``ctx``: the replay-safe surface passed to ``run(self, ctx, *args)``.

Everything here is deterministic for a given history: ``now()`` is the recorded start
time, ``random()`` / ``uuid4()`` / ``uuid7()`` come from a ``random.Random`` seeded with
``int(sha256(run_id).hexdigest()[:16], 16)`` (the published SDK's seed, so both workers
draw the same values for the same run), and every durable operation is a command object
the workflow yields. ``logger`` stays silent while history is being replayed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import random as _random
import uuid
from datetime import datetime
from typing import Any, Callable, Dict, Generator, Iterator, List, Mapping, Optional, Sequence, Union

from ..errors import NonDeterministicReplayError, SagaCompensationFailed, WorkflowCancelled
from ..worker_session import WorkerSessionOptions
from .commands import (
    ContinueAsNew,
    RecordSideEffect,
    RecordVersionMarker,
    ScheduleActivity,
    StartChildWorkflow,
    StartTimer,
    UpsertMemo,
    UpsertSearchAttributes,
    WaitCondition,
)
from .fingerprints import condition_fingerprint
from .local_activities import RecordLocalActivity
from .output_streams import WorkflowStreamAppendItem, append_directive, finish_directive
from .policies import CancellationPolicy, ParentClosePolicy, RetryPolicyInput
from .scopes import cancellation_scope as _refused_scope
from .select import SelectGroup, select_group
from .streams import MessageStream, StreamInbox
from .unyielded import IssuedCommands

__all__ = ["Saga", "WorkflowContext", "condition_fingerprint"]

_USER_LOGGER = logging.getLogger("sync_worker.workflow.user")


class ReplayLogger:
    """A logger facade that drops records while committed history is being replayed."""

    def __init__(self, inner: logging.Logger) -> None:
        self._inner = inner
        self.replaying = True

    def _log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if not self.replaying:
            self._inner.log(level, msg, *args, **kwargs)

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log(logging.DEBUG, msg, *args, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log(logging.INFO, msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log(logging.WARNING, msg, *args, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log(logging.ERROR, msg, *args, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("exc_info", True)
        self._log(logging.ERROR, msg, *args, **kwargs)


class WorkflowContext:
    """Replay-safe helpers and durable-command factories for one workflow run."""

    def __init__(
        self,
        *,
        workflow_id: str = "",
        run_id: str = "",
        start_time: Optional[datetime] = None,
        clock_error: Optional[str] = None,
        cancel_requested: bool = False,
    ) -> None:
        self._workflow_id = workflow_id
        self._run_id = run_id
        self._start_time = start_time
        self._clock_error = clock_error
        self._cancel_requested = cancel_requested
        self._shield_depth = 0
        # Seeded from the run id at its first use (most workflow tasks never draw from it).
        self._rng: Optional[_random.Random] = None
        self._uuid7_counter = 0
        self.logger = ReplayLogger(_USER_LOGGER)
        # Message-stream state of this replay; the replayer feeds it from history.
        self._streams = StreamInbox()
        #: Commands built and not yet yielded (a forgotten ``yield``: ``unyielded``).
        self._issued = IssuedCommands()
        # Workflow-stream directives (``output_streams``): the task's durable command identity
        # (the replayer sets it per task) and the ordinal of the next directive in this replay.
        self._command_identity = run_id or workflow_id
        self._stream_ordinal = 0

    # -- the replayer's view (not for workflow code) ------------------------------------

    @property
    def stream_inbox(self) -> StreamInbox:
        """The run's message-stream state, fed from history by the replayer."""
        return self._streams

    @property
    def issued_commands(self) -> IssuedCommands:
        """Commands built here and not yet yielded (the replayer releases each yielded one)."""
        return self._issued

    @property
    def command_identity(self) -> str:
        """The durable command identity workflow-stream directives carry (the current task's)."""
        return self._command_identity

    @command_identity.setter
    def command_identity(self, value: Optional[str]) -> None:
        self._command_identity = value or self._run_id or self._workflow_id

    # -- identity and determinism -------------------------------------------------

    @property
    def workflow_id(self) -> str:
        return self._workflow_id

    @property
    def run_id(self) -> str:
        return self._run_id

    def now(self) -> datetime:
        """The run's recorded start time; fixed for the whole run (not "current replay time")."""
        if self._start_time is None:
            raise NonDeterministicReplayError(
                0, "persisted workflow-start clock", [],
                detail=self._clock_error or "Workflow replay clock unavailable: missing persisted start time",
            )
        return self._start_time

    def random(self) -> _random.Random:
        rng = self._rng
        if rng is None:
            rng = self._rng = _random.Random(int(hashlib.sha256(self._run_id.encode()).hexdigest()[:16], 16))
        return rng

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.random().getrandbits(128).to_bytes(16, "big"), version=4)

    def uuid7(self) -> uuid.UUID:
        millis = int(self.now().timestamp() * 1000)
        if not 0 <= millis < (1 << 48):
            raise ValueError("ctx.uuid7() requires ctx.now() within the UUIDv7 timestamp range")
        counter = self._uuid7_counter & 0xFFF
        self._uuid7_counter += 1
        tail = self.random().getrandbits(62)
        return uuid.UUID(int=(millis << 80) | (0x7 << 76) | (counter << 64) | (0x2 << 62) | tail)

    # -- cancellation (as the SDK 2.12 exposes it without protocol-1.20 delivery: ``scopes``) ---

    @property
    def is_cancellation_requested(self) -> bool:
        """The task's ``cancel_requested`` flag (a server that closes runs on ``/cancel`` never sets it)."""
        return self._cancel_requested

    def throw_if_cancellation_requested(self) -> None:
        """Raise ``WorkflowCancelled`` at this safe point if cancellation was requested (not when shielded)."""
        if self._cancel_requested and self._shield_depth == 0:
            raise WorkflowCancelled("workflow cancellation was requested", request_id=None, context=None)

    @property
    def cancellation_context(self) -> Any:
        """Cooperative cancellation metadata; ``None`` (it exists only for a committed 1.20 delivery)."""
        return None

    @contextlib.contextmanager
    def cancellation_shield(self) -> Iterator[None]:
        """Cleanup code inside runs without ``throw_if_cancellation_requested`` raising (nestable)."""
        self._shield_depth += 1
        try:
            yield
        finally:
            self._shield_depth -= 1

    def cancellation_scope(self, body: Callable[[], Any], *, shield_parent: bool = False) -> Generator[Any, Any, Any]:
        """``yield from ctx.cancellation_scope(body)``: refused, as in the SDK 2.12, where scope
        authoring is a disabled candidate (``LocalActivityExecutionAborted``, see ``scopes``)."""
        return _refused_scope(body, shield_parent=shield_parent)

    # -- durable commands ---------------------------------------------------------

    def schedule_activity(
        self,
        activity_type: str,
        arguments: Optional[List[Any]] = None,
        *,
        queue: Optional[str] = None,
        retry_policy: Optional[RetryPolicyInput] = None,
        start_to_close_timeout: Optional[int] = None,
        schedule_to_start_timeout: Optional[int] = None,
        schedule_to_close_timeout: Optional[int] = None,
        heartbeat_timeout: Optional[int] = None,
        cancellation_policy: Optional[Union[str, CancellationPolicy]] = None,
        worker_session: Optional[WorkerSessionOptions] = None,
    ) -> ScheduleActivity:
        """Run an activity on a worker of ``queue``; ``worker_session`` pins it to the worker holding
        that session (docs/sessions.md)."""
        return self._issued.track(ScheduleActivity(
            activity_type=activity_type,
            arguments=list(arguments or []),
            queue=queue,
            retry_policy=retry_policy,
            start_to_close_timeout=start_to_close_timeout,
            schedule_to_start_timeout=schedule_to_start_timeout,
            schedule_to_close_timeout=schedule_to_close_timeout,
            heartbeat_timeout=heartbeat_timeout,
            cancellation_policy=cancellation_policy,
            worker_session=worker_session,
        ))

    def local_activity(
        self,
        activity_type: str,
        arguments: Optional[List[Any]] = None,
        *,
        retry_policy: Optional[Mapping[str, Any]] = None,
        start_to_close_timeout: Optional[int] = None,
        schedule_to_close_timeout: Optional[int] = None,
        heartbeat_timeout: Optional[int] = None,
        cancellation_policy: Optional[Union[str, CancellationPolicy]] = None,
    ) -> RecordLocalActivity:
        """Run ``activity_type`` in this worker, inside the workflow task (``local_activities``).

        ``retry_policy`` is the SDK's dict (``max_attempts`` 1..100, ``backoff_seconds``,
        ``non_retryable_error_types``); a failure after the last attempt raises ``ActivityFailed``.
        """
        return self._issued.track(RecordLocalActivity(
            activity_type, list(arguments or []), retry_policy=retry_policy,
            start_to_close_timeout=start_to_close_timeout, schedule_to_close_timeout=schedule_to_close_timeout,
            heartbeat_timeout=heartbeat_timeout, cancellation_policy=cancellation_policy,
        ))

    def start_timer(self, seconds: int) -> StartTimer:
        return self._issued.track(StartTimer(delay_seconds=int(seconds)))

    def sleep(self, seconds: float) -> StartTimer:
        """A durable timer of ``ceil(seconds)`` whole seconds (never negative)."""
        return self._issued.track(StartTimer(delay_seconds=max(0, math.ceil(seconds))))

    def wait_condition(
        self, predicate: Callable[[], Any], *, key: Optional[str] = None, timeout: Optional[float] = None,
    ) -> WaitCondition:
        """Wait until ``predicate()`` is true (resolves ``True``) or ``timeout`` passes (``False``)."""
        return self._issued.track(WaitCondition(
            predicate=predicate,
            condition_key=key,
            condition_definition_fingerprint=condition_fingerprint(predicate),
            timeout_seconds=None if timeout is None else max(0, math.ceil(timeout)),
        ))

    def start_child_workflow(
        self,
        workflow_type: str,
        arguments: Optional[List[Any]] = None,
        *,
        task_queue: Optional[str] = None,
        parent_close_policy: Optional[Union[str, ParentClosePolicy]] = None,
        cancellation_policy: Optional[Union[str, CancellationPolicy]] = None,
        retry_policy: Optional[RetryPolicyInput] = None,
        execution_timeout_seconds: Optional[int] = None,
        run_timeout_seconds: Optional[int] = None,
    ) -> StartChildWorkflow:
        return self._issued.track(StartChildWorkflow(
            workflow_type=workflow_type,
            arguments=list(arguments or []),
            task_queue=task_queue,
            parent_close_policy=parent_close_policy,
            cancellation_policy=cancellation_policy,
            retry_policy=retry_policy,
            execution_timeout_seconds=execution_timeout_seconds,
            run_timeout_seconds=run_timeout_seconds,
        ))

    def select(self, operations: Union[Mapping[Union[int, str], Any], Sequence[Any]]) -> SelectGroup:
        """Start every operation and wait for the first to finish (``select``): a ``SelectionResult``.

        A mapping keeps its keys; a sequence is keyed by index. Members are activities, timers,
        child workflows and nested lists of them.
        """
        return self._issued.track(select_group(operations))

    def append_workflow_stream(self, stream_name: str, items: Sequence[WorkflowStreamAppendItem], *,
                               max_pending_items: Optional[int] = None) -> RecordSideEffect:
        """Append ``items`` to the run's output stream ``stream_name`` (yield it; resolves ``None``).

        Each item gets the idempotency key ``dw-stream:<identity>:<ordinal>:<index>``, so a
        retried task never appends twice (see ``output_streams``).
        """
        directive = append_directive(self._command_identity, self._stream_ordinal, stream_name, items,
                                     max_pending_items)
        self._stream_ordinal += 1
        return self._issued.track(RecordSideEffect(workflow_stream=directive))

    def close_workflow_stream(self, stream_name: str, *, retention_seconds: Optional[int] = None,
                              ) -> RecordSideEffect:
        """Close the output stream ``stream_name`` (readers then see it terminal)."""
        directive = finish_directive(self._command_identity, self._stream_ordinal, stream_name, None,
                                     retention_seconds)
        self._stream_ordinal += 1
        return self._issued.track(RecordSideEffect(workflow_stream=directive))

    def error_workflow_stream(self, stream_name: str, error_reason: str, *,
                              retention_seconds: Optional[int] = None) -> RecordSideEffect:
        """Mark the output stream ``stream_name`` errored with ``error_reason``."""
        if not error_reason:
            raise ValueError("error_reason must not be empty")
        directive = finish_directive(self._command_identity, self._stream_ordinal, stream_name, error_reason,
                                     retention_seconds)
        self._stream_ordinal += 1
        return self._issued.track(RecordSideEffect(workflow_stream=directive))

    def side_effect(self, fn: Callable[[], Any]) -> RecordSideEffect:
        """Run ``fn`` once on first execution and replay its recorded result afterwards."""
        return self._issued.track(RecordSideEffect(effect=fn))

    def get_version(self, change_id: str, min_supported: int, max_supported: int) -> RecordVersionMarker:
        """New runs record ``max_supported``; runs that passed this point without a marker get -1."""
        return self._issued.track(RecordVersionMarker(change_id, max_supported, min_supported, max_supported))

    def patched(self, change_id: str) -> RecordVersionMarker:
        """``True`` for runs that took the patched path, ``False`` for older ones."""
        return self._issued.track(RecordVersionMarker(change_id, 1, -1, 1, result_kind="patched"))

    def deprecate_patch(self, change_id: str) -> RecordVersionMarker:
        """Keep a patch marker in history after its old branch was deleted (resolves ``None``)."""
        return self._issued.track(RecordVersionMarker(change_id, 1, -1, 1, result_kind="deprecate_patch"))

    def upsert_search_attributes(self, attributes: Dict[str, Any]) -> UpsertSearchAttributes:
        return self._issued.track(UpsertSearchAttributes(attributes=dict(attributes)))

    def upsert_memo(self, entries: Mapping[str, Any]) -> UpsertMemo:
        return self._issued.track(UpsertMemo(entries=dict(entries)))

    def continue_as_new(
        self, *args: Any, workflow_type: Optional[str] = None, task_queue: Optional[str] = None,
    ) -> ContinueAsNew:
        return ContinueAsNew(workflow_type=workflow_type, arguments=list(args), task_queue=task_queue)

    def saga(self) -> Saga:
        return Saga(self)

    def message_stream(self, name: str) -> MessageStream:
        """The run's durable input stream ``name`` (1-128 of ``[A-Za-z0-9._:-]``).

        ``msgs = yield from stream.receive(max_items)`` / ``msg = yield from stream.receive_one()``.
        """
        return MessageStream(self._streams, name)


class _Compensation:
    def __init__(self, command: ScheduleActivity, order: int) -> None:
        self.command = command
        self.order = order


class Saga:
    """Reverse-order compensation built from ordinary activities.

    Register a compensation after its forward step succeeded; on failure
    ``yield from saga.compensate(error)`` runs them newest first and raises
    ``SagaCompensationFailed`` if one of them fails. ``yield from saga.run(forward)``
    does both around a ``forward(saga)`` generator and re-raises the original error.
    """

    def __init__(self, context: WorkflowContext) -> None:
        self._context = context
        self._compensations: List[_Compensation] = []
        self._closed = False

    def add_compensation(
        self,
        activity_type: str,
        arguments: Optional[List[Any]] = None,
        *,
        queue: Optional[str] = None,
        retry_policy: Optional[RetryPolicyInput] = None,
        start_to_close_timeout: Optional[int] = None,
        schedule_to_start_timeout: Optional[int] = None,
        schedule_to_close_timeout: Optional[int] = None,
        heartbeat_timeout: Optional[int] = None,
    ) -> Saga:
        if self._closed:
            raise RuntimeError("cannot register a compensation after saga compensation has started")
        if not isinstance(activity_type, str) or not activity_type.strip():
            raise ValueError("compensation activity_type must be a non-empty string")
        command = self._context.schedule_activity(
            activity_type, list(arguments or []), queue=queue, retry_policy=retry_policy,
            start_to_close_timeout=start_to_close_timeout, schedule_to_start_timeout=schedule_to_start_timeout,
            schedule_to_close_timeout=schedule_to_close_timeout, heartbeat_timeout=heartbeat_timeout,
        )
        self._context._issued.release(command)  # yielded only if the saga compensates
        self._compensations.append(_Compensation(command, len(self._compensations) + 1))
        return self

    def compensate(self, initiating_failure: BaseException) -> Generator[Any, Any, None]:
        """Yield the registered compensations newest first; stop at the first that fails."""
        if self._closed:
            raise RuntimeError("a saga instance can only compensate once")
        self._closed = True
        for compensation in reversed(self._compensations):
            try:
                yield compensation.command
            except (Exception, WorkflowCancelled) as failure:
                raise SagaCompensationFailed(
                    initiating_failure,
                    failure,
                    compensation_activity_type=compensation.command.activity_type,
                    compensation_registration_order=compensation.order,
                ) from failure

    def run(self, forward: Callable[[Saga], Any]) -> Generator[Any, Any, Any]:
        """Run ``forward(saga)``; compensate and re-raise if it fails."""
        if self._closed:
            raise RuntimeError("a saga instance can only be run once")
        try:
            outcome = forward(self)
            if hasattr(outcome, "send"):
                outcome = yield from outcome
            self._closed = True
            return outcome
        except (Exception, WorkflowCancelled) as failure:
            yield from self.compensate(failure)
            raise
