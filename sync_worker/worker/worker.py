"""``Worker``: one task queue of the Durable Workflow server, on the runtime shell.

The worker assembles the pieces and owns none of their state:

* a :class:`~sync_worker.runtime.shell.RuntimeShell` (lifecycle, drain, cold kill, supervision,
  in-flight set, status board) on one concurrency backend (threads or gevent greenlets);
* a :class:`~sync_worker.worker.source.DurableWorkflowSource` (registration, pollers, heartbeat,
  deregistration) and its :class:`~sync_worker.worker.dispatch.TaskDispatcher`;
* the workflow and activity slot pools, the activity memory admission gate and the sticky cache.

``stop()`` (from any thread, any number of times, one shared result) cancels the poll token,
which aborts in-flight long polls at once, drains accepted work within ``shutdown_timeout``
while heartbeats continue, then removes the registration within what is left of that deadline.
A cold stop abandons running work and, on a backend that can (greenlets), kills it at its next
cooperative point. See docs/runtime.md.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import activity as activity_api
from ..cancel import CancelToken
from ..errors import WorkerShutdown
from ..interceptors import WorkerInterceptor
from ..protocol import WorkerPlane
from ..runtime.admission import AdmissionGate, ConcurrencyOption, resolve_concurrency
from ..runtime.backend import ConcurrencyBackend, TaskHandle, backend_for_pool, default_pool
from ..runtime.metrics import MetricsRecorder, NoopMetrics
from ..runtime.shell import RuntimeShell, ShutdownIncomplete
from ..runtime.slots import SlotPool
from ..runtime.status import (
    DEFAULT_EVENT_LOOP_STALL_SECONDS,
    RoleTracker,
    StatusBoard,
    WorkerState,
    WorkerStatus,
    default_request_bounds,
)
from ..worker_session import WorkerSession, WorkerSessionOptions
from .activities import activity_map
from .dispatch import TaskDispatcher
from .interception import checked_interceptors
from .joining import Registrar
from .pollers import poll_timeout_seconds
from .recovery import ServerContact
from .registration import ProcessMetrics
from .run_until import wait_until_terminal
from .sessions import SessionBook
from .source import DurableWorkflowSource
from .sticky import StickyWorkflowCache
from .workflow_support import WorkflowSet

__all__ = ["ShutdownIncomplete", "Worker"]


def _poller_count(kind: str, value: object) -> int:
    """A validated ``max_concurrent_<kind>_task_polls`` (an int of at least 1)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_concurrent_{kind}_task_polls must be an int of at least 1, got {value!r}")
    return value


def with_external_storage(client: Any, driver: Any, threshold_bytes: Optional[int], cache: Any) -> Any:
    """The worker's own client storing and reading payloads through ``driver`` (docs/external-storage.md).

    What is not given comes from ``client`` (its driver, threshold and cache), as in the SDK; the
    caller's client is left as it was (a clone with its own connection pool is returned).
    """
    driver = driver if driver is not None else getattr(client, "external_storage", None)
    if driver is None:
        raise ValueError("external_storage_threshold_bytes / external_storage_cache need an external_storage driver")
    if threshold_bytes is not None and (type(threshold_bytes) is not int or threshold_bytes < 1):
        raise ValueError("external_storage_threshold_bytes must be an int of at least 1 when provided")
    threshold = threshold_bytes if threshold_bytes is not None else getattr(client, "external_storage_threshold_bytes",
                                                                             None)
    cache = cache if cache is not None else getattr(client, "external_storage_cache", None)
    clone = getattr(client, "clone", None)
    if clone is None:
        raise TypeError(f"{type(client).__name__} cannot carry external storage (it has no clone())")
    return clone(external_storage=driver, external_storage_threshold_bytes=threshold, external_storage_cache=cache)


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

    ``external_storage`` / ``external_storage_threshold_bytes`` / ``external_storage_cache`` (the
    SDK's): payloads over the threshold are stored through the driver and travel as references;
    references in tasks and histories are fetched and verified (docs/external-storage.md). What
    is not given comes from ``client``; the worker then runs on a clone of it.

    ``max_concurrent_worker_sessions`` (default 10) caps the session leases this worker holds
    (``worker_session(options)``, docs/sessions.md).
    """

    def __init__(
        self,
        client: WorkerPlane,
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
        sticky_cache_capacity: Optional[int] = None,
        sticky_cache_max_bytes: int = 16 * 1024 * 1024,
        sticky_cache_ttl_seconds: int = 300,
        external_storage: Any = None,
        external_storage_threshold_bytes: Optional[int] = None,
        external_storage_cache: Any = None,
        max_concurrent_worker_sessions: int = 10,
    ) -> None:
        if not isinstance(task_queue, str) or not task_queue:
            raise ValueError("task_queue must be a non-empty string")
        owns_client = external_storage is not None or external_storage_threshold_bytes is not None or \
            external_storage_cache is not None
        if owns_client:
            client = with_external_storage(client, external_storage, external_storage_threshold_bytes,
                                           external_storage_cache)
        if shutdown_timeout < 0 or heartbeat_interval <= 0 or poll_timeout < 0:
            raise ValueError("shutdown_timeout, heartbeat_interval and poll_timeout must be positive")
        self.client = client
        self.task_queue = task_queue
        self.worker_id = worker_id or f"sync-worker-{uuid.uuid4().hex[:8]}"
        self.build_id = build_id
        self.poll_timeout = float(poll_timeout)
        self.max_concurrent_workflow_tasks = int(max_concurrent_workflow_tasks)
        #: Pollers per role; each holds a reserved slot for its poll, so leases never exceed free slots.
        self.max_concurrent_workflow_task_polls = _poller_count("workflow", max_concurrent_workflow_task_polls)
        self.max_concurrent_activity_task_polls = _poller_count("activity", max_concurrent_activity_task_polls)
        self.metrics: MetricsRecorder = metrics if metrics is not None else NoopMetrics()
        self.interceptors = checked_interceptors(interceptors)
        self.backend: ConcurrencyBackend = backend_for_pool(pool if pool is not None else default_pool())
        self.pool = self.backend.name
        activity_api.install_local(self.backend.name, self.backend.local)
        b = self.backend
        contact = ServerContact(b)
        #: The session leases this worker holds (docs/sessions.md); renewed on the heartbeat.
        self.sessions = SessionBook(client, self.worker_id, max_concurrent_worker_sessions, clock=b.monotonic,
                                    lock_factory=b.native_lock, wake=contact.wake_heartbeat)
        self.max_concurrent_worker_sessions = self.sessions.capacity

        #: The sticky workflow cache (on by default; off with capacity 0); docs/worker.md "Sticky workflow cache".
        self.sticky_cache = StickyWorkflowCache(sticky_cache_capacity, sticky_cache_max_bytes, sticky_cache_ttl_seconds,
                                                clock=b.monotonic, lock=b.native_lock(),
                                                pressure=lambda: self.activity_gate.deferring)
        self.activities = activity_map(list(activities))
        self.workflows = WorkflowSet(list(workflows))
        self._process_metrics = ProcessMetrics()
        self._workflow_slots = SlotPool(b, "workflow", self.max_concurrent_workflow_tasks)
        self.activity_concurrency = resolve_concurrency(max_concurrent_activity_tasks)
        self.max_concurrent_activity_tasks = self.activity_concurrency.capacity
        self.activity_gate = self._new_activity_gate()
        self._activity_slots = SlotPool(b, "activity", self.max_concurrent_activity_tasks, self.activity_gate)
        self._ensure_pool_capacity()

        namespace = str(getattr(client, "namespace", "default"))
        board = StatusBoard(self.worker_id, namespace, task_queue, b.monotonic, b.native_lock)
        overdue, stall = default_request_bounds(
            float(getattr(client, "timeout", 60.0) or 60.0), int(getattr(client, "transport_retries", 3) or 3),
            self.poll_timeout, poll_timeout_seconds(self.poll_timeout))

        def tracker(role: str, is_poller: bool) -> RoleTracker:
            return RoleTracker(role, b.monotonic, overdue_seconds=overdue, stall_seconds=stall, is_poller=is_poller,
                               lock_factory=b.native_lock)

        registration_role = tracker("registration", False)
        board.set_registration_tracker(registration_role)
        heartbeat_role = board.add_role(tracker("heartbeat", False))
        if self.workflows:
            board.add_role(tracker("workflow", True))
        if self.activities:
            board.add_role(tracker("activity", True))

        #: The lifecycle every runtime shares (docs/runtime.md).
        self.shell = RuntimeShell(label="worker", runtime_id=self.worker_id, backend=b, board=board,
                                  shutdown_timeout=float(shutdown_timeout), metrics=self.metrics, task_queue=task_queue,
                                  owner=self, name_prefix="sync-worker")
        poll_cancel = CancelToken(b.event)
        self.registrar = Registrar(
            client=client, worker_id=self.worker_id, task_queue=task_queue, build_id=build_id, workflows=self.workflows,
            activity_types=lambda: list(self.activities), sticky=self.sticky_cache,
            limits=lambda: (self.max_concurrent_workflow_tasks, self.max_concurrent_activity_tasks),
            session_limit=lambda: self.max_concurrent_worker_sessions,
            task_slots=self.task_slots, process_metrics=self._process_metrics_sample, tracker=registration_role,
            heartbeat_interval=heartbeat_interval, max_startup_wait=max(0.0, float(max_startup_wait)),
            clock=b.monotonic, stop_wait=self.shell.stop_requested.wait,
            url=str(getattr(client, "base_url", "the server")))
        #: Runs the tasks the pollers receive (``workflow_executor`` / ``query_executor`` are its hooks).
        self.dispatcher = TaskDispatcher(
            shell=self.shell, client=client, worker_id=self.worker_id, task_queue=task_queue,
            namespace=getattr(client, "namespace", None), activities=self.activities, workflows=self.workflows,
            interceptors=self.interceptors, sticky=self.sticky_cache, build_id=build_id, poll_cancel=poll_cancel)
        self.dispatcher.sessions = self.sessions
        #: The Durable Workflow task source this worker runs on its shell.
        self.source = DurableWorkflowSource(
            client=client, backend=b, board=board, metrics=self.metrics, registrar=self.registrar,
            dispatcher=self.dispatcher, sticky=self.sticky_cache, tracker=tracker, heartbeat_role=heartbeat_role,
            heartbeat_body=self._heartbeat_body, poll_cancel=poll_cancel, contact=contact,
            worker_id=self.worker_id, task_queue=task_queue, build_id=build_id, poll_timeout=self.poll_timeout,
            owns_client=owns_client, sessions=self.sessions)
        self.shell.attach(self.source)
        self._sync_roles()

    # -- configuration ---------------------------------------------------------------------

    def _new_activity_gate(self) -> AdmissionGate:
        return AdmissionGate(self.activity_concurrency, clock=self.backend.monotonic,
                             lock_factory=self.backend.native_lock, event_factory=self.backend.event,
                             metrics=self.metrics, tags={"task_kind": "activity", "task_queue": self.task_queue})

    def _ensure_pool_capacity(self) -> None:
        # Every poller, slot and the heartbeat may hold a connection at once: size the pool for
        # that, so a busy worker never discards connections.
        ensure_capacity = getattr(self.client, "ensure_pool_capacity", None)
        if callable(ensure_capacity):
            ensure_capacity(self.max_concurrent_workflow_tasks + self.max_concurrent_activity_tasks + 6)

    def _sync_roles(self) -> None:
        roles = []
        if self.workflows:
            roles.append(("workflow", self._workflow_slots, self.max_concurrent_workflow_task_polls))
        if self.activities:
            roles.append(("activity", self._activity_slots, self.max_concurrent_activity_task_polls))
        self.source.roles = roles
        self.shell.replace_gates([self.activity_gate] if self.activities else [])

    def configure_activity_concurrency(self, concurrency: ConcurrencyOption) -> None:
        """Re-size the activity slots (the CLI's ``-c`` / ``--autoscale``); only before the worker runs."""
        if self.shell.run_started:
            raise RuntimeError("cannot change concurrency of a running worker")
        self.activity_concurrency = resolve_concurrency(concurrency)
        self.max_concurrent_activity_tasks = self.activity_concurrency.capacity
        self.activity_gate = self._new_activity_gate()
        self._activity_slots = SlotPool(self.backend, "activity", self.max_concurrent_activity_tasks,
                                        self.activity_gate)
        self._ensure_pool_capacity()
        self._sync_roles()

    def configure_pollers(self, *, workflow: Optional[int] = None, activity: Optional[int] = None) -> None:
        """Set the pollers per role (``--workflow-pollers`` / ``--activity-pollers``); only before run."""
        if self.shell.run_started:
            raise RuntimeError("cannot change the pollers of a running worker")
        if workflow is not None:
            self.max_concurrent_workflow_task_polls = _poller_count("workflow", workflow)
        if activity is not None:
            self.max_concurrent_activity_task_polls = _poller_count("activity", activity)
        self._sync_roles()

    @property
    def shutdown_timeout(self) -> float:
        """Seconds a warm stop waits for accepted work (changeable until the stop starts)."""
        return self.shell.shutdown_timeout

    @shutdown_timeout.setter
    def shutdown_timeout(self, value: float) -> None:
        self.shell.shutdown_timeout = float(value)

    @property
    def max_startup_wait(self) -> float:
        """Seconds start-up retries discovery and registration (0: one attempt); ``--max-startup-wait``."""
        return self.registrar.max_startup_wait

    @max_startup_wait.setter
    def max_startup_wait(self, value: float) -> None:
        self.registrar.max_startup_wait = max(0.0, float(value))

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between registration heartbeats (the server's acknowledged value once registered)."""
        return self.registrar.heartbeat_interval

    @heartbeat_interval.setter
    def heartbeat_interval(self, value: float) -> None:
        self.registrar.heartbeat_interval = float(value)

    def _process_metrics_sample(self) -> Dict[str, Any]:
        """``process_metrics``; ``memory_bytes`` is the gate's current usage figure when it has one."""
        metrics = self._process_metrics.sample()
        if self.activities:
            usage = self.activity_gate.status().usage_bytes
            if usage is not None:
                metrics["memory_bytes"] = int(usage)
        return metrics

    def _heartbeat_body(self) -> Dict[str, Any]:
        return {"worker_id": self.worker_id, "task_slots": self.task_slots(),
                "process_metrics": self._process_metrics_sample()}

    def task_slots(self) -> Dict[str, int]:
        return {
            "workflow_available": self._workflow_slots.available,
            "activity_available": self._activity_slots.available,
            "session_available": self.sessions.available,
        }

    # -- public API ------------------------------------------------------------------------

    def worker_session(self, options: WorkerSessionOptions) -> WorkerSession:
        """The handle of a session lease held by this worker (one per session id; docs/sessions.md).

        ``create()`` it before polling to claim the session up front, or let the server create it
        for this worker when the first activity of the session is leased here; it is renewed on
        the worker's heartbeat and closed on shutdown.
        """
        return self.sessions.handle(options)

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
        return self.shell.status(self.activity_gate if self.activities else None,
                                 event_loop_stall_seconds=event_loop_stall_seconds,
                                 request_overdue_seconds=request_overdue_seconds,
                                 request_stall_seconds=request_stall_seconds)

    @property
    def state(self) -> WorkerState:
        return self.shell.board.state

    def run(self) -> None:
        """Register, poll until :meth:`stop`, then drain and deregister (blocks the caller)."""
        self.shell.run()

    def run_until(self, *, workflow_id: str, timeout: float = 60.0, poll_interval: float = 0.5) -> Any:
        """Run until the workflow reaches a terminal state; returns its description.

        ``timeout`` includes discovery and registration. A timeout never cancels the run.
        An external :meth:`stop` ends the wait with :class:`WorkerShutdown`.
        """
        shell = self.shell
        shell.begin()
        deadline = self.backend.monotonic() + timeout
        runner_error: List[BaseException] = []

        def runner() -> None:
            try:
                shell.start()
                shell.supervise()
            except BaseException as error:
                runner_error.append(error)
                shell.request_stop()

        handle = self.backend.spawn(f"sync-worker-run-{self.worker_id}", runner)
        primary: Optional[BaseException] = None
        result: Any = None
        try:
            result = self._await_workflow(workflow_id, deadline, timeout, poll_interval, handle, runner_error)
        except BaseException as error:
            primary = error
        shell.request_stop()
        handle.join()
        if runner_error and (primary is None or isinstance(primary, WorkerShutdown)):
            primary = runner_error[0]
        # A timeout or an external stop of the wait is not a worker failure; a loop error is.
        shell.finish(primary, loop_failed=bool(runner_error))
        return result

    def stop(self, *, cold: bool = False) -> None:
        """Stop polling, drain accepted work, deregister. Repeated calls share one result.

        ``cold=True`` stops waiting for running work at once: it is abandoned (nothing is
        reported for it), the registration is kept and :class:`ShutdownIncomplete` is raised.
        """
        self.shell.stop(cold=cold)

    @property
    def external_storage(self) -> Any:
        """The driver payloads over the threshold are stored through (the client's; ``None``: inline)."""
        return getattr(self.client, "external_storage", None)

    @property
    def external_storage_threshold_bytes(self) -> Optional[int]:
        return getattr(self.client, "external_storage_threshold_bytes", None)

    @property
    def external_storage_cache(self) -> Any:
        return getattr(self.client, "external_storage_cache", None)

    def sticky_cache_metrics(self) -> Dict[str, int]:
        """The sticky cache's counters: hit, miss, eviction, forced_cold_replay, entries, history_bytes."""
        return self.sticky_cache.metrics()

    def _await_workflow(self, workflow_id: str, deadline: float, timeout: float, poll_interval: float,
                        runner: TaskHandle, runner_error: List[BaseException]) -> Any:
        clock = self.backend.monotonic
        while not self.shell.join_done.wait(0.05):
            if clock() >= deadline:
                raise TimeoutError(f"worker {self.worker_id} startup did not finish within the {timeout}s "
                                   f"workflow wait budget for {workflow_id}")
        if not self.shell.joined:
            runner.join()
            raise runner_error[0] if runner_error else RuntimeError("worker registration failed")
        return wait_until_terminal(self.client, workflow_id, deadline=deadline, timeout=timeout,
                                   poll_interval=poll_interval, clock=clock, stopped=self.shell.stop_requested,
                                   worker_id=self.worker_id)
