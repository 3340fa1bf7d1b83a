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
* the **keeper** renews the leases of every held task every ``lease/2`` s (BullMQ renews its locks
  the same way) and lets the transport do its periodic work (stalled checks, worker heartbeat keys);
* the transport's own background loops (the Redis control channel);
* results are settled with retries; at an incomplete stop held tasks are handed back.

A transport implements :class:`StepTransport`; see ``redis_transport``, ``pg_transport`` and
``sqs_transport``.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple

from ..cancel import CancelToken
from ..instrumentation import run_step
from ..runtime.admission import AdmissionGate, ConcurrencyOption, MemoryProbe, resolve_concurrency
from ..runtime.backend import ConcurrencyBackend, backend_for_pool, default_pool
from ..runtime.backoff import PollFailureBackoff
from ..runtime.inflight import InflightTask
from ..runtime.shell import RuntimeShell, ShutdownIncomplete
from ..runtime.slots import SlotPool, admit
from ..runtime.status import RoleTracker, StatusBoard, WorkerState, WorkerStatus
from .bounds import encode_result
from .descriptor import default_instance_id
from .steps import StepWorker, step_id_of

__all__ = ["Delivery", "NestjsSource", "NestjsWorker", "ShutdownIncomplete", "StepTransport"]

logger = logging.getLogger("sync_worker.nestjs")

_TICK_SECONDS = 0.5
_SETTLE_ATTEMPTS = 4
_CANCELLED_RUNS_KEPT = 10000


class Delivery:
    """One task this worker holds (claimed, lease running) until it is settled or released."""

    def __init__(self, task: Dict[str, Any], handle: Any) -> None:
        self.task = task
        self.handle = handle  # the transport's own reference (a BullJob, a claimed row)
        self.step_id = step_id_of(task)
        self.lost = False  # the lease was taken away: someone else may run the step again
        self.last_beat = 0.0


class StepTransport(Protocol):
    """What :class:`NestjsWorker` needs from a broker. Every method may block; none may be async."""

    kind: str
    #: Seconds a claim stays ours without renewal (BullMQ lock duration, SQL lease).
    lease_seconds: float

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        """Connect and check the broker is reachable (fail fast); prepare queues/tables."""

    def claim(self) -> Optional[Delivery]:
        """One task moved to us, or None when nothing waits. Never blocks for long."""

    def wait_for_work(self, timeout: float) -> None:
        """Block up to ``timeout`` s or until work may have arrived."""

    def settle(self, delivery: Delivery, result: Dict[str, Any], payload: str) -> None:
        """Deliver the result (JSON ``payload``) to the engine and retire the task."""

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        """Extend the lease of every held task; mark ``lost`` the ones no longer ours."""

    def beat(self, delivery: Delivery) -> None:
        """``heartbeat_sync``: extend this task's lease now and beat the engine's liveness window."""

    def maintain(self, now: float) -> None:
        """Periodic work (stalled checks, worker heartbeat keys); called every keeper tick."""

    def release(self, delivery: Delivery) -> None:
        """Give an unfinished task back at once (cold stop) so another worker can run it."""

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        """Extra loops to run until the worker stops, as (name, loop(cancel))."""

    def close(self, *, clean: bool) -> None:
        """Disconnect; ``clean`` (a completed warm stop) also withdraws the worker's liveness keys."""


class _Backoff(PollFailureBackoff):
    def __init__(self, route: str) -> None:
        super().__init__("nestjs")
        self._route = route

    @property
    def route(self) -> str:
        return self._route


class NestjsSource:
    """A nestjs-durable transport as a :class:`~sync_worker.runtime.shell.TaskSource`: the
    fetcher (the intake loop), the lease keeper, the transport's own loops, settling results."""

    def __init__(self, owner: NestjsWorker, steps: StepWorker, transport: StepTransport, *, slots: SlotPool,
                 backend: ConcurrencyBackend, fetch_role: RoleTracker, keeper_role: RoleTracker, idle_wait: float,
                 describe: Callable[[], str]) -> None:
        self.owner, self.steps, self.transport = owner, steps, transport
        self.slots, self.backend = slots, backend
        self.fetch_role, self.keeper_role = fetch_role, keeper_role
        self.idle_wait = idle_wait
        self._describe = describe
        self.fetch_cancel = CancelToken(backend.event)
        self.keeper_cancel = CancelToken(backend.event)
        self._lock = backend.lock()
        self._held: Dict[int, Delivery] = {}
        self.completed = 0
        self.failed = 0
        self.shell: Optional[RuntimeShell] = None

    # -- TaskSource --------------------------------------------------------------------------

    def join(self) -> None:
        self.transport.open(self.steps.names, self.owner)

    def start(self, shell: RuntimeShell) -> None:
        self.shell = shell
        worker_id = self.owner.worker_id
        shell.spawn_loop(f"nestjs-fetch-{worker_id}", self._fetch_loop, role="fetch loop", critical=True, intake=True)
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
                logger.warning("step %s: could not hand it back (%s); its lease will lapse",
                               delivery.step_id, type(error).__name__)

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
        return (f"nestjs worker {self.owner.worker_id}: {why} with steps still running ({', '.join(running)}); "
                "they were handed back to the broker without a result")

    # -- loops -------------------------------------------------------------------------------

    def _fetch_loop(self) -> None:
        tracker = self.fetch_role
        backoff = _Backoff(f"{self.transport.kind}:claim")
        tracker.started()
        slot: Any = None
        try:
            while not self.fetch_cancel.cancelled:
                if slot is None:  # claim only with a free slot in hand: never more work than slots
                    slot = admit(self.slots, self.fetch_cancel)
                    if slot is None:
                        break
                tracker.request_started()
                try:
                    delivery = self.transport.claim()
                    if delivery is None:
                        self.transport.wait_for_work(self.idle_wait)
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
        slot.started(str(delivery.task.get("name") or ""))

        def body(inflight: InflightTask) -> str:
            try:
                result = run_step(delivery.task, lambda task: self.steps.process_task(
                    task, heartbeat=lambda: self._beat(delivery), is_cancelled=self.owner.is_cancelled))
                if inflight.claim_report():
                    self._settle(delivery, result)
                return "completed" if result.get("status") == "completed" else "failed"
            finally:
                with self._lock:
                    self._held.pop(key, None)

        try:
            self.shell.spawn_task("step", delivery.step_id, slot, body)
        except BaseException:
            with self._lock:
                self._held.pop(key, None)
            raise

    def _settle(self, delivery: Delivery, result: Dict[str, Any]) -> None:
        payload = encode_result(result)
        delay = 0.25
        for attempt in range(1, _SETTLE_ATTEMPTS + 1):
            try:
                self.transport.settle(delivery, result, payload)
            except Exception as error:
                if attempt == _SETTLE_ATTEMPTS:
                    logger.error("step %s: could not deliver its result (%s); the broker will hand it out "
                                 "again when its lease lapses", delivery.step_id, type(error).__name__)
                    return
                logger.warning("step %s: result delivery failed (%s); retrying in %.2fs",
                               delivery.step_id, type(error).__name__, delay)
                self.backend.sleep(delay)
                delay *= 2
                continue
            if result.get("status") == "completed":
                self.completed += 1
            else:
                self.failed += 1
            return

    def _beat(self, delivery: Delivery) -> None:
        now = self.backend.monotonic()
        if now - delivery.last_beat < min(1.0, self.transport.lease_seconds / 10.0):
            return
        delivery.last_beat = now
        try:
            self.transport.beat(delivery)
        except Exception as error:  # a missed beat is covered by the keeper's renewal
            logger.warning("step %s: heartbeat failed (%s)", delivery.step_id, type(error).__name__)

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
                    if now >= next_renew:
                        held = self._held_deliveries()
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
    """Serve ``steps`` from ``transport`` until stopped (``run()`` blocks; ``stop()`` from anywhere).

    ``concurrency`` is a fixed N, ``"adaptive"`` or a dict of knobs (docs/concurrency.md);
    ``memory_probe`` is where the admission gate reads memory (default: cgroup, then /proc).
    """

    def __init__(
        self,
        steps: StepWorker,
        transport: StepTransport,
        *,
        concurrency: ConcurrencyOption = 4,
        pool: Optional[str] = None,
        shutdown_timeout: float = 30.0,
        instance_id: Optional[str] = None,
        idle_wait: float = 1.0,
        memory_probe: Optional[MemoryProbe] = None,
    ) -> None:
        if not steps.names:
            raise ValueError("the StepWorker has no steps registered")
        if shutdown_timeout < 0 or idle_wait <= 0:
            raise ValueError("shutdown_timeout must be >= 0 and idle_wait > 0")
        self.steps = steps
        self.transport = transport
        self.concurrency_config = resolve_concurrency(concurrency)
        self.concurrency = self.concurrency_config.capacity
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
        slots = SlotPool(b, "step", self.concurrency, self.gate)
        board = StatusBoard(self.worker_id, "nestjs", transport.kind, b.monotonic, b.native_lock)
        lease = max(1.0, float(transport.lease_seconds))
        fetch_role = board.add_role(RoleTracker(
            "step", b.monotonic, overdue_seconds=max(30.0, 2 * idle_wait), stall_seconds=max(120.0, 4 * lease),
            is_poller=True, lock_factory=b.native_lock))
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
        #: The transport as the shell's task source.
        self.source = NestjsSource(self, steps, transport, slots=slots, backend=b, fetch_role=fetch_role,
                                   keeper_role=keeper_role, idle_wait=self.idle_wait, describe=self._describe)
        self.shell.attach(self.source)

    def _describe(self) -> str:
        line = (f"nestjs worker {self.worker_id} serving {', '.join(self.steps.names)} over {self.transport.kind} "
                f"({self.pool}, {self.concurrency} slots)")
        if self.concurrency_config.adaptive:
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
