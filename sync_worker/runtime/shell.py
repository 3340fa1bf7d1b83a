"""``RuntimeShell``: the one lifecycle every task source runs in.

A *task source* brings tasks in (the Durable Workflow long polls, a nestjs-durable transport);
the shell owns everything around them, once:

* **start**: ``source.join()`` (register / connect, retrying as the source likes), then the
  admission gates' control loops and ``source.start(shell)``, which spawns its loops through
  :meth:`RuntimeShell.spawn_loop`; the state goes ``STARTING -> RUNNING``;
* **supervise**: the caller of ``run()`` ticks the status board (a gevent hub monitor's stamps
  tick it instead) and fails the runtime as soon as a *critical* loop exits;
* **tasks**: :meth:`RuntimeShell.spawn_task` runs one accepted task on the backend in its slot,
  tracked in the in-flight set, counted in the metrics, its slot released when it ends;
* **stop** (from any thread, any number of times, one shared result): intake stops at once
  (:meth:`RuntimeShell.stop_intake`, also on its own for a caller that stops later), the intake
  loops are joined, accepted work drains until ``shutdown_timeout``; then the source
  winds down (heartbeats, keepers) and closes cleanly (deregister, withdraw) -- or, when work is
  still running or a cold stop was asked, the work is abandoned (killed where the backend can),
  handed back when the source can, and :class:`ShutdownIncomplete` is raised.

The shell knows nothing of the wire: a source is an object with the :class:`TaskSource` methods
and its own collaborators.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence

from .admission import AdmissionGate, ControlLoop, start_control_loop
from .backend import ConcurrencyBackend, TaskHandle
from .inflight import InflightSet, InflightTask
from .metrics import TASK_DURATION, TASKS, MetricsRecorder, NoopMetrics
from .slots import Slot
from .status import StatusBoard, WorkerState, WorkerStatus

__all__ = ["ERROR_OUTCOMES", "Loop", "RuntimeShell", "ShutdownIncomplete", "TaskSource"]

logger = logging.getLogger("sync_worker.runtime")

#: The supervisor's liveness tick; stop() and a critical loop's exit wake it at once. Every wakeup
#: costs an idle worker CPU (bench/idle_cpu.py), and liveness allows 30 s without a tick.
SUPERVISOR_TICK_SECONDS = 5.0
#: With a scheduler monitor its stamps are the progress ticks: this is the supervisor's backstop look.
SUPERVISOR_BACKSTOP_SECONDS = 300.0

#: How often the intake join looks for a cold stop (a poller may be running a task itself).
INTAKE_JOIN_STEP_SECONDS = 0.1
#: After the drain, how long an intake loop that ran a task itself still gets to end (it ends at once).
INTAKE_AFTER_DRAIN_SECONDS = 1.0

#: Task outcomes an adaptive controller counts as errors (its backpressure rule).
ERROR_OUTCOMES = frozenset({"failed", "failed_non_retryable", "crashed", "complete_error"})


class ShutdownIncomplete(RuntimeError):
    """Accepted work was still running at the shutdown deadline (or a cold stop was asked)."""

    def __init__(self, message: str, running: Sequence[str]) -> None:
        super().__init__(message)
        self.running = list(running)


class TaskSource(Protocol):
    """What the shell needs from a source of tasks. Every method may block; none is async."""

    def join(self) -> None:
        """Register / connect (retrying as configured); raise when it cannot."""

    def start(self, shell: RuntimeShell) -> None:
        """Spawn the intake loops (``shell.spawn_loop(..., intake=True)``) and any others."""

    def stop_intake(self) -> None:
        """Stop taking new tasks now (abort long polls, stop claiming). Any thread, idempotent."""

    def intake_grace(self) -> float:
        """Seconds the shell waits, at most, for the intake loops to end at shutdown."""

    def wind_down(self, deadline: float, *, stuck: bool) -> None:
        """After the drain: stop background work (heartbeats, lease keepers)."""

    def hand_back(self) -> None:
        """Unfinished work was abandoned: give it back where the source can (else nothing)."""

    def close(self, *, clean: bool, deadline: float) -> None:
        """``clean``: everything drained, leave for good (deregister, withdraw). Else keep what
        lets the server recover the abandoned work."""

    def abort(self) -> None:
        """``join`` failed: release whatever it half-opened."""

    def describe_running(self) -> str:
        """One log line once running (what is served, where, how)."""

    def describe_incomplete(self, why: str, running: Sequence[str]) -> str:
        """The :class:`ShutdownIncomplete` message."""


@dataclasses.dataclass
class Loop:
    """A loop the shell spawned: its handle, and the error that ended it (if any)."""

    name: str
    role: str
    critical: bool
    intake: bool
    handle: Optional[TaskHandle] = None
    error: Optional[BaseException] = None
    exited: bool = False


class RuntimeShell:
    """Runs one :class:`TaskSource` (see the module docstring). ``label`` and ``runtime_id`` name
    it in messages ("worker sync-worker-1a2b"); ``owner`` is what the health registry holds."""

    def __init__(
        self,
        *,
        label: str,
        runtime_id: str,
        backend: ConcurrencyBackend,
        board: StatusBoard,
        shutdown_timeout: float,
        metrics: Optional[MetricsRecorder] = None,
        task_queue: str = "",
        owner: Any = None,
        name_prefix: str = "runtime",
        interrupts_propagate: bool = True,
    ) -> None:
        self.label, self.runtime_id = label, runtime_id
        self.backend, self.board = backend, board
        self.shutdown_timeout = float(shutdown_timeout)
        self.metrics: MetricsRecorder = metrics if metrics is not None else NoopMetrics()
        self.task_queue = task_queue
        self.owner = owner
        self.name_prefix = name_prefix
        self.interrupts_propagate = interrupts_propagate
        self.inflight = InflightSet(backend)
        self.monitor = backend.scheduler_monitor()
        self.source: Optional[TaskSource] = None
        b = backend
        self._lock = b.lock()
        self.stop_requested = b.event()
        self.cold = b.event()
        self.join_done = b.event()  # join ended, in success or failure
        self.startup_done = b.event()  # join ended and the loops started (or startup gave up)
        self.joined = False
        self.loop_failed = False
        self._wake = b.event()  # a stop request or a critical loop's exit: the supervisor looks at once
        self._run_started = False
        self._shutdown_started = False
        self._shutdown_done = b.event()
        self._shutdown_error: Optional[BaseException] = None
        self._loops: List[Loop] = []
        self._gates: List[AdmissionGate] = []
        self._control_loops: List[ControlLoop] = []

    # -- configuration -----------------------------------------------------------------------

    def attach(self, source: TaskSource) -> None:
        self.source = source

    def add_gate(self, gate: AdmissionGate) -> None:
        """A gate whose control loop runs while the runtime runs and which stop() drains."""
        self._gates.append(gate)

    def replace_gates(self, gates: Sequence[AdmissionGate]) -> None:
        with self._lock:
            if self._run_started:
                raise RuntimeError(f"cannot change the admission gates of a running {self.label}")
            self._gates = list(gates)

    @property
    def run_started(self) -> bool:
        return self._run_started

    @property
    def loops(self) -> List[Loop]:
        """The loops spawned so far (their handles tell whether they still run)."""
        return list(self._loops)

    def _source(self) -> TaskSource:
        if self.source is None:
            raise RuntimeError(f"{self.label} {self.runtime_id} has no task source")
        return self.source

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> None:
        """Join, start, supervise until :meth:`stop`, then stop (blocks the caller)."""
        self.begin()
        error: Optional[BaseException] = None
        try:
            self.start()
            self.supervise()
        except BaseException as caught:
            error = caught
        self.finish(error)

    def begin(self) -> None:
        """Mark the run started (once), register for health probes, start the hub monitor."""
        from .. import health

        with self._lock:
            if self._run_started:
                raise RuntimeError(f"{self.label} {self.runtime_id} was already run; create a new one")
            if self._shutdown_started:
                raise RuntimeError(f"{self.label} {self.runtime_id} was stopped before it ran; create a new one")
            self._run_started = True
        health.register(self.owner if self.owner is not None else self)
        self.board.tick()
        if self.monitor is not None:
            # Its stamps are the progress ticks: they prove the hub runs, which is all the
            # supervisor's own tick would prove there.
            self.monitor.start(on_tick=self.board.tick)
            self.board.set_scheduler_monitor(self.monitor)

    def start(self) -> None:
        """Join the source, then start the gates' control loops and the source's loops."""
        source = self._source()
        try:
            try:
                source.join()
                self.joined = True
            except BaseException:
                self.board.set_state(WorkerState.FAILED)
                raise
            finally:
                self.join_done.set()
            self.board.registered()
            if self.stop_requested.is_set():
                return
            for gate in self._gates:
                self._control_loops.append(start_control_loop(gate, self.backend))
            source.start(self)
            self.board.set_state(WorkerState.RUNNING)
            logger.info("%s", source.describe_running())
        finally:
            self.startup_done.set()

    def supervise(self) -> None:
        """Tick the board until stop; raise when a critical loop exits."""
        monitor = self.monitor
        ticking = monitor is None
        every = SUPERVISOR_TICK_SECONDS if ticking else SUPERVISOR_BACKSTOP_SECONDS
        next_within = SUPERVISOR_TICK_SECONDS if monitor is None else float(getattr(monitor, "interval", every))
        self.board.tick(next_within)
        while not self.stop_requested.is_set():
            self._wake.wait(every)
            self._wake.clear()  # before looking: a later set wakes the next wait at once
            if ticking:
                self.board.tick(SUPERVISOR_TICK_SECONDS)
            if self.stop_requested.is_set():
                break
            for loop in self._loops:
                if loop.critical and (loop.exited or (loop.handle is not None and not loop.handle.is_alive())):
                    raise RuntimeError(f"{self.label} {self.runtime_id}: the {loop.role} exited") from loop.error
        self.board.tick(next_within)

    def finish(self, error: Optional[BaseException], *, loop_failed: Optional[bool] = None) -> None:
        """Stop after ``run``'s loop ended (with ``error``); re-raise it after a clean stop."""
        from ..errors import WorkerShutdown

        if loop_failed is None:
            # KeyboardInterrupt/SystemExit are stop requests, not failures of the loop.
            loop_failed = isinstance(error, Exception) and not isinstance(error, WorkerShutdown)
        if loop_failed:
            self.loop_failed = True
        try:
            self.stop()
        except BaseException as shutdown_error:
            if error is not None:
                raise error from shutdown_error
            raise
        if error is not None and (self.interrupts_propagate or not isinstance(error, (KeyboardInterrupt, SystemExit))):
            raise error

    def request_stop(self) -> None:
        self.stop_requested.set()
        self._wake.set()

    def stop_intake(self) -> None:
        """Take no new task from now on, without draining or closing (any thread, idempotent): the
        first half of :meth:`stop`, for a caller that stops later (a recycling prefork child).

        The stop is marked before the source's intake stops, so an intake loop that ends because
        of it is a planned exit: the supervisor never reports it as "the activity poller exited".
        Then nobody waits at the admission gates any more and the source stops its intake.
        """
        self.request_stop()
        for gate in self._gates:
            gate.begin_drain()
        if self.source is not None:
            self.source.stop_intake()

    def stop(self, *, cold: bool = False) -> None:
        """Stop intake, drain accepted work, close the source. Repeated calls share one result."""
        from .. import health

        if cold:
            self.cold.set()  # before the stop is marked: whoever sees the stop sees that it is cold
        self.stop_intake()
        with self._lock:
            performer = not self._shutdown_started
            self._shutdown_started = True
        if performer:
            try:
                self._shutdown()
            except BaseException as error:
                self._shutdown_error = error
            finally:
                if self.monitor is not None:
                    self.board.set_scheduler_monitor(None)
                    self.monitor.stop()
                for control in self._control_loops:
                    control.stop()
                health.unregister(self.owner if self.owner is not None else self)
                self._shutdown_done.set()
        else:
            self.wait(self._shutdown_done)
        if self._shutdown_error is not None:
            raise self._shutdown_error

    def wait(self, event: Any) -> None:
        """Wait for ``event``, ticking the board (a waiting caller is still progress)."""
        while not event.wait(SUPERVISOR_TICK_SECONDS):
            self.board.tick(SUPERVISOR_TICK_SECONDS)

    def _shutdown(self) -> None:
        if not self._run_started:
            self.board.set_state(WorkerState.STOPPED)
            return
        source = self._source()
        # Stop during startup: the join finishes and the loops it starts exist (so the drain
        # below joins them); then the drain deadline starts.
        self.wait(self.startup_done)
        if not self.joined:
            self.board.set_state(WorkerState.FAILED)
            try:
                source.abort()
            except Exception:  # a half-open source may fail to close; it holds nothing
                pass
            return
        self.board.set_state(WorkerState.DRAINING)
        clock = self.backend.monotonic
        deadline = clock() + self.shutdown_timeout
        logger.info("%s %s stopping: draining %d task(s) within %.1f s", self.label, self.runtime_id,
                    self.inflight.count(), self.shutdown_timeout)
        intake = [loop for loop in self._loops if loop.intake]
        grace = min(clock() + source.intake_grace(), deadline)
        for loop in intake:  # a cold stop does not wait for the pollers that run a task themselves
            while loop.handle is not None and loop.handle.is_alive():
                left = grace - clock()
                if left <= 0 or (self.cold.is_set() and self._alive_intake(intake) <= self._tasks_run_here()):
                    break
                loop.handle.join(min(left, INTAKE_JOIN_STEP_SECONDS))
        drained = self.inflight.wait_empty(deadline, tick=self.board.tick, interrupted=self.cold.is_set)
        if drained:  # a poller that ran its last task itself leaves right after it: let it
            for loop in intake:
                if loop.handle is not None and loop.handle.is_alive():
                    loop.handle.join(max(0.0, min(INTAKE_AFTER_DRAIN_SECONDS, deadline - clock())))
        stuck = [loop for loop in intake if loop.handle is not None and loop.handle.is_alive()]
        self.backend.close_idle()  # no new task can come: parked slot threads leave now
        source.wind_down(deadline, stuck=bool(stuck))
        for loop in self._loops:
            if not loop.intake and loop.handle is not None:
                loop.handle.join(max(0.0, min(5.0, deadline - clock())))
        if not drained or stuck:
            running = [f"{task.kind}:{task.task_id}" for task in self.inflight.snapshot()]
            running += [loop.name for loop in stuck]
            for task in self.inflight.snapshot():
                task.abandon()
            source.hand_back()
            if self.cold.is_set():
                self._kill(stuck)
            try:
                source.close(clean=False, deadline=deadline)
            finally:
                self.board.set_state(WorkerState.FAILED)
            why = "cold stop requested" if self.cold.is_set() else "shutdown deadline reached"
            raise ShutdownIncomplete(source.describe_incomplete(why, running), running)
        try:
            source.close(clean=True, deadline=deadline)
        except BaseException:
            self.board.set_state(WorkerState.FAILED)
            raise
        self.board.set_state(WorkerState.FAILED if self.loop_failed else WorkerState.STOPPED)

    def _tasks_run_here(self) -> int:
        return sum(1 for task in self.inflight.snapshot() if task.here)

    @staticmethod
    def _alive_intake(intake: Sequence[Loop]) -> int:
        return sum(1 for loop in intake if loop.handle is not None and loop.handle.is_alive())

    def _kill(self, stuck: Sequence[Loop]) -> None:
        """Cold stop: kill abandoned tasks (and stuck intake loops) where the backend can (greenlets).
        The count logged is of tasks: a task run by its poller dies with the poller's unit."""
        tasks = self.inflight.snapshot()
        killed = sum(1 for task in tasks if task.handle is not None and self.backend.kill(task.handle))
        loops_killed = sum(1 for loop in stuck if loop.handle is not None and self.backend.kill(loop.handle))
        if loops_killed:
            killed += sum(1 for task in tasks if task.here)
        if killed:
            logger.warning("%s %s cold stop: killed %d task(s) at their next cooperative point", self.label,
                           self.runtime_id, killed)

    # -- services for sources ----------------------------------------------------------------

    def spawn_loop(self, name: str, target: Callable[[], None], *, role: str, critical: bool = True,
                   intake: bool = False) -> Loop:
        """Run ``target`` on the backend until it returns; a critical loop's exit fails the runtime.
        Intake loops are the ones joined at shutdown before the drain."""
        loop = Loop(name, role, critical, intake)

        def body() -> None:
            try:
                target()
            except BaseException as error:
                loop.error = error
                if not self.stop_requested.is_set():
                    logger.exception("%s %s: the %s failed", self.label, self.runtime_id, role)
            finally:
                loop.exited = True
                if loop.critical:
                    self._wake.set()

        self._loops.append(loop)
        loop.handle = self.backend.spawn(name, body)
        return loop

    def spawn_task(self, kind: str, task_id: str, slot: Slot, body: Callable[[InflightTask], str], *,
                   tags: Optional[Dict[str, str]] = None, here: bool = False) -> InflightTask:
        """Run one accepted task holding ``slot``; ``body`` returns its outcome name.

        ``here``: track the task (in flight, holding its slot) but do not spawn it: the caller runs
        it on its own unit with :meth:`InflightTask.run` (a poller that runs what it received)."""
        inflight = InflightTask(self.backend, kind, task_id)
        key = self.inflight.add(inflight)
        labels = dict(tags if tags is not None else {"task_kind": kind, "task_queue": self.task_queue})

        def execute() -> None:
            outcome = "crashed"
            try:
                outcome = body(inflight)
            except BaseException as error:
                if inflight.abandoned:  # e.g. killed by a cold stop at its next cooperative point
                    outcome = "abandoned"
                    logger.warning("%s task %s ended after it was abandoned (%s)", kind, task_id,
                                   type(error).__name__)
                else:
                    logger.exception("%s task %s crashed the runtime", kind, task_id)
            finally:
                metrics = self.metrics
                if type(metrics) is not NoopMetrics:  # the default records nothing: build no tags
                    duration = self.backend.monotonic() - inflight.started_at
                    metrics.increment(TASKS, 1.0, dict(labels, outcome=outcome))
                    metrics.record(TASK_DURATION, duration, dict(labels, outcome=outcome))
                self.inflight.remove(key)
                slot.release(ok=outcome not in ERROR_OUTCOMES)

        if here:
            inflight.pending = execute
            inflight.here = True
            return inflight
        try:
            inflight.handle = self.backend.spawn_task(f"{self.name_prefix}-{kind}-{task_id}", execute)
        except BaseException:
            self.inflight.remove(key)
            slot.release()
            raise
        return inflight

    def status(self, concurrency: Optional[AdmissionGate] = None, **bounds: Any) -> WorkerStatus:
        """The board's snapshot, with ``concurrency`` from ``concurrency``'s gate when given."""
        snapshot = self.board.snapshot(**bounds)
        if concurrency is None:
            return snapshot
        return dataclasses.replace(snapshot, concurrency=concurrency.status())
