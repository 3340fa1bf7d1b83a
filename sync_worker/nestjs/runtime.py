"""``NestjsWorker``: runs a :class:`StepWorker`'s steps from a transport on our worker runtime.

The pieces are the Durable Workflow worker's own (``sync_worker.worker``): one concurrency
backend (threads or gevent greenlets), a :class:`SlotPool` admitted through ``slots.admit`` so a
worker never claims more tasks than it has slots -- with the memory admission gate
(``sync_worker.runtime.admission``; ``concurrency="adaptive"`` or a dict of knobs) asked before each
claim, so a worker short of memory leaves the task to another replica --, ``PollFailureBackoff``
for a failing broker, the in-flight set for warm/cold shutdown and a ``StatusBoard`` for
``status()`` readiness/liveness.

Loops (each spawned on the backend):

* the **fetcher** takes a free slot, claims one task (non-blocking), and runs it in that slot; with
  nothing to claim it keeps the slot and waits on the transport (BZPOPMIN on the queue markers,
  or the SQL poll interval);
* the **keeper** renews the leases of every held task every ``lease/2`` s (BullMQ renews its locks
  the same way) and lets the transport do its periodic work (stalled checks, worker heartbeat keys);
* the transport's own background loops (the Redis control channel).

A transport implements :class:`StepTransport`; see ``redis_transport`` and ``pg_transport``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple

from .. import health
from ..cancel import CancelToken
from ..runtime.admission import (
    AdmissionGate,
    ConcurrencyOption,
    ControlLoop,
    MemoryProbe,
    resolve_concurrency,
    start_control_loop,
)
from ..runtime.backend import ConcurrencyBackend, TaskHandle, backend_for_pool, default_pool
from ..runtime.backoff import PollFailureBackoff
from ..runtime.inflight import InflightSet, InflightTask
from ..runtime.slots import SlotPool, admit
from ..runtime.status import RoleTracker, StatusBoard, WorkerState, WorkerStatus
from ..worker.worker import ShutdownIncomplete
from .bounds import encode_result
from .descriptor import default_instance_id
from .steps import StepWorker, step_id_of

__all__ = ["Delivery", "NestjsWorker", "StepTransport"]

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
        self._gate = AdmissionGate(self.concurrency_config, probe=memory_probe, clock=b.monotonic,
                                   lock_factory=b.native_lock, event_factory=b.event, name="step",
                                   tags={"task_kind": "step", "task_queue": transport.kind})
        self._slots = SlotPool(b, "step", self.concurrency, self._gate)
        self._control_loop: Optional[ControlLoop] = None
        self._inflight = InflightSet(b)
        self._board = StatusBoard(self.worker_id, "nestjs", transport.kind, b.monotonic, b.native_lock)
        self._monitor = b.scheduler_monitor()
        lease = max(1.0, float(transport.lease_seconds))
        self._fetch_role = self._board.add_role(RoleTracker(
            "step", b.monotonic, overdue_seconds=max(30.0, 2 * idle_wait), stall_seconds=max(120.0, 4 * lease),
            is_poller=True, lock_factory=b.native_lock))
        self._keeper_role = self._board.add_role(RoleTracker(
            "lease", b.monotonic, overdue_seconds=lease, stall_seconds=2 * lease, is_poller=False,
            lock_factory=b.native_lock))
        self._lock = b.lock()
        self._held: Dict[int, Delivery] = {}
        self._cancelled_runs: Dict[str, None] = {}
        self._runs_lock = b.native_lock()
        self._fetch_cancel = CancelToken(b.event)
        self._keeper_cancel = CancelToken(b.event)
        self._stop_requested = b.event()
        self._cold = b.event()
        self._run_started = False
        self._opened = False
        self._shutdown_started = False
        self._shutdown_done = b.event()
        self._shutdown_error: Optional[BaseException] = None
        self._handles: List[TaskHandle] = []
        self._fetcher: Optional[TaskHandle] = None
        self.completed = 0
        self.failed = 0

    # -- public ----------------------------------------------------------------------------------

    @property
    def state(self) -> WorkerState:
        return self._board.state

    def status(self, **bounds: Any) -> WorkerStatus:
        """Readiness and liveness, from any thread, without I/O (see ``sync_worker.runtime.status``).

        ``concurrency`` carries the step slots' mode, limit, memory figures and gate state.
        """
        return dataclasses.replace(self._board.snapshot(**bounds), concurrency=self._gate.status())

    def in_flight(self) -> int:
        return self._inflight.count()

    def heartbeat_status(self) -> Dict[str, Any]:
        """The ``WorkerStatus`` object nestjs-durable reads from this worker's heartbeat key."""
        status = self._gate.status().to_wire()
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
        with self._lock:
            if self._run_started or self._shutdown_started:
                raise RuntimeError(f"nestjs worker {self.worker_id} was already run or stopped")
            self._run_started = True
        health.register(self)  # type: ignore[arg-type]  # duck-typed: health only calls status()
        self._board.tick()
        if self._monitor is not None:
            self._monitor.start()
            self._board.set_scheduler_monitor(self._monitor)
        error: Optional[BaseException] = None
        try:
            self.transport.open(self.steps.names, self)
            self._opened = True
            self._board.registered()
            self._control_loop = start_control_loop(self._gate, self.backend)
            self._board.set_state(WorkerState.RUNNING)
            logger.info("nestjs worker %s serving %s over %s (%s, %d slots)", self.worker_id,
                        ", ".join(self.steps.names), self.transport.kind, self.pool, self.concurrency)
            if self.concurrency_config.adaptive:
                logger.info("step slots are adaptive (%d..%d) behind the memory admission gate",
                            self.concurrency_config.min, self.concurrency_config.max)
            self._start_loops()
            self._supervise()
        except BaseException as caught:
            error = caught
        try:
            self.stop()
        finally:
            if error is not None and not isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise error

    def stop(self, *, cold: bool = False) -> None:
        """Stop claiming, let running steps finish within ``shutdown_timeout`` (``cold``: don't wait).

        Unfinished steps are handed back to the broker (their result is never sent) and
        :class:`~sync_worker.worker.ShutdownIncomplete` is raised.
        """
        self._stop_requested.set()
        if cold:
            self._cold.set()
        self._gate.begin_drain()
        self._fetch_cancel.cancel()
        with self._lock:
            performer = not self._shutdown_started
            self._shutdown_started = True
        if performer:
            try:
                self._shutdown()
            except BaseException as error:
                self._shutdown_error = error
            finally:
                if self._monitor is not None:
                    self._board.set_scheduler_monitor(None)
                    self._monitor.stop()
                health.unregister(self)  # type: ignore[arg-type]
                self._shutdown_done.set()
        else:
            while not self._shutdown_done.wait(_TICK_SECONDS):
                self._board.tick()
        if self._shutdown_error is not None:
            raise self._shutdown_error

    # -- loops -----------------------------------------------------------------------------------

    def _start_loops(self) -> None:
        spawn = self.backend.spawn
        self._fetcher = spawn(f"nestjs-fetch-{self.worker_id}", self._fetch_loop)
        self._handles.append(spawn(f"nestjs-keeper-{self.worker_id}", self._keeper_loop))
        for name, loop in self.transport.background():
            self._handles.append(spawn(f"nestjs-{name}-{self.worker_id}", self._guard(name, loop)))

    def _guard(self, name: str, loop: Callable[[CancelToken], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop(self._keeper_cancel)
            except Exception:
                logger.exception("nestjs worker %s: the %s loop died", self.worker_id, name)
        return run

    def _supervise(self) -> None:
        while not self._stop_requested.wait(_TICK_SECONDS):
            self._board.tick()
            if self._fetcher is not None and not self._fetcher.is_alive() and not self._stop_requested.is_set():
                raise RuntimeError(f"nestjs worker {self.worker_id}: the fetch loop exited")
        self._board.tick()

    def _fetch_loop(self) -> None:
        tracker = self._fetch_role
        backoff = _Backoff(f"{self.transport.kind}:claim")
        tracker.started()
        slot: Any = None
        try:
            while not self._fetch_cancel.cancelled:
                if slot is None:  # claim only with a free slot in hand: never more work than slots
                    slot = admit(self._slots, self._fetch_cancel)
                    if slot is None:
                        break
                tracker.request_started()
                try:
                    delivery = self.transport.claim()
                    if delivery is None:
                        self.transport.wait_for_work(self.idle_wait)
                except Exception as error:
                    tracker.request_failed(error)
                    self._fetch_cancel.wait(backoff.next_delay(error))
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
        inflight = InflightTask(self.backend, "step", delivery.step_id)
        key = self._inflight.add(inflight)
        with self._lock:
            self._held[key] = delivery

        def execute() -> None:
            ok = False
            slot.started(str(delivery.task.get("name") or ""))
            try:
                result = self.steps.process_task(delivery.task, heartbeat=lambda: self._beat(delivery),
                                                 is_cancelled=self.is_cancelled)
                ok = result.get("status") == "completed"
                if inflight.claim_report():
                    self._settle(delivery, result)
            finally:
                with self._lock:
                    self._held.pop(key, None)
                self._inflight.remove(key)
                slot.release(ok=ok)

        inflight.handle = self.backend.spawn(f"nestjs-step-{delivery.step_id}", execute)

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
        tracker = self._keeper_role
        tracker.started()
        clock = self.backend.monotonic
        next_renew = clock() + self.transport.lease_seconds / 2.0
        failures_logged: Set[str] = set()
        try:
            while not self._keeper_cancel.wait(_TICK_SECONDS):
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
                                       self.worker_id, summary)
                    next_renew = min(next_renew, now + 1.0)
                    continue
                failures_logged.clear()
                tracker.request_succeeded()
        finally:
            tracker.exited()

    # -- shutdown --------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        if not self._run_started:
            self._board.set_state(WorkerState.STOPPED)
            return
        if not self._opened:  # the broker was unreachable (or refused us): nothing ran
            self._board.set_state(WorkerState.FAILED)
            try:
                self.transport.close(clean=False)
            except Exception:  # a half-open transport may fail to close; it holds nothing
                pass
            return
        self._board.set_state(WorkerState.DRAINING)
        clock = self.backend.monotonic
        deadline = clock() + self.shutdown_timeout
        logger.info("nestjs worker %s stopping: draining %d step(s) within %.1f s", self.worker_id,
                    self._inflight.count(), self.shutdown_timeout)
        if self._fetcher is not None:
            self._fetcher.join(max(0.0, min(self.idle_wait + 5.0, deadline - clock())))
        drained = self._inflight.wait_empty(deadline, tick=self._board.tick, interrupted=self._cold.is_set)
        running = [f"step:{t.task_id}" for t in self._inflight.snapshot()]
        if not drained:
            for inflight in self._inflight.snapshot():
                inflight.abandon()
            for delivery in self._held_deliveries():
                try:
                    self.transport.release(delivery)
                except Exception as error:
                    logger.warning("step %s: could not hand it back (%s); its lease will lapse",
                                   delivery.step_id, type(error).__name__)
            if self._cold.is_set():
                killed = sum(1 for t in self._inflight.snapshot()
                             if t.handle is not None and self.backend.kill(t.handle))
                if killed:
                    logger.warning("nestjs worker %s cold stop: killed %d step(s)", self.worker_id, killed)
        self._keeper_cancel.cancel()
        if self._control_loop is not None:
            self._control_loop.stop()
        for handle in self._handles:
            handle.join(max(0.0, min(5.0, deadline - clock())))
        try:
            self.transport.close(clean=drained)
        except Exception as error:
            logger.warning("nestjs worker %s: closing the transport failed (%s)", self.worker_id,
                           type(error).__name__)
        if not drained:
            self._board.set_state(WorkerState.FAILED)
            why = "cold stop requested" if self._cold.is_set() else "shutdown deadline reached"
            raise ShutdownIncomplete(
                f"nestjs worker {self.worker_id}: {why} with steps still running ({', '.join(running)}); "
                "they were handed back to the broker without a result", running)
        self._board.set_state(WorkerState.STOPPED)
        logger.info("nestjs worker %s stopped", self.worker_id)


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
