"""Shared helpers of the worker end-to-end tests: a worker running in a thread, waits.

The suite runs twice: on threads, then under gevent (``tests/gevent_suite.py`` patches first
and sets ``SYNC_WORKER_TEST_POOL=gevent``). Workers built here, and workers built by a test
without ``pool`` (whose default follows the patched process), run on that pool;
:class:`RunningWorker` checks it so the gevent run really exercises greenlets.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any, Callable, List, Optional

from sync_worker.worker import Worker, WorkerState


def suite_pool() -> str:
    """The pool this run of the suite exercises ("threads", or "gevent" in the gevent suite)."""
    return os.environ.get("SYNC_WORKER_TEST_POOL", "threads")


def make_worker(client: Any, **kwargs: Any) -> Worker:
    """A Worker on the suite's pool (``pool`` may still be overridden by the caller)."""
    kwargs.setdefault("pool", suite_pool())
    return Worker(client, **kwargs)


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
        assert worker.backend.name == suite_pool(), (
            f"this run of the suite exercises pool {suite_pool()!r}, but the worker runs on {worker.backend.name!r}"
        )
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
