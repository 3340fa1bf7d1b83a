"""The replay context of a Python-authored nestjs-durable workflow, and its errors.

The engine owns the run; a worker replays the workflow function from the top on every *turn*
against the run's history and returns the commands it produced. Each ``ctx`` operation takes the
next *seq* (0, 1, 2, ... in call order) -- the determinism anchor -- and either finds its outcome
in the history (and returns it, or raises :class:`StepFailed`) or, for a blocking operation, emits
its command and suspends the turn. ``now`` and ``side_effect`` run inline once and emit a
``recordStep``, which the engine persists, so later turns replay the recorded value.

History entries, as the engine builds them (``WorkflowEngine.remoteHistory`` in
``@dudousxd/nestjs-durable-core`` 0.62.0): ``{seq, kind, name?, output?, error?}`` where ``kind``
is ``call`` (a dispatched step, named), ``step`` (a recorded local step, named ``now#<seq>`` or
``sideEffect``), ``timer`` (an elapsed sleep, named ``sleep:<seq>``), ``signal`` and ``child``
(both unnamed). Only resolved operations appear: a step still running or a timer not yet due is
absent, so re-emitting its command is how a replay says "still waiting" (the engine skips a
``call`` whose checkpoint exists).

Commands: ``call {seq, name, group, input}``, ``recordStep {seq, name, output | error,
startedAt, finishedAt}``, ``sleep {seq, ms}``, ``waitSignal {seq, signal}``, ``startChild {seq,
workflow, input}``.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional

from ..errors import DurableWorkflowError
from .bounds import bound_error

__all__ = [
    "NondeterminismError",
    "StepFailed",
    "WorkflowCancelled",
    "WorkflowContext",
    "WorkflowError",
    "error_dict",
]

#: The code an engine (and the published SDK) gives a broken deploy; ``onError`` routing skips it.
NON_DETERMINISM = "non_determinism"


class WorkflowError(DurableWorkflowError):
    """A misuse of the workflow API (an invalid argument, a bad registration)."""


class NondeterminismError(WorkflowError):
    """The history does not match what this replay produced at a seq: the workflow code changed
    under a run already in flight. The turn fails the run (``code = "non_determinism"``)."""

    code = NON_DETERMINISM


class StepFailed(DurableWorkflowError):
    """A step, child run or ``side_effect`` the workflow waited on failed. Catch it to compensate.

    ``error`` is the engine's error object (``message``, and ``code``, ``retryable``, ``details``
    when the step set them); ``message``, ``code`` and ``details`` read it.
    """

    def __init__(self, error: Optional[Mapping[str, Any]]) -> None:
        self.error: Dict[str, Any] = dict(error) if isinstance(error, Mapping) else {"message": "step failed"}
        super().__init__(str(self.error.get("message") or "step failed"))

    @property
    def message(self) -> str:
        return str(self.error.get("message") or "step failed")

    @property
    def code(self) -> Optional[str]:
        code = self.error.get("code")
        return None if code is None else str(code)

    @property
    def details(self) -> Any:
        return self.error.get("details")


class WorkflowCancelled(DurableWorkflowError):
    """The engine cancelled the run; raised at the next operation so the turn ends ``cancelled``."""


class _Suspended(BaseException):
    """Ends a turn at the first unresolved blocking operation.

    A BaseException (like ``GeneratorExit``) so an ``except Exception`` in workflow code cannot
    swallow the suspension and run on past an operation whose outcome it does not have.
    """


def error_dict(error: BaseException) -> Dict[str, Any]:
    """The wire ``error`` of an exception a workflow raised: message, code/details when set, stack."""
    body: Dict[str, Any] = {"message": str(error) or type(error).__name__}
    code = getattr(error, "code", None)
    if code:
        body["code"] = str(code)
    details = getattr(error, "details", None)
    if details is not None:
        body["details"] = details
    body["stack"] = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return bound_error(body)


def _now_ms() -> int:
    return int(time.time() * 1000)


class WorkflowContext:
    """What a workflow function gets as ``ctx``: deterministic, blocking operations.

    Same code and same history give the same seqs and the same commands. Operations must be called
    in a deterministic order (no wall clock, randomness or I/O outside ``now``/``side_effect``
    deciding which operation comes next).
    """

    def __init__(
        self,
        task: Mapping[str, Any],
        *,
        partition: Optional[str] = None,
        is_cancelled: Optional[Callable[[str], bool]] = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.run_id: str = str(task.get("runId"))
        self.workflow: str = str(task.get("workflow"))
        self.workflow_version: Optional[str] = (
            str(task["workflowVersion"]) if task.get("workflowVersion") is not None else None)
        self.attempt: int = int(task.get("attempt") or 1)
        self.task_id: Optional[str] = task.get("taskId") if isinstance(task.get("taskId"), str) else None
        self._partition = partition
        self._is_cancelled = is_cancelled
        self._clock = clock
        self._history: Dict[int, Dict[str, Any]] = {}
        for entry in task.get("history") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get("seq"), int):
                self._history[int(entry["seq"])] = dict(entry)
        self._signals: Dict[int, Dict[str, Any]] = {}
        for pending in task.get("pendingSignals") or []:
            if isinstance(pending, Mapping) and isinstance(pending.get("seq"), int):
                self._signals[int(pending["seq"])] = dict(pending)
        self._seq = 0
        #: The commands this turn produced, in order.
        self.commands: List[Dict[str, Any]] = []
        #: Set when the history contradicts the code (kept even if workflow code catches the error).
        self.nondeterminism: Optional[NondeterminismError] = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the engine cancelled this run (the next operation ends the turn)."""
        return bool(self._is_cancelled is not None and self._is_cancelled(self.run_id))

    @property
    def is_replaying(self) -> bool:
        """True while the next operation's outcome is already in the history."""
        return self._seq in self._history

    @property
    def seq(self) -> int:
        """The seq the next operation will take."""
        return self._seq

    def unconsumed_history(self) -> List[int]:
        """History seqs this replay never reached: the recorded run did operations this code did not."""
        return sorted(seq for seq in self._history if seq >= self._seq)

    # -- internals -----------------------------------------------------------------------------

    def _next(self) -> int:
        if self.cancelled:
            raise WorkflowCancelled(f"run {self.run_id} was cancelled")
        seq = self._seq
        self._seq += 1
        return seq

    def _recorded(self, seq: int, kind: str, name: Optional[str]) -> Optional[Dict[str, Any]]:
        entry = self._history.get(seq)
        if entry is None:
            return None
        recorded_name = entry.get("name")
        if entry.get("kind") != kind or (name is not None and recorded_name is not None and recorded_name != name):
            error = NondeterminismError(
                f"workflow {self.workflow}, run {self.run_id}: the history has {entry.get('kind')} "
                f"{recorded_name!r} at seq {seq}, but this code reached {kind} {name!r} there -- the workflow "
                "changed under a run in flight")
            if self.nondeterminism is None:
                self.nondeterminism = error
            raise error
        return entry

    def _outcome(self, entry: Dict[str, Any]) -> Any:
        if entry.get("error") is not None:
            raise StepFailed(entry["error"])
        return entry.get("output")

    def _suspend(self, command: Dict[str, Any]) -> None:
        self.commands.append(command)
        raise _Suspended()

    def _local(self, name: str, body: Callable[[], Any]) -> Any:
        seq = self._next()
        entry = self._recorded(seq, "step", name)
        if entry is not None:
            return self._outcome(entry)
        started = self._clock()
        try:
            value = body()
        except Exception as error:
            failure = error_dict(error)
            self.commands.append({"kind": "recordStep", "seq": seq, "name": name, "error": failure,
                                  "startedAt": started, "finishedAt": self._clock()})
            raise StepFailed(failure) from error
        self.commands.append({"kind": "recordStep", "seq": seq, "name": name, "output": value,
                              "startedAt": started, "finishedAt": self._clock()})
        return value

    # -- the workflow API ----------------------------------------------------------------------

    def step(self, name: str, input: Any = None, *, group: Optional[str] = None) -> Any:
        """Run the step ``name`` on whichever worker serves it (TypeScript or Python) and return its
        output; a failed step raises :class:`StepFailed`.

        ``group`` is the step's partition (the engine routes to ``<name>@<group>``); by default the
        worker's own partition, else the bare ``<name>`` queue (sent as ``"default"``).
        """
        if not isinstance(name, str) or not name:
            raise WorkflowError("ctx.step needs a step name")
        seq = self._next()
        entry = self._recorded(seq, "call", name)
        if entry is not None:
            return self._outcome(entry)
        partition = group if group is not None else (self._partition or "default")
        self._suspend({"kind": "call", "seq": seq, "name": name, "group": partition, "input": input})

    def now(self) -> int:
        """Epoch milliseconds, read once and replayed (a recorded local step ``now#<seq>``)."""
        return int(self._local(f"now#{self._seq}", self._clock))

    def side_effect(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` once, record its (JSON) value and replay it without calling ``fn`` again.

        For ids, random draws, environment reads. An exception raised by ``fn`` is recorded too and
        raises :class:`StepFailed` now and on every replay.
        """
        if not callable(fn):
            raise WorkflowError("ctx.side_effect needs a callable")
        return self._local("sideEffect", fn)

    def sleep(self, ms: float) -> None:
        """A durable timer: the run suspends and the engine resumes it ``ms`` milliseconds later."""
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            raise WorkflowError(f"ctx.sleep needs a non-negative number of milliseconds, not {ms!r}")
        seq = self._next()
        if self._recorded(seq, "timer", None) is not None:
            return
        self._suspend({"kind": "sleep", "seq": seq, "ms": int(ms) if float(ms).is_integer() else ms})

    def wait_signal(self, name: str) -> Any:
        """Wait for the signal ``name`` (``engine.signal(name, payload)``) and return its payload."""
        if not isinstance(name, str) or not name:
            raise WorkflowError("ctx.wait_signal needs a signal name")
        seq = self._next()
        entry = self._recorded(seq, "signal", None)
        if entry is not None:
            return self._outcome(entry)
        pending = self._signals.get(seq)
        if pending is not None and pending.get("signal") in (None, name):
            return pending.get("payload")
        self._suspend({"kind": "waitSignal", "seq": seq, "signal": name})

    def start_child(self, workflow: str, input: Any = None) -> Any:
        """Start the child run ``workflow`` and wait for its output (a failed child raises
        :class:`StepFailed`). The engine names the child ``<runId>.child.<seq>``."""
        if not isinstance(workflow, str) or not workflow:
            raise WorkflowError("ctx.start_child needs a workflow name")
        seq = self._next()
        entry = self._recorded(seq, "child", None)
        if entry is not None:
            return self._outcome(entry)
        self._suspend({"kind": "startChild", "seq": seq, "workflow": workflow, "input": input})

