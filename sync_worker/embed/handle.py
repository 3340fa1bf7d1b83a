"""``EmbeddedWorkers``: Workers running in the background of a web server process.

One handle per process, started *after* the fork (by the gunicorn / uWSGI hooks or by the
user's own post-fork code). It records the pid that started it; used in any other process
it refuses (:class:`ForkedHandleError`) or, through :meth:`ensure_running`, starts anew
there from the same factory. A background monitor task acts on the flags that signal
handlers set (:meth:`request_drain`), restarts a worker whose run failed (with back-off)
and, in ``one_per_host`` mode, keeps trying the host lock while standing by.

The workers themselves run in one :class:`sync_worker.host.WorkerGroup` (the group every
door uses): it runs and stops them together, and hands a failed run to this handle, which
rebuilds that worker in its place. The monitor, the group's runners and stoppers are spawned
through the pool's backend, so they are greenlets in a gevent web worker and threads elsewhere.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import health
from ..host import WorkerGroup
from ..runtime.backend import ConcurrencyBackend, TaskHandle, backend_for_pool
from ..worker import Worker, WorkerState, WorkerStatus
from .errors import EmbedError, ForkedHandleError
from .factory import FactorySpec, build_workers, client_from_environment
from .hostlock import HostLock

__all__ = ["EmbeddedStatus", "EmbeddedWorkers"]

logger = logging.getLogger("sync_worker.embed")

_MONITOR_TICK = 0.1
_RESTART_BACKOFF_MAX = 60.0


@dataclass(frozen=True)
class EmbeddedStatus:
    """What the embedded workers of this process are doing (no network I/O)."""

    pid: int
    #: ``running``, ``standby`` (another process of the host holds the lock), ``draining`` or ``stopped``.
    mode: str
    ready: bool
    live: bool
    reason: str
    workers: Tuple[WorkerStatus, ...]


class EmbeddedWorkers:
    """The handle :func:`sync_worker.embed.start` returns. Use it only in the process that started it."""

    def __init__(
        self,
        factory: FactorySpec,
        *,
        concurrency: Optional[int],
        pool: str,
        client_factory: Callable[[], Any] = client_from_environment,
        host_lock: Optional[HostLock] = None,
        standby_retry_seconds: float = 2.0,
        restart_failed: bool = True,
    ) -> None:
        self.factory = factory
        self.concurrency = concurrency
        self.pool = pool
        self.pid = os.getpid()
        self._client_factory = client_factory
        self._host_lock = host_lock
        self._standby_retry = float(standby_retry_seconds)
        self._restart_failed = restart_failed
        self._backend: ConcurrencyBackend = backend_for_pool(pool)
        self._lock = self._backend.native_lock()
        self._group: Optional[WorkerGroup[Worker]] = None  # None while standing by
        self._failures: Dict[str, int] = {}
        self._retry_at: Dict[str, float] = {}
        self._mode = "starting"
        self._drain_flag = False  # set by signal handlers: nothing else happens in them
        self._cold_flag = False  # requested (signal handlers)
        self._cold_applied = False
        self._drain_timeout: Optional[float] = None
        self._drain_started: Optional[float] = None
        self._drain_deadline: Optional[float] = None
        self._stopped: Optional[TaskHandle] = None  # ends once the group's stop has finished
        self.errors: List[BaseException] = []
        self._monitor: Optional[TaskHandle] = None
        self._next_lock_try = 0.0
        self.started_at = time.monotonic()

    # -- start ----------------------------------------------------------------------------------


    @property
    def drain_started(self) -> Optional[float]:
        """When the warm stop began (``time.monotonic()``), or None."""
        return self._drain_started

    @property
    def cold_requested(self) -> bool:
        """A cold stop was asked for (a second signal, or ``stop(cold=True)``)."""
        return self._cold_flag

    def _launch(self) -> None:
        if self._host_lock is not None and not self._host_lock.try_acquire():
            self._mode = "standby"
            holder = self._host_lock.holder_pid()
            logger.info("process %d stands by: process %s holds the host lock %s", self.pid, holder,
                        self._host_lock.path)
            self._next_lock_try = time.monotonic() + self._standby_retry
        else:
            try:
                workers = build_workers(self.factory, concurrency=self.concurrency, pool=self.pool,
                                        client_factory=self._client_factory)
            except BaseException:
                if self._host_lock is not None:  # never keep the host's lock for workers that do not exist
                    self._host_lock.release()
                raise
            self._start_workers(workers)
        self._monitor = self._backend.spawn(f"sync-worker-embed-monitor-{self.pid}", self._monitor_loop)

    def _start_workers(self, workers: List[Worker]) -> None:
        with self._lock:
            if self._mode in ("draining", "stopped"):
                return
            self._mode = "running"
            if self._group is None:
                self._group = WorkerGroup(workers, backend=self._backend, on_failure=self._failed,
                                          on_stop_error=self._stop_failed, name="sync-worker-embed")
                self._group.start()
            else:  # a rebuilt worker takes the place of the one of its task queue
                current = {w.task_queue: w for w in self._group.runtimes}
                for worker in workers:
                    self._group.add(worker, replaces=current.get(worker.task_queue))
        logger.info("process %d runs %d embedded worker(s) on pool %s: %s", self.pid, len(workers), self.pool,
                    ", ".join(f"{w.task_queue}/{w.worker_id} ({w.max_concurrent_activity_tasks} activity slots)"
                              for w in workers))

    def _failed(self, worker: Worker, error: BaseException) -> None:
        """The group's ``on_failure``: a run failed while no stop was asked for; rebuild it later."""
        if self._mode in ("draining", "stopped"):
            return  # the stop reports the shutdown outcome
        logger.error("embedded worker %s (task queue %r) failed: %s: %s", worker.worker_id,
                     worker.task_queue, type(error).__name__, error)
        self._schedule_restart(worker.task_queue)

    def _stop_failed(self, worker: Worker, error: BaseException) -> None:
        """The group's ``on_stop_error``."""
        if error not in self.errors:
            self.errors.append(error)
        logger.error("embedded worker %s did not stop cleanly: %s", worker.worker_id, error)

    def _schedule_restart(self, task_queue: str) -> None:
        if not self._restart_failed:
            return
        with self._lock:
            failures = self._failures.get(task_queue, 0) + 1
            self._failures[task_queue] = failures
            delay = min(_RESTART_BACKOFF_MAX, 2.0 ** (failures - 1))
            self._retry_at[task_queue] = time.monotonic() + delay
        logger.info("restarting the embedded worker of task queue %r in %.0f s", task_queue, delay)

    # -- monitor ----------------------------------------------------------------------------------

    def _monitor_loop(self) -> None:
        while self._mode != "stopped":
            self._backend.sleep(_MONITOR_TICK)
            if os.getpid() != self.pid:  # pragma: no cover - a greenlet cannot survive a fork
                return
            try:
                self._monitor_tick()
            except Exception:  # the monitor must outlive any one failure; say what happened
                logger.exception("embedded workers monitor of process %d", self.pid)

    def _monitor_tick(self) -> None:
        if self._drain_flag and self._drain_started is None:
            self._begin_stop(self._drain_timeout, cold=self._cold_flag)
        elif self._cold_flag and not self._cold_applied and self._drain_started is not None:
            self._begin_stop(None, cold=True)
        if self._mode == "standby" and time.monotonic() >= self._next_lock_try:
            self._try_take_over()
        if self._mode == "running":
            self._restart_due()

    def _try_take_over(self) -> None:
        assert self._host_lock is not None
        self._next_lock_try = time.monotonic() + self._standby_retry
        if not self._host_lock.try_acquire():
            return
        try:
            self._start_workers(build_workers(self.factory, concurrency=self.concurrency, pool=self.pool,
                                              client_factory=self._client_factory))
        except Exception as error:
            logger.error("process %d took the host lock but could not build its workers: %s", self.pid, error)
            self._host_lock.release()

    def _restart_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [q for q, at in self._retry_at.items() if at <= now]
            for queue in due:
                del self._retry_at[queue]
        if not due:
            return
        try:
            fresh = [w for w in build_workers(self.factory, concurrency=self.concurrency, pool=self.pool,
                                              client_factory=self._client_factory) if w.task_queue in due]
        except Exception as error:
            logger.error("could not rebuild the embedded workers of %s: %s", due, error)
            for queue in due:
                self._schedule_restart(queue)
            return
        self._start_workers(fresh)

    # -- public API ---------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def workers(self) -> List[Worker]:
        """The workers of this handle (empty while standing by)."""
        group = self._group
        return group.runtimes if group is not None else []

    def _check_pid(self) -> None:
        if os.getpid() != self.pid:
            raise ForkedHandleError(self.pid, os.getpid())

    def status(self) -> EmbeddedStatus:
        """A snapshot of every worker plus the handle's own mode; no network I/O."""
        self._check_pid()
        mode = self._mode
        statuses = tuple(w.status() for w in self.workers)
        if mode == "standby":
            return EmbeddedStatus(self.pid, mode, True, True, "standby: another process of this host runs the "
                                  "workers (one_per_host)", statuses)
        code_ready, body_ready = self.probe("ready")
        code_live, body_live = self.probe("live")
        reason = body_ready.get("reason") or body_live.get("reason") or ""
        return EmbeddedStatus(self.pid, mode, code_ready == 200, code_live == 200, str(reason), statuses)

    def probe(self, kind: str) -> Tuple[int, Dict[str, Any]]:
        """``(http_status, body)`` of :func:`sync_worker.health.probe` for these workers.

        Standing by is healthy (200, no worker); readiness is false from the moment a drain was
        requested, even before the workers have seen the stop.
        """
        self._check_pid()
        if self._mode == "standby":
            return 200, {"status": "ok", "check": kind, "workers": [],
                         "reason": "standby: another process of this host runs the workers (one_per_host)"}
        code, body = health.probe(kind, self.workers)
        if kind == "ready" and (self._drain_flag or self._mode in ("draining", "stopped")) and code == 200:
            code, body = 503, dict(body, status="fail", reason="draining: the web process is shutting down")
        return code, body

    def request_drain(self, timeout: Optional[float] = None, *, cold: bool = False) -> None:
        """Ask for a drain within ``timeout`` s from a signal handler: only sets flags; the monitor stops."""
        if timeout is not None:
            self._drain_timeout = float(timeout)
        self._drain_flag = True
        if cold:
            self._cold_flag = True

    def stop(self, timeout: Optional[float] = None, *, cold: bool = False) -> bool:
        """Drain and deregister every worker within ``timeout`` seconds (each worker's own
        ``shutdown_timeout`` when None); blocks. True when every worker stopped cleanly.

        Safe to call again (and from the signal-started drain): later calls wait for the same
        drain; ``cold=True`` turns a running drain cold.
        """
        self._check_pid()
        self._begin_stop(timeout, cold=cold)
        deadline = self._drain_deadline
        stopped = self._stopped
        if stopped is not None:
            stopped.join(None if deadline is None else max(0.0, deadline - time.monotonic()) + 2.0)
        clean = not self.errors and stopped is not None and not stopped.is_alive() and all(
            w.state is WorkerState.STOPPED for w in self.workers)
        return clean

    def ensure_running(self) -> EmbeddedWorkers:
        """This handle in the process that started it; in a forked child, a new handle started there."""
        if os.getpid() == self.pid:
            return self
        from . import start

        return start(self.factory, concurrency=self.concurrency, pool=None,
                     client_factory=self._client_factory,
                     one_per_host=self._host_lock is not None,
                     lock_path=self._host_lock.path if self._host_lock is not None else None)

    # -- stopping -----------------------------------------------------------------------------------------

    def _begin_stop(self, timeout: Optional[float], *, cold: bool) -> None:
        with self._lock:  # under the lock: a concurrent stop() must see the stop begun
            group = self._group
            workers = group.runtimes if group is not None else []
            if self._drain_started is None:
                self._drain_flag = True
                self._drain_started = time.monotonic()
                self._mode = "draining"
                self._retry_at.clear()
                if timeout is not None:
                    budget = max(0.0, float(timeout))
                    for worker in workers:
                        worker.shutdown_timeout = min(worker.shutdown_timeout, budget)
                longest = max([w.shutdown_timeout for w in workers], default=0.0)
                self._drain_deadline = self._drain_started + longest
                logger.info("process %d draining %d embedded worker(s) within %.1f s%s", self.pid, len(workers),
                            longest, " (cold)" if cold else "")
                if group is not None:
                    group.request_stop(cold=cold)
                self._stopped = self._backend.spawn("sync-worker-embed-stopped", self._after_stop)
                self._cold_applied = cold
                return
            if not cold or self._cold_applied:
                return
            self._cold_applied = True
        if group is not None:  # a drain is running: turn it cold
            group.request_stop(cold=True)

    def _after_stop(self) -> None:
        group = self._group
        if group is not None:
            group.wait_stopped()
        self._mode = "stopped"
        if self._host_lock is not None:
            self._host_lock.release()
        logger.info("process %d: embedded workers stopped%s", self.pid,
                    "" if not self.errors else f" with {len(self.errors)} error(s)")

    def _forget_after_fork(self) -> None:
        """In a forked child: drop what belongs to the parent (the host lock descriptor)."""
        if self._host_lock is not None:
            self._host_lock.forget_after_fork()


def _ensure_not_running(existing: Optional[EmbeddedWorkers]) -> None:
    if existing is not None and existing.mode not in ("stopped",):
        raise EmbedError(f"embedded workers already run in process {os.getpid()} (mode {existing.mode}); "
                         "stop them first or use sync_worker.embed.current()")
