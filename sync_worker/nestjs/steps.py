"""Steps for nestjs-durable: registration, the step context and the pure task → result core.

A nestjs-durable engine dispatches a step by *name* (``ctx.step("payments.charge-card", input)``)
as a JSON task; whichever worker serves that name runs it and answers with a JSON result. This
module knows nothing about brokers: :meth:`StepWorker.process_task` turns one task dict into one
result dict, so a transport only has to deliver tasks and carry results back.

Wire (``reference/nestjs-durable.md`` §1): a task carries ``runId``, ``seq``, ``name``, ``stepId``
(``"<runId>:<seq>"``, stable across retries), ``group``, ``input``, ``attempt`` (from 1) and
optionally ``traceparent``, ``context``, ``transport`` and ``priority``. A result always carries
``runId``, ``seq``, ``stepId``, ``status`` (``completed`` | ``failed``) and ``startedAt`` (epoch ms
of the pickup); ``completed`` adds ``output``, ``failed`` adds ``error`` = ``{message, code?,
retryable?, details?, stack?}``. Only an explicit ``retryable: false`` stops the engine's retries,
so :class:`FatalError` (or any :class:`~sync_worker.errors.NonRetryableError`) sends it and every
other exception leaves the key out.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, TypeVar

from ..errors import InvalidWorkflowDefinition, NonRetryableError
from .bounds import bound_error

__all__ = [
    "Cancelled",
    "FatalError",
    "StepContext",
    "StepWorker",
    "current_step",
    "step_id_of",
]

logger = logging.getLogger("sync_worker.nestjs")

F = TypeVar("F", bound=Callable[..., Any])

_LEVELS = ("debug", "info", "warn", "error")
# How many log events one step may attach to its result (the engine stores them on the checkpoint).
_MAX_EVENTS = 200


class FatalError(NonRetryableError):
    """Fail the step without retries: the result carries ``retryable: false``.

    ``code`` (a string such as ``"card_declined"``) and ``details`` (any JSON value) travel in the
    result's ``error`` object; the engine keeps them on the failed checkpoint.
    """

    def __init__(self, message: str, code: Optional[str] = None, details: Any = None) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[assignment]
        self.details = details


class Cancelled(Exception):
    """The engine asked to cancel the step's run (raised by :meth:`StepContext.raise_if_cancelled`).

    An ordinary exception: the step fails as retryable, and the cancelled run ignores the result.
    """


def step_id_of(task: Mapping[str, Any]) -> str:
    """The task's ``stepId`` (``"<runId>:<seq>"`` when an old engine left it out)."""
    step_id = task.get("stepId")
    return step_id if isinstance(step_id, str) and step_id else f"{task.get('runId')}:{task.get('seq')}"


class StepContext:
    """What a running step knows about itself, and what it can do while it runs.

    ``heartbeat_sync()`` extends the transport's lease on the task (the BullMQ job lock, the SQL
    claim) and tells the engine the step is alive; the worker also renews leases on its own, so
    call it from a long loop to keep liveness tight, not to stay alive. ``cancelled`` turns True
    when the engine publishes a cancel for the run (Redis control channel).
    """

    def __init__(
        self,
        task: Mapping[str, Any],
        *,
        heartbeat: Optional[Callable[[], None]] = None,
        is_cancelled: Optional[Callable[[str], bool]] = None,
        clock: Callable[[], float] = time.time,
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> None:
        self.run_id: str = str(task.get("runId"))
        self.seq: int = int(task.get("seq") or 0)
        self.step_id: str = step_id_of(task)
        self.name: str = str(task.get("name"))
        self.attempt: int = int(task.get("attempt") or 1)
        self.group: Optional[str] = task.get("group") if isinstance(task.get("group"), str) else None
        self.traceparent: Optional[str] = (
            task.get("traceparent") if isinstance(task.get("traceparent"), str) else None
        )
        raw_context = task.get("context")
        #: The engine's opaque per-run context (tenant, user, correlation ids), passed through as is.
        self.context: Dict[str, Any] = dict(raw_context) if isinstance(raw_context, Mapping) else {}
        self.events: List[Dict[str, Any]] = []
        self._heartbeat = heartbeat
        self._is_cancelled = is_cancelled
        self._clock = clock
        self._on_event = on_event

    @property
    def cancelled(self) -> bool:
        return bool(self._is_cancelled is not None and self._is_cancelled(self.run_id))

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled(f"run {self.run_id} was cancelled")

    def heartbeat_sync(self) -> None:
        """Extend the task's lease now and beat the engine's liveness window (no-op without a lease)."""
        if self._heartbeat is not None:
            self._heartbeat()

    def log(self, message: str, level: str = "info", **data: Any) -> None:
        """Attach a log event to the step's result (the engine shows it on the step's checkpoint);
        over Redis it is also streamed live as a ``step.progress`` event."""
        if level not in _LEVELS:
            raise ValueError(f"unknown step log level {level!r}; expected one of {', '.join(_LEVELS)}")
        self._event(level, message, data or None)

    def progress(self, message: str, data: Any = None, *, phase: Optional[str] = None) -> None:
        """Report progress now: an ``info`` event (with ``phase`` when given) streamed at once to the
        engine as ``step.progress`` on the Redis control channel -- an engine built with
        ``controlPlane`` hands it to its subscribers -- and kept on the step's result too."""
        self._event("info", message, data, phase=phase)

    def _event(self, level: str, message: str, data: Any, *, phase: Optional[str] = None) -> None:
        if len(self.events) >= _MAX_EVENTS:
            return
        event: Dict[str, Any] = {"at": int(self._clock() * 1000), "level": level, "message": str(message)}
        if phase is not None:
            event["phase"] = str(phase)
        if data is not None:
            event["data"] = data
        self.events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # live progress is best effort: the event still rides the result
                logger.debug("step %s: the progress sink failed", self.step_id, exc_info=True)

    # The asyncio SDK's spelling: ctx.info("charged", {"amount": 3}).
    def debug(self, message: str, data: Any = None) -> None:
        self._leveled("debug", message, data)

    def info(self, message: str, data: Any = None) -> None:
        self._leveled("info", message, data)

    def warn(self, message: str, data: Any = None) -> None:
        self._leveled("warn", message, data)

    def error(self, message: str, data: Any = None) -> None:
        self._leveled("error", message, data)

    def _leveled(self, level: str, message: str, data: Any) -> None:
        self._event(level, message, data)


_current: contextvars.ContextVar[Optional[StepContext]] = contextvars.ContextVar(
    "sync_worker_nestjs_step", default=None
)


def current_step() -> StepContext:
    """The :class:`StepContext` of the step running in this thread or greenlet."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_step() called outside a nestjs step")
    return ctx


class StepWorker:
    """A registry of step handlers by name, and the pure :meth:`process_task` core.

    ::

        worker = StepWorker()

        @worker.step("payments.charge-card")
        def charge(data):                      # or def charge(data, ctx)
            return {"chargeId": "ch_1"}

    Handlers are plain functions: the worker runs each in its own slot (a thread or a greenlet),
    so blocking I/O is expected. ``async def`` handlers are refused.
    """

    def __init__(self) -> None:
        self._handlers: Dict[str, Callable[..., Any]] = {}
        self._wants_ctx: Dict[str, bool] = {}

    def step(self, name: str) -> Callable[[F], F]:
        """Register the decorated function as the handler of step ``name``."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidWorkflowDefinition("a nestjs step needs a non-empty string name")

        def register(fn: F) -> F:
            self.register(name, fn)
            return fn

        return register

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise InvalidWorkflowDefinition(f"step {name!r}: handler {fn!r} is not callable")
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise InvalidWorkflowDefinition(
                f"step {name!r}: {getattr(fn, '__qualname__', fn)!r} is an async function; sync_worker "
                "runs steps as plain blocking functions (one per slot, thread or greenlet) -- use def"
            )
        if name in self._handlers and self._handlers[name] is not fn:
            raise InvalidWorkflowDefinition(f"step {name!r} is already registered")
        self._handlers[name] = fn
        self._wants_ctx[name] = _wants_ctx(fn)

    @property
    def names(self) -> List[str]:
        """The registered step names, sorted."""
        return sorted(self._handlers)

    def process_task(
        self,
        task: Mapping[str, Any],
        *,
        heartbeat: Optional[Callable[[], None]] = None,
        is_cancelled: Optional[Callable[[str], bool]] = None,
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> Dict[str, Any]:
        """Run the handler of ``task["name"]`` and return the wire result. Never raises for bad input.

        ``on_event`` receives each step event as it happens (the transport streams it live).
        """
        started_at = int(time.time() * 1000)
        base: Dict[str, Any] = {
            "runId": task.get("runId"),
            "seq": task.get("seq"),
            "stepId": step_id_of(task),
            "startedAt": started_at,
        }
        name = task.get("name")
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return {**base, "status": "failed", "error": {"message": f"no handler for {name}", "retryable": False}}
        ctx = StepContext(task, heartbeat=heartbeat, is_cancelled=is_cancelled, on_event=on_event)
        token = _current.set(ctx)
        try:
            args = (task.get("input"), ctx) if self._wants_ctx[str(name)] else (task.get("input"),)
            output = handler(*args)
            result: Dict[str, Any] = {**base, "status": "completed", "output": output}
        except Exception as error:  # a step's failure is data for the engine, never a worker crash
            result = {**base, "status": "failed", "error": error_of(error)}
        finally:
            _current.reset(token)
        if ctx.events:
            result["events"] = list(ctx.events)
        return result


def error_of(error: BaseException) -> Dict[str, Any]:
    """The wire ``error`` object of an exception, bounded in size (failure_reports limits)."""
    body: Dict[str, Any] = {"message": str(error) or type(error).__name__}
    if isinstance(error, NonRetryableError):
        code = getattr(error, "code", None)
        if code is not None:
            body["code"] = str(code)
        body["retryable"] = False
        details = getattr(error, "details", None)
        if details is not None:
            body["details"] = details
    body["stack"] = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return bound_error(body)


def _wants_ctx(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a second positional argument (the step context)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                    inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2
