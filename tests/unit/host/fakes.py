"""A fake runtime for the host's tests: the ``Runtime`` surface of ``Worker``, no server.

It behaves as a Worker does where the host can see it: ``run()`` blocks until ``stop()``;
``stop()`` from any thread, any number of times, shares one result (``run()`` raises it too);
a warm stop drains for ``drain_seconds`` (a cold one ends the drain at once); work still
``running`` when the drain ends makes the result :class:`ShutdownIncomplete`; ``fail_after``
makes the run fail on its own.
"""

from __future__ import annotations

import threading
import time
from typing import List, Optional, Sequence

from sync_worker.worker import ShutdownIncomplete, WorkerState, WorkerStatus


class FakeRuntime:
    def __init__(self, worker_id: str, *, pool: str = "threads", task_queue: Optional[str] = None,
                 fail_after: Optional[float] = None, drain_seconds: float = 0.0, running: Sequence[str] = (),
                 stop_error: Optional[BaseException] = None, start_seconds: float = 0.0) -> None:
        self.worker_id = worker_id
        self.pool = pool
        self.task_queue = task_queue or worker_id
        self.fail_after = fail_after
        self.drain_seconds = drain_seconds
        self.running = list(running)
        self.stop_error = stop_error
        self.start_seconds = start_seconds
        self.state = WorkerState.STARTING
        self.stops: List[bool] = []  # the ``cold`` of every stop() call, in order
        self.started = threading.Event()
        self.ran = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._cold = threading.Event()
        self._done = threading.Event()
        self._result: Optional[BaseException] = None

    # -- Runtime ---------------------------------------------------------------------------------

    def run(self) -> None:
        self.ran = True
        self.started.set()
        if self.start_seconds:
            time.sleep(self.start_seconds)
        self.state = WorkerState.RUNNING
        stopped = self._stop.wait(self.fail_after)
        if not stopped:  # failed on its own, as a worker whose poller died
            self.state = WorkerState.FAILED
            self._result = RuntimeError(f"{self.worker_id}: the poller died")
            self._done.set()
            raise self._result
        self._done.wait()
        if self._result is not None:
            raise self._result

    def stop(self, *, cold: bool = False) -> None:
        with self._lock:
            self.stops.append(cold)
            first = not self._stop.is_set()
            self._stop.set()
        if cold:
            self._cold.set()
        if first:
            self.state = WorkerState.DRAINING
            self._cold.wait(self.drain_seconds)
            if self.stop_error is not None:
                self._result = self.stop_error
            elif self.running and (self._cold.is_set() or self.drain_seconds > 0):
                why = "cold stop requested" if self._cold.is_set() else "shutdown deadline reached"
                self._result = ShutdownIncomplete(f"{self.worker_id}: {why} with {', '.join(self.running)} running",
                                                  self.running)
            self.state = WorkerState.FAILED if self._result is not None else WorkerState.STOPPED
            self._done.set()
        self._done.wait()
        if self._result is not None:
            raise self._result

    def status(self) -> WorkerStatus:
        return WorkerStatus(worker_id=self.worker_id, namespace="fake", task_queue=self.task_queue, state=self.state,
                            ready=self.state is WorkerState.RUNNING, ready_reason="", live=True, live_reason="",
                            registered_age_seconds=None, event_loop_progress_age_seconds=None, roles=())
