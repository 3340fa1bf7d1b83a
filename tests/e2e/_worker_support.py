"""Shared helpers of the worker end-to-end tests: a worker running in a thread, waits."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, List, Optional

from sync_worker.worker import Worker, WorkerState


def unique_queue(prefix: str = "e2e") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not reached within {timeout}s")
        time.sleep(interval)


class RunningWorker:
    """``worker.run()`` on a thread; on exit stops it (cold if asked) and joins the thread."""

    def __init__(self, worker: Worker, *, wait_running: bool = True) -> None:
        self.worker = worker
        self.errors: List[BaseException] = []
        self._wait_running = wait_running
        self.thread = threading.Thread(target=self._run, name="e2e-worker-run", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as error:
            self.errors.append(error)

    def __enter__(self) -> RunningWorker:
        self.thread.start()
        if self._wait_running:
            wait_for(lambda: self.worker.state is not WorkerState.STARTING or self.errors)
            if self.errors:
                raise self.errors[0]
        return self

    def stop(self, *, cold: bool = False) -> Optional[BaseException]:
        try:
            self.worker.stop(cold=cold)
        except BaseException as error:
            return error
        finally:
            self.thread.join(15)
        return None

    def __exit__(self, *exc: Any) -> None:
        if self.thread.is_alive():
            self.stop(cold=True)
        assert not self.thread.is_alive(), "worker thread did not finish"
