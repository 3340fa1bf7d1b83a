"""Workers for a Celery app: one ``sync_worker.Worker`` per queue, each serving every task of
the app (as activities named after the tasks) and the canvas workflow."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, List, Optional

from . import signals

if TYPE_CHECKING:  # pragma: no cover
    from sync_worker import Worker

    from .app import Celery

__all__ = ["WorkerGroup", "build_workers"]

logger = logging.getLogger("sync_worker.celery.worker")


def build_workers(app: Celery, queues: Optional[List[str]] = None, *, concurrency: Optional[int] = None,
                  pool: Optional[str] = None, hostname: Optional[str] = None, client: Any = None,
                  **worker_options: Any) -> List[Worker]:
    """One Worker per queue (default: ``task_default_queue``), all tasks registered on each."""
    from sync_worker import Worker

    from .canvas_workflow import CanvasWorkflow
    from .execution import activity_for

    app.finalize()
    client = client or app.client
    interceptors = list(worker_options.pop("interceptors", None) or [])
    from .app import django_configured

    if django_configured():
        # Celery's Django fixup closes DB connections around each task; sync_worker_django's
        # interceptor does that (and refuses Django values a payload cannot carry).
        from sync_worker_django.db import DjangoTaskInterceptor

        interceptors.insert(0, DjangoTaskInterceptor())
    names = queues or [str(app.conf.task_default_queue)]
    concurrency = concurrency or app.conf.get("worker_concurrency") or 8
    activities = [activity_for(task) for task in list(app.tasks.values())]
    workers: List[Worker] = []
    for queue in names:
        worker_id = f"{hostname}-{queue}" if hostname and len(names) > 1 else hostname
        options = dict(worker_options)
        options.setdefault("max_concurrent_workflow_tasks", max(2, min(10, int(concurrency))))
        workers.append(Worker(client, task_queue=queue, activities=activities, workflows=[CanvasWorkflow],
                              worker_id=worker_id, max_concurrent_activity_tasks=int(concurrency), pool=pool,
                              interceptors=interceptors, **options))
    return workers


class WorkerGroup:
    """Runs several Workers together (one per queue) and stops them together.

    Sends ``worker_init`` before, ``worker_process_init`` and ``worker_ready`` once every worker
    polls, ``worker_shutting_down``/``worker_shutdown`` at the end (sender: this group).
    """

    def __init__(self, app: Celery, workers: List[Worker]) -> None:
        self.app = app
        self.workers = workers
        self.hostname = workers[0].worker_id if workers else None
        self.errors: List[BaseException] = []
        self._threads: List[threading.Thread] = []

    def start(self) -> None:
        signals.worker_init.send(sender=self)
        signals.worker_process_init.send(sender=None)
        from sync_worker.worker import WorkerState

        for worker in self.workers:
            thread = threading.Thread(target=self._run, args=(worker,), name=f"celery-{worker.task_queue}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
            # One registration at a time: registering reads workflow sources (inspect/ast), and
            # CPython 3.11 can fail ast work done in two threads at once (gh-106905).
            deadline = time.monotonic() + 30
            while worker.state == WorkerState.STARTING and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)

    def _run(self, worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as error:
            self.errors.append(error)

    def wait_ready(self, timeout: float = 30.0) -> bool:
        import time

        from sync_worker.worker import WorkerState

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(w.state == WorkerState.RUNNING for w in self.workers):
                signals.worker_ready.send(sender=self)
                return True
            if self.errors or not any(t.is_alive() for t in self._threads):
                return False
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def stop(self, cold: bool = False) -> None:
        signals.worker_shutting_down.send(sender=self.hostname, sig="SIGTERM", how="Cold" if cold else "Warm",
                                          exitcode=0)
        stoppers = [threading.Thread(target=self._stop_one, args=(w, cold), daemon=True) for w in self.workers]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join()

    @staticmethod
    def _stop_one(worker: Worker, cold: bool) -> None:
        try:
            worker.stop(cold=cold)
        except BaseException as error:  # the run thread reports the shared result
            logger.debug("stop of %s: %s", worker.worker_id, error)

    def join(self, timeout: Optional[float] = None) -> None:
        for thread in self._threads:
            thread.join(timeout)
        signals.worker_shutdown.send(sender=self)
        signals.worker_process_shutdown.send(sender=None, pid=os.getpid(), exitcode=0)
