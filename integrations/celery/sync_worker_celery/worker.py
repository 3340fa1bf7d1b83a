"""Workers for a Celery app: one ``sync_worker.Worker`` per queue, each serving every task of
the app (as activities named after the tasks) and the canvas workflow."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, List, Optional

from sync_worker import Worker
from sync_worker.contrib import enable_for_initialized_tools
from sync_worker.host import WorkerGroup as HostGroup
from sync_worker.host import WorkerOptions
from sync_worker.worker import WorkerState

from . import signals

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["WorkerGroup", "build_workers"]

logger = logging.getLogger("sync_worker.celery.worker")

#: Slots per queue when neither ``-c`` nor ``worker_concurrency`` says (Celery's default is the CPU count).
DEFAULT_CONCURRENCY = 8


def build_workers(app: Celery, queues: Optional[List[str]] = None, *, concurrency: Optional[int] = None,
                  pool: Optional[str] = None, hostname: Optional[str] = None, client: Any = None,
                  **worker_options: Any) -> List[Worker]:
    """One Worker per queue (default: ``task_default_queue``), all tasks registered on each.

    ``worker_options`` are more :class:`sync_worker.Worker` keywords (checked by
    :class:`sync_worker.host.WorkerOptions`: a wrong name or value names itself).
    """
    from .canvas_workflow import CanvasWorkflow
    from .execution import activity_for

    app.finalize()
    enable_for_initialized_tools()  # sentry_sdk.init(...) done: task failures reach Sentry, as with Celery
    client = client or app.client
    interceptors = list(worker_options.pop("interceptors", None) or [])
    from .app import django_configured

    if django_configured():
        # Celery's Django fixup closes DB connections around each task; sync_worker_django's
        # interceptor does that (and refuses Django values a payload cannot carry).
        from sync_worker_django.db import DjangoTaskInterceptor

        interceptors.insert(0, DjangoTaskInterceptor())
    names = queues or [str(app.conf.task_default_queue)]
    slots = WorkerOptions.from_mapping(
        {"worker_concurrency": concurrency or app.conf.get("worker_concurrency") or DEFAULT_CONCURRENCY},
        source="app.conf").max_concurrent_activity_tasks
    activities = [activity_for(task) for task in list(app.tasks.values())]
    base = WorkerOptions.from_kwargs(**worker_options).replace(
        activities=tuple(activities), workflows=(CanvasWorkflow,), max_concurrent_activity_tasks=slots, pool=pool,
        interceptors=tuple(interceptors))
    if "max_concurrent_workflow_tasks" not in worker_options:  # canvases are light: 2-10 workflow slots
        base = base.replace(max_concurrent_workflow_tasks=max(2, min(10, slots)) if isinstance(slots, int) else 10)
    return [base.replace(task_queue=queue, worker_id=f"{hostname}-{queue}" if hostname and len(names) > 1
                         else hostname).build(client) for queue in names]


class WorkerGroup(HostGroup[Worker]):
    """The workers of a Celery app's queues (a :class:`sync_worker.host.WorkerGroup`), with Celery's signals.

    Sends ``worker_init`` and ``worker_process_init`` when it starts, ``worker_ready`` once every
    worker polls, ``worker_shutting_down`` when asked to stop, ``worker_shutdown`` and
    ``worker_process_shutdown`` at the end (sender: this group, or its hostname). Workers start
    one at a time (registration reads workflow sources with ``ast``: CPython gh-106905).
    ``run()`` serves until stopped (``sync-worker celery ... worker`` hands it to
    :func:`sync_worker.host.serve`); ``start()`` / ``wait_ready()`` / ``stop()`` / ``join()`` drive
    it from a test or an embedding.
    """

    def __init__(self, app: Celery, workers: List[Worker], *, process_child: bool = False) -> None:
        super().__init__(workers, start_one_at_a_time=True, name="celery")
        self.app = app
        #: A ``-P prefork`` child: only the per-process signals (``worker_process_init`` /
        #: ``worker_process_shutdown``) are sent here; the parent sends ``worker_init`` and
        #: ``worker_shutdown``, as in Celery's prefork pool.
        self.process_child = process_child
        self.hostname: Optional[str] = workers[0].worker_id if workers else None
        self._signal_lock = threading.Lock()
        self._sent: List[str] = []
        self._stop_sent: List[str] = []

    def _send_once(self, name: str, **kwargs: Any) -> None:
        if self.process_child and name not in ("worker_process_init", "worker_process_shutdown"):
            return
        with self._signal_lock:
            if name in self._sent:
                return
            self._sent.append(name)
        getattr(signals, name).send(**kwargs)

    def start(self) -> None:
        self._send_once("worker_init", sender=self)
        self._send_once("worker_process_init", sender=None)
        super().start()

    def run(self) -> None:
        """Start, send ``worker_ready`` once every worker polls, serve until stopped, send the shutdown signals."""
        self.start()
        threading.Thread(target=self.wait_ready, name="celery-ready", daemon=True).start()
        try:
            super().run()
        finally:
            self._shutdown_signals()

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """True (and ``worker_ready`` sent) once every worker polls; False when one ended or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(w.state == WorkerState.RUNNING for w in self.workers):
                self._send_once("worker_ready", sender=self)
                return True
            if self.errors or not self.alive():
                return False
            time.sleep(0.05)
        return False

    def request_stop(self, *, cold: bool = False) -> None:
        """Send ``worker_shutting_down`` (once warm, once more when it turns cold), then stop every worker."""
        with self._signal_lock:
            send = not self._stop_sent or (cold and "Cold" not in self._stop_sent)
            if send:
                self._stop_sent.append("Cold" if cold else "Warm")
        if send and not self.process_child:
            signals.worker_shutting_down.send(sender=self.hostname, sig="SIGTERM", how="Cold" if cold else "Warm",
                                              exitcode=0)
        super().request_stop(cold=cold)

    def stop(self, cold: bool = False) -> None:
        """Stop every worker and wait (Celery's surface: nothing is raised, the run reports the outcome)."""
        try:
            super().stop(cold=cold)
        except BaseException as error:  # the run reports the shared result
            logger.debug("stop of %s: %s", self.hostname, error)

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds for the workers' runs, then send the shutdown signals (once)."""
        ended = super().join(timeout)
        self._shutdown_signals()
        return ended

    def _shutdown_signals(self) -> None:
        self._send_once("worker_shutdown", sender=self)
        self._send_once("worker_process_shutdown", sender=None, pid=os.getpid(), exitcode=0)
