"""``NestjsWorker``: runs a :class:`StepWorker`'s steps from a transport on the runtime shell.

The transport is a task source (:class:`NestjsSource`) on the same
:class:`~sync_worker.runtime.shell.RuntimeShell` as the Durable Workflow worker: one concurrency
backend (threads or gevent greenlets), a :class:`SlotPool` admitted through ``slots.admit`` so a
worker never claims more tasks than it has slots -- with the memory admission gate
(``sync_worker.runtime.admission``; ``concurrency="adaptive"`` or a dict of knobs) asked before each
claim, so a worker short of memory leaves the task to another replica --, ``PollFailureBackoff``
for a failing broker, and the shell's in-flight set, drain, cold kill and status board.

What is nestjs-specific lives here (the shell's loops, spawned by the source):

* the **fetcher** (the intake loop) takes a free slot, claims one task (non-blocking), and runs it
  in that slot; with nothing to claim it keeps the slot and waits on the transport (BZPOPMIN on
  the queue markers, or the SQL poll interval);
* with a :class:`~sync_worker.nestjs.WorkflowWorker`, a second intake loop does the same for
  workflow *turns* on the group's queue, in slots of their own (never behind the memory gate: a
  turn replays and suspends, and making it wait on memory could stall the run whose steps would
  free it), beating the run's liveness every 5 s while a turn replays and sending its decision;
* the **keeper** renews the leases of every held task every ``lease/2`` s (BullMQ renews its locks
  the same way) and lets the transport do its periodic work (stalled checks, worker heartbeat keys);
* the transport's own background loops (the Redis control channel);
* results are settled with retries; at an incomplete stop held tasks are handed back.

A transport implements :class:`~sync_worker.nestjs.transport.StepTransport` (and, for
workflows, ``TurnTransport``); see ``redis_transport``, ``pg_transport``, ``mysql_transport`` and
``sqs_transport``.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from ..cancel import CancelToken
from ..instrumentation import run_step
from ..runtime.admission import AdmissionGate, ConcurrencyOption, MemoryProbe, resolve_concurrency
from ..runtime.backend import ConcurrencyBackend, backend_for_pool, default_pool
from ..runtime.backoff import PollFailureBackoff
from ..runtime.inflight import InflightTask
from ..runtime.shell import RuntimeShell, ShutdownIncomplete
from ..runtime.slots import SlotPool, admit
from ..runtime.status import RoleTracker, StatusBoard, WorkerState, WorkerStatus
from .bounds import encode_decision, encode_result
from .descriptor import default_instance_id
from .steps import StepWorker
from .transport import Delivery, StepTransport, TurnTransport, supports_turns
from .workflows import WorkflowWorker

__all__ = ["Delivery", "NestjsSource", "NestjsWorker", "ShutdownIncomplete", "StepTransport", "TurnTransport"]

logger = logging.getLogger("sync_worker.nestjs")

_TICK_SECONDS = 0.5
_SETTLE_ATTEMPTS = 4
_CANCELLED_RUNS_KEPT = 10000
#: How often a turn being replayed beats its run's liveness (the published runner's 5 s).
RUN_BEAT_SECONDS = 5.0


class _Backoff(PollFailureBackoff):
    def __init__(self, route: str) -> None:
        super().__init__("nestjs")
        self._route = route

    @property
    def route(self) -> str:
        return self._route


class _Intake:
    """One intake loop's collaborators: its slots, how it claims and waits, and its status role."""

    def __init__(self, kind: str, slots: SlotPool, role: RoleTracker, claim: Callable[[], Optional[Delivery]],
                 wait: Callable[[float], None], route: str) -> None:
        self.kind, self.slots, self.role = kind, slots, role
        self.claim, self.wait, self.route = claim, wait, route


class NestjsSource:
    """A nestjs-durable transport as a :class:`~sync_worker.runtime.shell.TaskSource`: the step
    fetcher and (with workflows) the turn fetcher -- the intake loops --, the lease keeper, the
    transport's own loops, settling results and decisions."""

    def __init__(self, owner: NestjsWorker, steps: Optional[StepWorker], transport: StepTransport, *,
                 backend: ConcurrencyBackend, keeper_role: RoleTracker, idle_wait: float,
                 describe: Callable[[], str], step_intake: Optional[_Intake] = None,
                 workflows: Optional[WorkflowWorker] = None, turn_intake: Optional[_Intake] = None) -> None:
        self.owner, self.steps, self.transport = owner, steps, transport
        self.workflows = workflows
        self.backend = backend
        self.keeper_role = keeper_role
        self.idle_wait = idle_wait
        self._describe = describe
        self._intakes = [i for i in (step_intake, turn_intake) if i is not None]
        self.fetch_cancel = CancelToken(backend.event)
        self.keeper_cancel = CancelToken(backend.event)
        self._lock = backend.lock()
        self._held: Dict[int, Delivery] = {}
        self.completed = 0
        self.failed = 0
        self.turns = 0
        self.shell: Optional[RuntimeShell] = None

    # -- TaskSource --------------------------------------------------------------------------

    def join(self) -> None:
        self.transport.open(self.steps.names if self.steps is not None else [], self.owner)

    def start(self, shell: RuntimeShell) -> None:
        self.shell = shell
        worker_id = self.owner.worker_id
        for intake in self._intakes:
            name = "fetch" if intake.kind == "step" else "turns"
            shell.spawn_loop(f"nestjs-{name}-{worker_id}", functools.partial(self._fetch_loop, intake),
                             role=f"{intake.kind} fetch loop", critical=True, intake=True)
        shell.spawn_loop(f"nestjs-keeper-{worker_id}", self._keeper_loop, role="lease keeper", critical=False)
        for name, loop in self.transport.background():
            shell.spawn_loop(f"nestjs-{name}-{worker_id}", functools.partial(loop, self.keeper_cancel),
                             role=f"{name} loop", critical=False)

    def stop_intake(self) -> None:
        self.fetch_cancel.cancel()

    def intake_grace(self) -> float:
        return self.idle_wait + 5.0

    def wind_down(self, deadline: float, *, stuck: bool) -> None:
        self.keeper_cancel.cancel()

    def hand_back(self) -> None:
        for delivery in self._held_deliveries():
            try:
                self.transport.release(delivery)
            except Exception as error:
                logger.warning("%s %s: could not hand it back (%s); its lease will lapse",
                               delivery.kind, delivery.step_id, type(error).__name__)

    def close(self, *, clean: bool, deadline: float) -> None:
        try:
            self.transport.close(clean=clean)
        except Exception as error:
            logger.warning("nestjs worker %s: closing the transport failed (%s)", self.owner.worker_id,
                           type(error).__name__)
        if clean:
            logger.info("nestjs worker %s stopped", self.owner.worker_id)

    def abort(self) -> None:
        """The broker was unreachable (or refused us): nothing ran; close what open() left."""
        self.transport.close(clean=False)

    def describe_running(self) -> str:
        return self._describe()

    def describe_incomplete(self, why: str, running: Sequence[str]) -> str:
        return (f"nestjs worker {self.owner.worker_id}: {why} with tasks still running ({', '.join(running)}); "
                "they were handed back to the broker without a result")

    # -- loops -------------------------------------------------------------------------------

    def _fetch_loop(self, intake: _Intake) -> None:
        tracker = intake.role
        backoff = _Backoff(f"{self.transport.kind}:{intake.route}")
        tracker.started()
        slot: Any = None
        try:
            while not self.fetch_cancel.cancelled:
                if slot is None:  # claim only with a free slot in hand: never more work than slots
                    slot = admit(intake.slots, self.fetch_cancel)
                    if slot is None:
                        break
                tracker.request_started()
                try:
                    delivery = intake.claim()
                    if delivery is None:
                        intake.wait(self.idle_wait)
                except Exception as error:
                    tracker.request_failed(error)
                    self.fetch_cancel.wait(backoff.next_delay(error))
                    continue
                tracker.request_succeeded()
                backoff.reset()
                if delivery is not None:
                    self._spawn(delivery, slot)
                    slot = None
        finally:
            if slot is not None:
                slot.release()
            tracker.exited()

    def _spawn(self, delivery: Delivery, slot: Any) -> None:
        assert self.shell is not None
        key = id(delivery)
        with self._lock:
            self._held[key] = delivery
        if delivery.kind == "workflow":
            slot.started(str(delivery.task.get("workflow") or ""))
            run = self._run_turn
        else:
            slot.started(str(delivery.task.get("name") or ""))
            run = self._run_step

        def body(inflight: InflightTask) -> str:
            try:
                return run(delivery, inflight)
            finally:
                with self._lock:
                    self._held.pop(key, None)

        try:
            self.shell.spawn_task(delivery.kind, delivery.step_id, slot, body)
        except BaseException:
            with self._lock:
                self._held.pop(key, None)
            raise

    def _run_step(self, delivery: Delivery, inflight: InflightTask) -> str:
        assert self.steps is not None
        steps = self.steps
        result = run_step(delivery.task, lambda task: steps.process_task(  # through installed step interceptors
            task, heartbeat=lambda: self._beat(delivery), is_cancelled=self.owner.is_cancelled,
            on_event=lambda event: self._progress(delivery, event)))
        ok = result.get("status") == "completed"
        if inflight.claim_report():
            payload = encode_result(result)
            if self._settle(delivery, lambda: self.transport.settle(delivery, result, payload)):
                if ok:
                    self.completed += 1
                else:
                    self.failed += 1
        return "completed" if ok else "failed"

    def _run_turn(self, delivery: Delivery, inflight: InflightTask) -> str:
        assert self.workflows is not None
        turns: TurnTransport = self.transport  # type: ignore[assignment]
        self._beat_run(delivery)
        decision = self.workflows.process_task(delivery.task, is_cancelled=self.owner.is_cancelled)
        if inflight.claim_report():
            payload = encode_decision(decision)
            if self._settle(delivery, lambda: turns.settle_turn(delivery, decision, payload)):
                self.turns += 1
        return "failed" if decision.get("status") == "failed" else "completed"

    def _settle(self, delivery: Delivery, send: Callable[[], None]) -> bool:
        delay = 0.25
        for attempt in range(1, _SETTLE_ATTEMPTS + 1):
            try:
                send()
                return True
            except Exception as error:
                if attempt == _SETTLE_ATTEMPTS:
                    logger.error("%s %s: could not deliver its outcome (%s); the broker will hand it out "
                                 "again when its lease lapses", delivery.kind, delivery.step_id,
                                 type(error).__name__)
                    return False
                logger.warning("%s %s: delivery failed (%s); retrying in %.2fs", delivery.kind,
                               delivery.step_id, type(error).__name__, delay)
                self.backend.sleep(delay)
                delay *= 2
        return False

    def _beat(self, delivery: Delivery) -> None:
        now = self.backend.monotonic()
        if now - delivery.last_beat < min(1.0, self.transport.lease_seconds / 10.0):
            return
        delivery.last_beat = now
        try:
            self.transport.beat(delivery)
        except Exception as error:  # a missed beat is covered by the keeper's renewal
            logger.warning("step %s: heartbeat failed (%s)", delivery.step_id, type(error).__name__)

    def _beat_run(self, delivery: Delivery) -> None:
        delivery.last_beat = self.backend.monotonic()
        try:
            self.transport.beat_run(delivery)  # type: ignore[attr-defined]
        except Exception as error:  # best effort, as the published runner: the next beat may land
            logger.warning("turn %s: run heartbeat failed (%s)", delivery.step_id, type(error).__name__)

    def _progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        try:
            self.transport.progress(delivery, event)
        except Exception as error:  # live progress is best effort; the event also rides the result
            logger.debug("step %s: progress event not sent (%s)", delivery.step_id, type(error).__name__)

    def _held_deliveries(self) -> List[Delivery]:
        with self._lock:
            return list(self._held.values())

    def _keeper_loop(self) -> None:
        tracker = self.keeper_role
        tracker.started()
        clock = self.backend.monotonic
        next_renew = clock() + self.transport.lease_seconds / 2.0
        failures_logged: Set[str] = set()
        try:
            while not self.keeper_cancel.wait(_TICK_SECONDS):
                now = clock()
                tracker.request_started()
                try:
                    held = self._held_deliveries()
                    for delivery in held:
                        if delivery.kind == "workflow" and now - delivery.last_beat >= RUN_BEAT_SECONDS:
                            self._beat_run(delivery)
                    if now >= next_renew:
                        if held:
                            self.transport.renew(held)
                        next_renew = now + self.transport.lease_seconds / 2.0
                    self.transport.maintain(now)
                except Exception as error:
                    tracker.request_failed(error)
                    summary = type(error).__name__
                    if summary not in failures_logged:
                        failures_logged.add(summary)
                        logger.warning("nestjs worker %s: lease renewal / upkeep failed (%s); retrying",
                                       self.owner.worker_id, summary)
                    next_renew = min(next_renew, now + 1.0)
                    continue
                failures_logged.clear()
                tracker.request_succeeded()
        finally:
            tracker.exited()


class NestjsWorker:
    """Serve ``steps`` (a :class:`StepWorker`) and/or ``workflows`` (a :class:`WorkflowWorker`,
    Redis only) from ``transport`` until stopped (``run()`` blocks; ``stop()`` from anywhere).

    ``concurrency`` is a fixed N, ``"adaptive"`` or a dict of knobs (docs/concurrency.md) for step
    slots; ``workflow_slots`` turns replay at once; ``memory_probe`` is where the admission gate
    reads memory (default: cgroup, then /proc).
    """

    def __init__(
        self,
        steps: Optional[StepWorker],
        transport: StepTransport,
        *,
        workflows: Optional[WorkflowWorker] = None,
        concurrency: ConcurrencyOption = 4,
        workflow_slots: int = 4,
        pool: Optional[str] = None,
        shutdown_timeout: float = 30.0,
        instance_id: Optional[str] = None,
        idle_wait: float = 1.0,
        memory_probe: Optional[MemoryProbe] = None,
    ) -> None:
        if steps is not None and not steps.names:
            steps = None
        if workflows is not None and not workflows.names:
            raise ValueError("the WorkflowWorker has no workflows registered")
        if steps is None and workflows is None:
            raise ValueError("nothing to serve: the StepWorker has no steps registered and there are no workflows")
        if workflows is not None and not supports_turns(transport):
            raise ValueError(f"workflows are served over Redis only: the engine's {transport.kind} transport "
                             "carries no workflow tasks")
        if shutdown_timeout < 0 or idle_wait <= 0:
            raise ValueError("shutdown_timeout must be >= 0 and idle_wait > 0")
        self.steps = steps
        self.workflows = workflows
        self.transport = transport
        self.concurrency_config = resolve_concurrency(concurrency)
        self.concurrency = self.concurrency_config.capacity
        self.workflow_slots = int(workflow_slots)
        self.shutdown_timeout = float(shutdown_timeout)
        self.idle_wait = float(idle_wait)
        self.instance_id = instance_id or default_instance_id()
        self.worker_id = self.instance_id
        self.backend: ConcurrencyBackend = backend_for_pool(pool if pool is not None else default_pool())
        self.pool = self.backend.name
        b = self.backend
        self.gate = AdmissionGate(self.concurrency_config, probe=memory_probe, clock=b.monotonic,
                                  lock_factory=b.native_lock, event_factory=b.event, name="step",
                                  tags={"task_kind": "step", "task_queue": transport.kind})
        board = StatusBoard(self.worker_id, "nestjs", transport.kind, b.monotonic, b.native_lock)
        lease = max(1.0, float(transport.lease_seconds))

        def poller(kind: str) -> RoleTracker:
            return board.add_role(RoleTracker(
                kind, b.monotonic, overdue_seconds=max(30.0, 2 * idle_wait), stall_seconds=max(120.0, 4 * lease),
                is_poller=True, lock_factory=b.native_lock))

        step_intake = turn_intake = None
        if steps is not None:
            step_intake = _Intake("step", SlotPool(b, "step", self.concurrency, self.gate), poller("step"),
                                  transport.claim, transport.wait_for_work, "claim")
        if workflows is not None:
            turns: TurnTransport = transport  # type: ignore[assignment]
            turn_intake = _Intake("workflow", SlotPool(b, "workflow", self.workflow_slots), poller("workflow"),
                                  turns.claim_turn, turns.wait_for_turn, "turn")
        keeper_role = board.add_role(RoleTracker(
            "lease", b.monotonic, overdue_seconds=lease, stall_seconds=2 * lease, is_poller=False,
            lock_factory=b.native_lock))
        self._cancelled_runs: Dict[str, None] = {}
        self._runs_lock = b.native_lock()
        #: The lifecycle every runtime shares (docs/runtime.md).
        self.shell = RuntimeShell(label="nestjs worker", runtime_id=self.worker_id, backend=b, board=board,
                                  shutdown_timeout=self.shutdown_timeout, task_queue=transport.kind, owner=self,
                                  name_prefix="nestjs", interrupts_propagate=False)
        self.shell.add_gate(self.gate)
        #: The transport as the shell's task source (one source, one or two intake loops).
        self.source = NestjsSource(self, steps, transport, backend=b, keeper_role=keeper_role,
                                   idle_wait=self.idle_wait, describe=self._describe, step_intake=step_intake,
                                   workflows=workflows, turn_intake=turn_intake)
        self.shell.attach(self.source)

    def _describe(self) -> str:
        served = []
        if self.steps is not None:
            served.append(f"steps {', '.join(self.steps.names)} ({self.concurrency} slots)")
        if self.workflows is not None:
            served.append(f"workflows {', '.join(self.workflows.names)} on group {self.workflows.group} "
                          f"({self.workflow_slots} slots)")
        line = (f"nestjs worker {self.worker_id} serving {' and '.join(served)} over {self.transport.kind} "
                f"({self.pool})")
        if self.steps is not None and self.concurrency_config.adaptive:
            line += (f"; step slots are adaptive ({self.concurrency_config.min}..{self.concurrency_config.max}) "
                     "behind the memory admission gate")
        return line

    # -- public ----------------------------------------------------------------------------------

    @property
    def state(self) -> WorkerState:
        return self.shell.board.state

    @property
    def completed(self) -> int:
        return self.source.completed

    @property
    def failed(self) -> int:
        return self.source.failed

    def status(self, **bounds: Any) -> WorkerStatus:
        """Readiness and liveness, from any thread, without I/O (see ``sync_worker.runtime.status``).

        ``concurrency`` carries the step slots' mode, limit, memory figures and gate state.
        """
        return self.shell.status(self.gate, **bounds)

    def in_flight(self) -> int:
        return self.shell.inflight.count()

    def heartbeat_status(self) -> Dict[str, Any]:
        """The ``WorkerStatus`` object nestjs-durable reads from this worker's heartbeat key."""
        status = self.gate.status().to_wire()
        if "rssBytes" not in status:
            rss = _rss_bytes()
            if rss is not None:
                status["rssBytes"] = rss
        return status

    def cancel_run(self, run_id: str) -> None:
        """The engine cancelled ``run_id``: its running steps see ``ctx.cancelled``."""
        with self._runs_lock:
            self._cancelled_runs[run_id] = None
            while len(self._cancelled_runs) > _CANCELLED_RUNS_KEPT:
                self._cancelled_runs.pop(next(iter(self._cancelled_runs)))

    def is_cancelled(self, run_id: str) -> bool:
        with self._runs_lock:
            return run_id in self._cancelled_runs

    def run(self) -> None:
        """Open the transport, serve steps until :meth:`stop`, then shut down (warm unless cold)."""
        self.shell.run()

    def stop(self, *, cold: bool = False) -> None:
        """Stop claiming, let running steps finish within ``shutdown_timeout`` (``cold``: don't wait).

        Unfinished steps are handed back to the broker (their result is never sent) and
        :class:`~sync_worker.runtime.shell.ShutdownIncomplete` is raised.
        """
        self.shell.stop(cold=cold)


def _rss_bytes() -> Optional[int]:
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def new_token() -> str:
    """A unique lock token (BullMQ uses ``<worker token>:<n>``; any unique string works)."""
    return uuid.uuid4().hex
