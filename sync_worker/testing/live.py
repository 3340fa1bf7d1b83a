"""``LiveEnvironment``: a dev server in this process, a client and real workers, for one test.

``WorkflowEnvironment.start_time_skipping()`` gives one on a virtual clock (see ``skipping``):
timers, activity and workflow timeouts, retry back-off and schedules all read that clock, so a
workflow that sleeps for a month completes in milliseconds. ``start_local()`` gives the same
shape on the real clock. Either is a context manager::

    with WorkflowEnvironment.start_time_skipping() as env:
        with env.worker(workflows=[Renewal], activities=[charge]):
            handle = env.client.start_workflow("renewal", "acct-1", task_queue=env.task_queue)
            assert handle.result() == "renewed"          # 30 virtual days, a few ms of wall time

Workers run :class:`~sync_worker.Worker` itself on ``pool`` (``"threads"`` or ``"gevent"``; by
default the process's pool, so a gevent-patched test process gets greenlets). Everything the
workflow sees comes over real sockets from the real dev server: this is an end-to-end test.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Type, Union, cast

from ..cancel import CancelToken
from ..client import Client
from ..devserver import DevServer
from ..devserver.clock import Clock, SystemClock, VirtualClock
from ..runtime.backend import check_pool, default_pool
from ..worker import Worker
from .skipping import TimeSkipper

log = logging.getLogger("sync_worker.testing")

__all__ = ["EnvironmentClient", "LiveEnvironment"]

Duration = Union[float, int, timedelta]

#: Dev server settings of a test environment: short leases and query waits, 50 ms ticks.
_SERVER_DEFAULTS: Dict[str, Any] = {"workflow_task_lease_seconds": 30.0, "query_timeout_seconds": 10.0,
                                    "long_poll_max_seconds": 30.0}
#: Worker settings of a test environment (what ``env.worker`` passes unless told otherwise).
_WORKER_DEFAULTS: Dict[str, Any] = {"shutdown_timeout": 10.0, "poll_timeout": 30.0}


def _seconds(duration: Duration) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


class _ChangeWait:
    """A ``cancel`` token for ``Client.get_result``: its wait lets time skip, until the server's next commit.

    ``get_result`` waits only after a describe found the run still open, so time never skips
    for a result that is already there.
    """

    def __init__(self, environment: LiveEnvironment, user: Any) -> None:
        self._environment = environment
        self._user = user

    def wait(self, timeout: Optional[float] = None) -> bool:
        if self._user is not None and self._user.wait(0):
            return True
        self._environment._wait_for_change(0.25 if timeout is None else timeout)
        return bool(self._user is not None and self._user.wait(0))


class EnvironmentClient(Client):
    """The environment's :class:`~sync_worker.Client`: waiting for a result lets virtual time pass.

    ``get_result`` (so ``handle.result()``) and ``get_activity_result`` unlock automatic time
    skipping while the run or activity they wait for is still open, and look again at each
    server commit rather than every ``poll_interval``. ``timeout`` stays real time: it bounds
    how long the test waits, however far the clock jumps.
    """

    #: its waits are the ``_ChangeWait`` token's (time skips there), never a server-held history read
    result_waits_on_history = False

    def __init__(self, base_url: str, *, environment: LiveEnvironment, **options: Any) -> None:
        super().__init__(base_url, **options)
        self._environment = environment

    def clone(self, **overrides: Any) -> Any:
        overrides.setdefault("environment", self._environment)
        return super().clone(**overrides)

    def get_result(self, handle: Any, *, poll_interval: float = 0.5, timeout: Optional[float] = 30.0,
                   run_id: Optional[str] = None, cancel: Any = None) -> Any:
        return super().get_result(handle, poll_interval=min(poll_interval, 0.25), timeout=timeout, run_id=run_id,
                                  cancel=cast(CancelToken, _ChangeWait(self._environment, cancel)))

    def get_activity_result(self, handle: Any, *, poll_interval: float = 0.5,
                            timeout: Optional[float] = 30.0) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:  # one look (timeout 0): the result, its failure, or "still open"
                return super().get_activity_result(handle, poll_interval=0.0, timeout=0.0)
            except TimeoutError:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return super().get_activity_result(handle, poll_interval=0.0, timeout=0.0)
            self._environment._wait_for_change(min(poll_interval, 0.25, remaining or 0.25))


class LiveEnvironment:
    """A started dev server (``server``), its ``clock``, a ``client`` and ``worker()`` on demand.

    Build it with ``WorkflowEnvironment.start_time_skipping(...)`` or ``start_local(...)``;
    :meth:`shutdown` (or leaving the ``with`` block) stops every worker it started, then the server.
    """

    def __init__(self, server: DevServer, *, pool: str, namespace: str = "default", token: Optional[str] = None,
                 settle_timeout: float = 30.0, worker_defaults: Optional[Dict[str, Any]] = None) -> None:
        self.server = server
        self.clock: Clock = server.clock
        self.pool = check_pool(pool)
        self.namespace = namespace
        self._token = token
        #: A task queue of this environment's own (the default of :meth:`worker`).
        self.task_queue = f"test-{uuid.uuid4().hex[:10]}"
        self._worker_defaults = {**_WORKER_DEFAULTS, **(worker_defaults or {})}
        self.skipper: Optional[TimeSkipper] = (
            TimeSkipper(server, self.clock, settle_timeout=settle_timeout) if isinstance(self.clock, VirtualClock)
            else None)
        self._running: List[_RunningWorker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.client: Client = self.new_client()

    @classmethod
    def start(cls, *, time_skipping: bool, pool: Optional[str] = None, start_time: Optional[Union[float, datetime]]
              = None, namespace: str = "default", token: Optional[str] = None, settle_timeout: float = 30.0,
              worker_defaults: Optional[Dict[str, Any]] = None, **server_options: Any) -> LiveEnvironment:
        """Start the server (``server_options`` are :class:`DevServer`'s) and build the environment.

        ``start_time`` (epoch seconds or an aware ``datetime``) sets where a virtual clock begins.
        """
        clock: Clock
        if time_skipping:
            begin = start_time.timestamp() if isinstance(start_time, datetime) else start_time
            clock = VirtualClock(begin)
        elif start_time is not None:
            raise ValueError("start_time needs a virtual clock: use start_time_skipping()")
        else:
            clock = SystemClock()
        options = {**_SERVER_DEFAULTS, **server_options}
        namespaces = ("default",) if namespace == "default" else ("default", namespace)
        server = DevServer(port=0, db=":memory:", token=token, namespaces=namespaces, clock=clock, **options).start()
        try:
            return cls(server, pool=pool or default_pool(), namespace=namespace, token=token,
                       settle_timeout=settle_timeout, worker_defaults=worker_defaults)
        except BaseException:
            server.stop()
            raise

    # -- what a test uses --------------------------------------------------------------------
    @property
    def supports_time_skipping(self) -> bool:
        return self.skipper is not None

    @property
    def time_skipped(self) -> float:
        """Virtual seconds jumped over so far (0 on the real clock)."""
        return self.clock.skipped if isinstance(self.clock, VirtualClock) else 0.0

    def time(self) -> float:
        """The server's time (epoch seconds): what ``ctx.now()`` and every deadline are measured on."""
        return self.clock.time()

    def get_current_time(self) -> datetime:
        """The server's time as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self.clock.time(), timezone.utc)

    def new_client(self, **options: Any) -> Client:
        """Another client of this server (same namespace and token unless given)."""
        options.setdefault("namespace", self.namespace)
        options.setdefault("token", self._token)
        return EnvironmentClient(self.server.url, environment=self, **options)

    def sleep(self, duration: Duration) -> None:
        """Let ``duration`` pass: virtual time jumps deadline by deadline (real sleep on the real clock)."""
        seconds = _seconds(duration)
        if self.skipper is None:
            time.sleep(seconds)
        else:
            self.skipper.sleep(seconds)

    def settle(self, timeout: Optional[float] = None) -> None:
        """Block until nothing is in flight (no task leased or takeable, no query waiting)."""
        if self.skipper is not None:
            self.skipper.settle(timeout)

    @contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Inside the block, waiting for a result does not skip time (``sleep`` still does)."""
        if self.skipper is None:
            yield
            return
        with self.skipper.disabled():
            yield

    def _wait_for_change(self, timeout: float) -> None:
        """Wait for the server's next commit (at most ``timeout``), letting time skip meanwhile."""
        skipper = self.skipper
        if skipper is None:
            time.sleep(min(timeout, 0.02))
            return
        seen = skipper.changes.count
        with skipper.unlocked():
            skipper.changes.wait(seen, timeout)

    @contextmanager
    def worker(self, task_queue: Optional[str] = None, *, workflows: Sequence[Any] = (),
               activities: Sequence[Callable[..., Any]] = (), pool: Optional[str] = None,
               ready_timeout: float = 20.0, **options: Any) -> Iterator[Worker]:
        """Run a :class:`~sync_worker.Worker` on ``task_queue`` (default :attr:`task_queue`) for the block.

        Yields once the worker is registered and polling; leaving the block stops it (drain
        and deregister). ``options`` are ``Worker``'s (``max_concurrent_activity_tasks``...).
        """
        client = Client(self.server.url, namespace=self.namespace, token=self._token)
        worker = Worker(client, task_queue=task_queue or self.task_queue, workflows=workflows,
                        activities=activities, pool=pool or self.pool, **{**self._worker_defaults, **options})
        running = _RunningWorker(worker, client)
        with self._lock:
            if self._closed:
                raise RuntimeError("this environment is shut down")
            self._running.append(running)
        try:
            running.start(ready_timeout)
            yield worker
        finally:
            try:
                running.stop()
            finally:
                with self._lock:
                    if running in self._running:
                        self._running.remove(running)

    # -- lifecycle -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the workers still running, the time skipper and the server (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running, self._running = list(self._running), []
        try:
            for item in running:
                item.stop()
        finally:
            if self.skipper is not None:
                self.skipper.stop()
            self.client.close()
            self.server.stop()

    def __enter__(self) -> LiveEnvironment:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.shutdown()


class _RunningWorker:
    """``worker.run()`` on a thread (a greenlet in a gevent-patched process)."""

    def __init__(self, worker: Worker, client: Client) -> None:
        self.worker = worker
        self.client = client
        self.errors: List[BaseException] = []
        self.thread = threading.Thread(target=self._run, name=f"test-worker-{worker.worker_id}", daemon=True)
        self._stopped = False

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as error:
            self.errors.append(error)

    def start(self, ready_timeout: float) -> None:
        self.thread.start()
        deadline = time.monotonic() + ready_timeout
        while not self.worker.status().ready:
            if self.errors or not self.thread.is_alive():
                raise RuntimeError(f"the test worker failed to start: {self.errors[:1] or 'it stopped'}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the test worker was not ready within {ready_timeout} s: "
                                   f"{self.worker.status().ready_reason}")
            time.sleep(0.005)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.thread.is_alive():
                self.worker.stop()
        except BaseException as error:  # a drain that could not finish: report it, still join
            log.warning("test worker %s did not stop cleanly: %s", self.worker.worker_id, error)
        finally:
            self.thread.join(30)
            self.client.close()
