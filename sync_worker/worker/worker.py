"""``Worker``: registration, pollers, slots, heartbeat, shutdown and status, on one backend.

Tasks of a running worker (threads or greenlets, all spawned through the backend):

* the caller of :meth:`Worker.run` registers, then supervises: a five-second progress tick
  (on gevent the hub monitor's stamp is that tick, so the supervisor does not wake for it),
  and it fails the worker as soon as a poller exits;
* the pollers of each configured role (workflow, activity: ``max_concurrent_*_task_polls``
  each, every one polling only with a reserved free slot; query: one, on a cloned client and
  connection pool);
* the registration heartbeat;
* one task per accepted workflow or activity task, each holding its slot.

``stop()`` (from any thread, any number of times, one shared result) cancels the poll
token, which aborts in-flight long polls at once, drains accepted work within
``shutdown_timeout`` while heartbeats continue, then removes the registration within
what is left of that deadline. A cold stop abandons running work and, on a backend that
can (greenlets), kills it at its next cooperative point.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import activity as activity_api
from .. import health
from ..cancel import CancelToken
from ..errors import (
    WorkerShutdown,
)
from ..interceptors import WorkerInterceptor
from ..runtime.admission import AdmissionGate, ConcurrencyOption, ControlLoop, resolve_concurrency, start_control_loop
from ..runtime.backend import ConcurrencyBackend, SchedulerMonitor, TaskHandle, backend_for_pool, default_pool
from ..runtime.inflight import InflightSet
from ..runtime.metrics import MetricsRecorder, NoopMetrics
from ..runtime.slots import Slot, SlotPool
from ..runtime.status import (
    DEFAULT_EVENT_LOOP_STALL_SECONDS,
    RoleTracker,
    StatusBoard,
    WorkerState,
    WorkerStatus,
    default_request_bounds,
)
from . import dispatch, joining, shutdown, workflow_support
from .activities import activity_map
from .interception import checked_interceptors
from .pollers import Poller, poll_timeout_seconds
from .recovery import ServerContact, run_heartbeat
from .registration import (
    ProcessMetrics,
)
from .run_until import wait_until_terminal
from .shutdown import ShutdownIncomplete
from .sticky import StickyWorkflowCache

__all__ = ["ShutdownIncomplete", "Worker"]

logger = logging.getLogger("sync_worker.worker")

# The supervisor's liveness tick (threads); stop() and a poller's exit wake it at once. Every wakeup
# costs an idle worker CPU (bench/idle_cpu.py), and liveness allows 30 s without a tick.
_SUPERVISOR_TICK_SECONDS = 5.0
# Under a cooperative scheduler the monitor's stamp is the progress tick and the supervisor wakes
# only for stop() or a poller's exit; this is its backstop look at the pollers.
_SUPERVISOR_BACKSTOP_SECONDS = 300.0


def _poller_count(kind: str, value: object) -> int:
    """A validated ``max_concurrent_<kind>_task_polls`` (an int of at least 1)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_concurrent_{kind}_task_polls must be an int of at least 1, got {value!r}")
    return value


class Worker:
    """Polls one task queue and runs its workflow, activity and query tasks on threads or greenlets.

    ``pool`` is ``"threads"`` or ``"gevent"``; when omitted it is ``SYNC_WORKER_POOL`` if set,
    else ``"gevent"`` in a process monkey-patched for gevent, else ``"threads"``. The gevent
    pool refuses an unpatched process (``GeventNotPatched``).

    ``max_concurrent_activity_tasks`` is a fixed N (never gated), ``"adaptive"``, or a dict of
    adaptive knobs (``{"min": 1, "max": 16, "ramAdmitPct": 70, ...}``, camelCase or snake_case):
    the memory admission gate and the latency-gradient controller then size the activity slots
    (see docs/concurrency.md).

    ``max_concurrent_workflow_task_polls`` / ``max_concurrent_activity_task_polls`` (default 1)
    run that many pollers for the role, each long-polling only while it holds a free slot
    reserved for the task it may receive (see docs/worker.md).
    """

    def __init__(
        self,
        client: Any,
        *,
        task_queue: str,
        workflows: Sequence[Any] = (),
        activities: Sequence[Callable[..., Any]] = (),
        worker_id: Optional[str] = None,
        build_id: Optional[str] = None,
        poll_timeout: float = 35.0,
        max_concurrent_workflow_tasks: int = 10,
        max_concurrent_activity_tasks: ConcurrencyOption = 10,
        max_concurrent_workflow_task_polls: int = 1,
        max_concurrent_activity_task_polls: int = 1,
        shutdown_timeout: float = 30.0,
        heartbeat_interval: float = 60.0,
        max_startup_wait: float = 0.0,
        metrics: Optional[MetricsRecorder] = None,
        interceptors: Sequence[WorkerInterceptor] = (),
        pool: Optional[str] = None,
        sticky_cache_capacity: int = 0,
        sticky_cache_max_bytes: int = 16 * 1024 * 1024,
        sticky_cache_ttl_seconds: int = 300,
    ) -> None:
        if not isinstance(task_queue, str) or not task_queue:
            raise ValueError("task_queue must be a non-empty string")
        if shutdown_timeout < 0 or heartbeat_interval <= 0 or poll_timeout < 0:
            raise ValueError("shutdown_timeout, heartbeat_interval and poll_timeout must be positive")
        self.client = client
        self.task_queue = task_queue
        self.worker_id = worker_id or f"sync-worker-{uuid.uuid4().hex[:8]}"
        self.build_id = build_id
        self.poll_timeout = float(poll_timeout)
        self.shutdown_timeout = float(shutdown_timeout)
        self.heartbeat_interval = float(heartbeat_interval)
        #: Seconds start-up retries discovery and registration (0: one attempt); ``--max-startup-wait``.
        self.max_startup_wait = max(0.0, float(max_startup_wait))
        self.max_concurrent_workflow_tasks = int(max_concurrent_workflow_tasks)
        #: Pollers per role; each holds a reserved slot for its poll, so leases never exceed free slots.
        self.max_concurrent_workflow_task_polls = _poller_count("workflow", max_concurrent_workflow_task_polls)
        self.max_concurrent_activity_task_polls = _poller_count("activity", max_concurrent_activity_task_polls)
        self.activity_concurrency = resolve_concurrency(max_concurrent_activity_tasks)
        self.max_concurrent_activity_tasks = self.activity_concurrency.capacity
        # Every poller, slot and the heartbeat may hold a connection at once: size the pool for
        # that, so a busy worker never discards connections.
        ensure_capacity = getattr(client, "ensure_pool_capacity", None)
        if callable(ensure_capacity):
            ensure_capacity(self.max_concurrent_workflow_tasks + self.max_concurrent_activity_tasks + 6)
        self.metrics: MetricsRecorder = metrics if metrics is not None else NoopMetrics()
        self.interceptors = checked_interceptors(interceptors)
        self.backend: ConcurrencyBackend = backend_for_pool(pool if pool is not None else default_pool())
        self.pool = self.backend.name
        activity_api._install_local(self.backend.name, self.backend.local)

        #: The sticky workflow cache (off with capacity 0); docs/worker.md "Sticky workflow cache".
        self._sticky = StickyWorkflowCache(sticky_cache_capacity, sticky_cache_max_bytes, sticky_cache_ttl_seconds,
                                           clock=self.backend.monotonic, lock=self.backend.native_lock())
        self.activities = activity_map(list(activities))
        self.workflows = workflow_support.WorkflowSet(list(workflows))
        self._workflow_executor: Optional[Callable[..., Any]] = None
        self._query_executor: Optional[Callable[..., Any]] = None

        self._wf_slots = SlotPool(self.backend, "workflow", self.max_concurrent_workflow_tasks)
        self._act_gate = self._activity_gate()
        self._act_slots = SlotPool(self.backend, "activity", self.max_concurrent_activity_tasks, self._act_gate)
        self._concurrency_loop: Optional[ControlLoop] = None
        self._inflight = InflightSet(self.backend)
        self._process_metrics = ProcessMetrics()

        namespace = str(getattr(client, "namespace", "default"))
        self._namespace: Optional[str] = getattr(client, "namespace", None)
        self._board = StatusBoard(self.worker_id, namespace, task_queue, self.backend.monotonic,
                                  self.backend.native_lock)
        self._monitor: Optional[SchedulerMonitor] = self.backend.scheduler_monitor()
        overdue, stall = default_request_bounds(
            float(getattr(client, "timeout", 60.0) or 60.0), int(getattr(client, "transport_retries", 3) or 3),
            self.poll_timeout, poll_timeout_seconds(self.poll_timeout))
        self._overdue, self._stall = overdue, stall
        self._registration_role = RoleTracker("registration", self.backend.monotonic, overdue_seconds=overdue,
                                              stall_seconds=stall, is_poller=False,
                                              lock_factory=self.backend.native_lock)
        self._board.set_registration_tracker(self._registration_role)
        self._heartbeat_role = self._board.add_role(self._tracker("heartbeat", is_poller=False))
        if self.workflows:
            self._board.add_role(self._tracker("workflow", is_poller=True))
        if self.activities:
            self._board.add_role(self._tracker("activity", is_poller=True))

        b = self.backend
        self._lock = b.lock()
        self._run_started = False
        self._registration_done = b.event()
        self._startup_done = b.event()  # registration ended and pollers started (or startup gave up)
        self._registered = False
        self._registration_token: Optional[str] = None
        self._query_enabled = False
        self._stop_requested = b.event()
        self._supervisor_wake = b.event()  # a stop request or a poller's exit: the supervisor looks at once
        self._exited_pollers: List[Poller] = []
        self._cold = b.event()
        self._poll_cancel = CancelToken(b.event)
        self._heartbeat_stop = b.event()
        self._heartbeat_cancel = CancelToken(b.event)
        self._contact = ServerContact(b)
        self._shutdown_started = False
        self._shutdown_done = b.event()
        self._shutdown_error: Optional[BaseException] = None
        self._loop_failed = False
        self._pollers: List[Poller] = []
        self._poller_handles: List[TaskHandle] = []
        self._heartbeat_handle: Optional[TaskHandle] = None
        self._query_client: Any = None

    # -- configuration helpers -------------------------------------------------------------

    def _tracker(self, role: str, *, is_poller: bool) -> RoleTracker:
        return RoleTracker(role, self.backend.monotonic, overdue_seconds=self._overdue,
                           stall_seconds=self._stall, is_poller=is_poller, lock_factory=self.backend.native_lock)

    def _activity_gate(self) -> AdmissionGate:
        return AdmissionGate(self.activity_concurrency, clock=self.backend.monotonic,
                             lock_factory=self.backend.native_lock, event_factory=self.backend.event,
                             metrics=self.metrics,
                             tags={"task_kind": "activity", "task_queue": self.task_queue})

    def _set_activity_concurrency(self, concurrency: ConcurrencyOption) -> None:
        """Re-size the activity slots (the CLI's ``-c`` / ``--autoscale``); only before the worker runs."""
        config = resolve_concurrency(concurrency)
        with self._lock:
            if self._run_started:
                raise RuntimeError("cannot change concurrency of a running worker")
            self.activity_concurrency = config
            self.max_concurrent_activity_tasks = config.capacity
            self._act_gate = self._activity_gate()
            self._act_slots = SlotPool(self.backend, "activity", self.max_concurrent_activity_tasks, self._act_gate)
        ensure_capacity = getattr(self.client, "ensure_pool_capacity", None)
        if callable(ensure_capacity):
            ensure_capacity(self.max_concurrent_workflow_tasks + self.max_concurrent_activity_tasks + 6)

    def _set_poller_counts(self, *, workflow: Optional[int] = None, activity: Optional[int] = None) -> None:
        """Set the pollers per role (the CLI's ``--workflow-pollers`` / ``--activity-pollers``); only before run."""
        with self._lock:
            if self._run_started:
                raise RuntimeError("cannot change the pollers of a running worker")
            if workflow is not None:
                self.max_concurrent_workflow_task_polls = _poller_count("workflow", workflow)
            if activity is not None:
                self.max_concurrent_activity_task_polls = _poller_count("activity", activity)

    def _process_metrics_sample(self) -> Dict[str, Any]:
        """``process_metrics``; ``memory_bytes`` is the gate's current usage figure when it has one."""
        metrics = self._process_metrics.sample()
        if self.activities:
            usage = self._act_gate.status().usage_bytes
            if usage is not None:
                metrics["memory_bytes"] = int(usage)
        return metrics

    def task_slots(self) -> Dict[str, int]:
        return {
            "workflow_available": self._wf_slots.available,
            "activity_available": self._act_slots.available,
            "session_available": 0,
        }

    # -- public API ------------------------------------------------------------------------

    def status(
        self,
        *,
        event_loop_stall_seconds: float = DEFAULT_EVENT_LOOP_STALL_SECONDS,
        request_overdue_seconds: Optional[float] = None,
        request_stall_seconds: Optional[float] = None,
    ) -> WorkerStatus:
        """A read-only readiness/liveness snapshot; no network I/O; safe from any thread.

        A worker with activities adds ``concurrency``: its activity slots' mode, limit, in flight,
        memory source/usage/ceiling, gate state, waiting, deferrals, learned costs, last adjustment.
        """
        snapshot = self._board.snapshot(
            event_loop_stall_seconds=event_loop_stall_seconds,
            request_overdue_seconds=request_overdue_seconds,
            request_stall_seconds=request_stall_seconds,
        )
        if not self.activities:
            return snapshot
        return dataclasses.replace(snapshot, concurrency=self._act_gate.status())

    @property
    def state(self) -> WorkerState:
        return self._board.state

    def run(self) -> None:
        """Register, poll until :meth:`stop`, then drain and deregister (blocks the caller)."""
        self._begin_run()
        loop_error: Optional[BaseException] = None
        try:
            self._start()
            self._supervise()
        except BaseException as error:
            loop_error = error
        self._finish(loop_error)

    def run_until(self, *, workflow_id: str, timeout: float = 60.0, poll_interval: float = 0.5) -> Any:
        """Run until the workflow reaches a terminal state; returns its description.

        ``timeout`` includes discovery and registration. A timeout never cancels the run.
        An external :meth:`stop` ends the wait with :class:`WorkerShutdown`.
        """
        self._begin_run()
        deadline = self.backend.monotonic() + timeout
        runner_error: List[BaseException] = []

        def runner() -> None:
            try:
                self._start()
                self._supervise()
            except BaseException as error:
                runner_error.append(error)
                self._request_stop()

        handle = self.backend.spawn(f"sync-worker-run-{self.worker_id}", runner)
        primary: Optional[BaseException] = None
        result: Any = None
        try:
            result = self._await_workflow(workflow_id, deadline, timeout, poll_interval, handle, runner_error)
        except BaseException as error:
            primary = error
        self._request_stop()
        handle.join()
        if runner_error and (primary is None or isinstance(primary, WorkerShutdown)):
            primary = runner_error[0]
        # A timeout or an external stop of the wait is not a worker failure; a loop error is.
        self._finish(primary, loop_failed=bool(runner_error))
        return result

    def stop(self, *, cold: bool = False) -> None:
        """Stop polling, drain accepted work, deregister. Repeated calls share one result.

        ``cold=True`` stops waiting for running work at once: it is abandoned (nothing is
        reported for it), the registration is kept and :class:`ShutdownIncomplete` is raised.
        """
        self._request_stop()
        if cold:
            self._cold.set()
        self._act_gate.begin_drain()
        self._poll_cancel.cancel()
        with self._lock:
            performer = not self._shutdown_started
            self._shutdown_started = True
        if performer:
            try:
                self._shutdown()
            except BaseException as error:
                self._shutdown_error = error
            finally:
                self._stop_monitor()
                if self._concurrency_loop is not None:
                    self._concurrency_loop.stop()
                health.unregister(self)
                self._shutdown_done.set()
        else:
            while not self._shutdown_done.wait(_SUPERVISOR_TICK_SECONDS):
                self._board.tick(_SUPERVISOR_TICK_SECONDS)
        if self._shutdown_error is not None:
            raise self._shutdown_error

    # -- startup ------------------------------------------------------------------------------

    def _request_stop(self) -> None:
        self._stop_requested.set()
        self._supervisor_wake.set()

    def _begin_run(self) -> None:
        with self._lock:
            if self._run_started:
                raise RuntimeError(f"worker {self.worker_id} was already run; create a new Worker")
            if self._shutdown_started:
                raise RuntimeError(f"worker {self.worker_id} was stopped before it ran; create a new Worker")
            self._run_started = True
        health.register(self)
        self._board.tick()
        if self._monitor is not None:
            # Its stamps are the progress ticks: they prove the hub runs, which is all the
            # supervisor's own tick would prove there.
            self._monitor.start(on_tick=self._board.tick)
            self._board.set_scheduler_monitor(self._monitor)

    def _stop_monitor(self) -> None:
        if self._monitor is not None:
            self._board.set_scheduler_monitor(None)
            self._monitor.stop()

    def _finish(self, loop_error: Optional[BaseException], *, loop_failed: Optional[bool] = None) -> None:
        if loop_failed is None:
            # KeyboardInterrupt/SystemExit are stop requests, not failures of the worker loop.
            loop_failed = isinstance(loop_error, Exception) and not isinstance(loop_error, WorkerShutdown)
        if loop_failed:
            self._loop_failed = True
        try:
            self.stop()
        except BaseException as shutdown_error:
            if loop_error is not None:
                raise loop_error from shutdown_error
            raise
        if loop_error is not None:
            raise loop_error

    def _start(self) -> None:
        try:
            self._start_once()
        finally:
            self._startup_done.set()

    def _start_once(self) -> None:
        try:
            self._register()
            self._registered = True
        except BaseException:
            self._board.set_state(WorkerState.FAILED)
            raise
        finally:
            self._registration_done.set()
        if self._stop_requested.is_set():
            return
        self._heartbeat_role.started()
        self._heartbeat_handle = self.backend.spawn(f"sync-worker-heartbeat-{self.worker_id}", self._heartbeat_loop)
        if self.activities:
            self._concurrency_loop = start_control_loop(self._act_gate, self.backend)
        self._start_pollers()
        self._board.set_state(WorkerState.RUNNING)
        logger.info("worker %s running on task queue %r (pool %s; %d workflow, %d activity types)",
                    self.worker_id, self.task_queue, self.backend.name, len(self.workflows), len(self.activities))

    def _register(self) -> None:
        joining.register(self)

    def _adopt_heartbeat_interval(self, ack: Any) -> None:
        joining.adopt_heartbeat_interval(self, ack)

    def _start_pollers(self) -> None:
        seconds = poll_timeout_seconds(self.poll_timeout)
        client = self.client

        def add(kind: str, poll: Callable[[str, CancelToken], Optional[Dict[str, Any]]],
                dispatch: Callable[[Dict[str, Any], Optional[Slot]], None], pool: Optional[SlotPool],
                count: int = 1) -> None:
            tracker = self._board.add_role(self._tracker(kind, is_poller=True))
            tracker.started()
            # More pollers than slots could never all poll at once: each waits for a slot first.
            count = max(1, min(count, pool.capacity if pool is not None else 1))
            for index in range(count):
                poller = Poller(kind=kind, task_queue=self.task_queue, backend=self.backend, poll=poll,
                                dispatch=dispatch, cancel=self._poll_cancel, tracker=tracker,
                                metrics=self.metrics, pool=pool, wait_seconds=seconds, contact=self._contact)
                self._pollers.append(poller)
                name = f"sync-worker-{kind}-poller" + (f"-{index + 1}" if index else "")
                self._poller_handles.append(self.backend.spawn(name, functools.partial(self._run_poller, poller)))

        common = {"worker_id": self.worker_id, "task_queue": self.task_queue, "timeout_seconds": seconds,
                  "build_id": self.build_id}
        if self.workflows:
            self.workflows.registry()  # built once here, not raced by the first task threads
            add("workflow",
                lambda pid, cancel: client.poll_workflow_task(poll_request_id=pid, cancel=cancel, **common),
                self._dispatch_workflow, self._wf_slots, self.max_concurrent_workflow_task_polls)
        if self.activities:
            add("activity",
                lambda pid, cancel: client.poll_activity_task(poll_request_id=pid, cancel=cancel, **common),
                self._dispatch_activity, self._act_slots, self.max_concurrent_activity_task_polls)
        if self._query_enabled:
            self._query_client = client.clone()
            query_client = self._query_client
            add("query",
                lambda pid, cancel: query_client.poll_query_task(poll_request_id=pid, cancel=cancel, **common),
                self._run_query, None)

    # -- task dispatch (worker/dispatch.py) ------------------------------------------------------

    def _dispatch_activity(self, task: Dict[str, Any], slot: Optional[Slot]) -> None:
        dispatch.dispatch_activity(self, task, slot)

    def _dispatch_workflow(self, task: Dict[str, Any], slot: Optional[Slot]) -> None:
        dispatch.dispatch_workflow(self, task, slot)

    def _run_query(self, task: Dict[str, Any], slot: Optional[Slot]) -> None:
        dispatch.run_query(self, task, slot)

    def sticky_cache_metrics(self) -> Dict[str, int]:
        """The sticky cache's counters: hit, miss, eviction, forced_cold_replay, entries, history_bytes."""
        return self._sticky.metrics()

    # -- supervision and heartbeat -------------------------------------------------------------------

    def _run_poller(self, poller: Poller) -> None:
        try:
            poller.run()
        finally:
            self._exited_pollers.append(poller)
            self._supervisor_wake.set()

    def _supervise(self) -> None:
        monitor = self._monitor
        # With a scheduler monitor its stamps tick the board; the supervisor then only waits.
        ticking = monitor is None
        every = _SUPERVISOR_TICK_SECONDS if ticking else _SUPERVISOR_BACKSTOP_SECONDS
        next_within = _SUPERVISOR_TICK_SECONDS if monitor is None else float(getattr(monitor, "interval", every))
        self._board.tick(next_within)
        while not self._stop_requested.is_set():
            self._supervisor_wake.wait(every)
            self._supervisor_wake.clear()  # before looking: a later set wakes the next wait at once
            if ticking:
                self._board.tick(_SUPERVISOR_TICK_SECONDS)
            if self._stop_requested.is_set():
                break
            exited = list(self._exited_pollers) + [
                poller for poller, handle in zip(self._pollers, self._poller_handles) if not handle.is_alive()]
            if exited:
                poller = exited[0]
                raise RuntimeError(f"worker {self.worker_id}: the {poller.kind} poller exited") from poller.error
        self._board.tick(next_within)

    def _heartbeat_loop(self) -> None:
        def send() -> Any:
            body = {"worker_id": self.worker_id, "task_slots": self.task_slots(),
                    "process_metrics": self._process_metrics_sample()}
            return self.client.heartbeat_worker(body, cancel=self._heartbeat_cancel)

        run_heartbeat(send=send, interval=lambda: self.heartbeat_interval, stop=self._heartbeat_stop,
                      cancel=self._heartbeat_cancel, tracker=self._heartbeat_role, contact=self._contact,
                      on_ack=self._adopt_heartbeat_interval, clock=self.backend.monotonic)

    # -- shutdown (worker/shutdown.py) ----------------------------------------------------------------

    def _wait(self, event: Any) -> None:
        while not event.wait(_SUPERVISOR_TICK_SECONDS):
            self._board.tick(_SUPERVISOR_TICK_SECONDS)

    def _shutdown(self) -> None:
        shutdown.drain_and_deregister(self)

    # -- run_until ---------------------------------------------------------------------------------

    def _await_workflow(self, workflow_id: str, deadline: float, timeout: float, poll_interval: float,
                        runner: TaskHandle, runner_error: List[BaseException]) -> Any:
        clock = self.backend.monotonic
        while not self._registration_done.wait(0.05):
            if clock() >= deadline:
                raise TimeoutError(f"worker {self.worker_id} startup did not finish within the {timeout}s "
                                   f"workflow wait budget for {workflow_id}")
        if not self._registered:
            runner.join()
            raise runner_error[0] if runner_error else RuntimeError("worker registration failed")
        return wait_until_terminal(self.client, workflow_id, deadline=deadline, timeout=timeout,
                                   poll_interval=poll_interval, clock=clock, stopped=self._stop_requested,
                                   worker_id=self.worker_id)
