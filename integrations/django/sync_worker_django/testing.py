"""Test helpers: an in-memory dev server and the project's workers, for one Django test.

Django ``TestCase`` (the mixin)::

    from django.test import TransactionTestCase
    from sync_worker_django.testing import DurableWorkflowTestMixin

    class CheckoutTests(DurableWorkflowTestMixin, TransactionTestCase):
        def test_checkout(self):
            order = Order.objects.create(...)
            self.start_durable_workers()                    # the project's workers, in threads
            result = self.run_workflow("shop.checkout", order.pk, task_queue="shop")

pytest (with or without pytest-django)::

    from sync_worker_django.testing import durable_server, durable_workers  # noqa: F401 (fixtures)

    def test_checkout(durable_workers):
        handle = durable_workers.client.start_workflow("shop.checkout", 1, task_queue="shop")
        assert handle.result(timeout=30)["status"] == "paid"

The workers run in other threads (or greenlets) with their own database connections, so
they see only *committed* rows: use ``TransactionTestCase`` (or pytest-django's
``transactional_db``), not ``TestCase``, whose rows stay inside the test's transaction.

Time skipping (``DurableTestEnvironment(time_skipping=True)``, or ``durable_time_skipping = True``
on a test class with the mixin): the server is the one of ``sync_worker.testing``'s
time-skipping environment, on a virtual clock. ``run_workflow`` and ``durable.result(handle)``
let time jump to each next timer, timeout or schedule while they wait; ``durable.sleep(seconds)``
moves it explicitly. A workflow that waits three days completes in milliseconds.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator, List, Optional, Sequence

from sync_worker import Worker
from sync_worker.devserver import DevServer
from sync_worker.testing.live import LiveEnvironment

from .conf import raw_settings
from .runner import WorkerGroup
from .workers import DjangoClient, build_workers, get_client

__all__ = ["DurableTestEnvironment", "DurableWorkflowTestMixin", "durable_server", "durable_workers"]


class DurableTestEnvironment:
    """A dev server, ``SYNC_WORKER`` pointed at it, and the workers started on demand.

    With ``time_skipping`` the server runs on a virtual clock (``sync_worker.testing``'s
    time-skipping environment, :attr:`live`): see :meth:`sleep` and :meth:`result`.
    """

    def __init__(self, server: Optional[DevServer] = None, *, time_skipping: bool = False) -> None:
        self._own_server = server is None
        #: The ``sync_worker.testing`` environment behind a time-skipping server (``None`` otherwise).
        self.live: Optional[LiveEnvironment] = None
        configured = raw_settings() or {}  # the server requires the tokens the settings name (TOKEN or per plane)
        token, worker_token = configured.get("TOKEN"), configured.get("WORKER_TOKEN")
        control_token = configured.get("CONTROL_TOKEN")
        if time_skipping:
            if server is not None:
                raise ValueError("time_skipping builds its own server; do not pass one")
            self.live = LiveEnvironment.start(time_skipping=True, token=token, worker_token=worker_token,
                                              control_token=control_token)
            server = self.live.server
        elif server is None:
            server = DevServer(token=token, worker_token=worker_token, control_token=control_token)
        self.server = server
        self._result_client: Any = None
        self._settings: Any = None
        self.group: Optional[WorkerGroup[Worker]] = None
        self._thread: Optional[threading.Thread] = None
        self._errors: List[BaseException] = []

    def start(self) -> DurableTestEnvironment:
        from django.test import override_settings

        self.server.start()
        configured = dict(raw_settings() or {})
        configured["SERVER_URL"] = self.server.url
        configured.setdefault("SHUTDOWN_TIMEOUT", 10)
        self._settings = override_settings(SYNC_WORKER=configured)
        self._settings.enable()
        return self

    @property
    def client(self) -> DjangoClient:
        return get_client()

    def start_workers(self, task_queues: Optional[Sequence[str]] = None, *, pool: Optional[str] = None,
                      concurrency: Optional[int] = None, ready_timeout: float = 20.0) -> List[Worker]:
        """Build the project's workers (autodiscovery included), run them, wait until every one is ready."""
        if self.group is not None:
            raise RuntimeError("workers are already running in this test environment")
        # one at a time: registration reads workflow sources with ast, which CPython 3.11 cannot
        # always do in two threads at once (gh-106905)
        group = WorkerGroup(build_workers(task_queues=task_queues, pool=pool, concurrency=concurrency),
                            start_one_at_a_time=True)
        self.group = group

        def run() -> None:
            try:
                group.run()
            except BaseException as error:
                self._errors.append(error)

        self._thread = threading.Thread(target=run, name="sync-worker-django-test", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + ready_timeout
        while not all(w.status().ready for w in group.workers):
            if self._errors or not self._thread.is_alive():
                raise RuntimeError(f"test workers failed to start: {self._errors[:1]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"test workers were not ready within {ready_timeout} s")
            time.sleep(0.02)
        return group.workers

    def stop_workers(self, *, cold: bool = False) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        try:
            group.stop(cold=cold)
        finally:
            if self._thread is not None:
                self._thread.join(30)

    def run_workflow(self, workflow_type: str, *args: Any, task_queue: Optional[str] = None,
                     timeout: float = 60.0, **options: Any) -> Any:
        """Start a workflow and block until its result (raises its failure)."""
        from .conf import get_config

        queue = task_queue or get_config().task_queues[0].name
        handle = self.client.start_workflow(workflow_type, *args, task_queue=queue, **options)
        return self.result(handle, timeout=timeout)

    def result(self, handle: Any, *, timeout: float = 60.0) -> Any:
        """The workflow's result (a handle or workflow id); on a virtual clock, time skips while it waits."""
        if self.live is None:
            return self.client.get_result(handle, timeout=timeout)
        return self._live_client().get_result(handle if isinstance(handle, str) else handle.workflow_id,
                                              timeout=timeout)

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass: on a virtual clock every timer, timeout and schedule on the way fires."""
        if self.live is None:
            time.sleep(seconds)
        else:
            self.live.sleep(seconds)

    def time(self) -> float:
        """The server's time (epoch seconds; virtual with time skipping)."""
        return self.server.clock.time()

    def _live_client(self) -> Any:
        """The time-skipping environment's client, with the settings' tokens (its waits skip time)."""
        assert self.live is not None
        if self._result_client is None:
            configured = raw_settings() or {}
            self._result_client = self.live.new_client(token=configured.get("TOKEN"),
                                                       control_token=configured.get("CONTROL_TOKEN"),
                                                       worker_token=configured.get("WORKER_TOKEN"))
        return self._result_client

    def stop(self) -> None:
        try:
            self.stop_workers()
        finally:
            if self._settings is not None:
                self._settings.disable()
                self._settings = None
            if self._result_client is not None:
                self._result_client.close()
            if self.live is not None:
                self.live.shutdown()
            elif self._own_server:
                self.server.stop()


class DurableWorkflowTestMixin:
    """Mix into ``TransactionTestCase``: a fresh dev server per test, workers on demand.

    ``self.durable`` is the test's :class:`DurableTestEnvironment`; ``SYNC_WORKER`` points
    at its server for the duration of the test, and running workers are stopped after it.
    """

    durable: DurableTestEnvironment
    #: Run the test's server on a virtual clock (``self.durable.sleep``, ``run_workflow`` skip time).
    durable_time_skipping = False

    @classmethod
    def setUpClass(cls) -> None:
        from django.test import TestCase

        if issubclass(cls, TestCase):
            raise TypeError(
                f"{cls.__name__}: the durable workers use their own database connections and cannot see rows "
                "inside TestCase's transaction; base the test on TransactionTestCase")
        super().setUpClass()  # type: ignore[misc]

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.durable = DurableTestEnvironment(time_skipping=self.durable_time_skipping).start()
        self.addCleanup(self.durable.stop)  # type: ignore[attr-defined]

    def start_durable_workers(self, task_queues: Optional[Sequence[str]] = None, **options: Any) -> List[Worker]:
        return self.durable.start_workers(task_queues, **options)

    @property
    def durable_client(self) -> DjangoClient:
        return self.durable.client

    def run_workflow(self, workflow_type: str, *args: Any, **options: Any) -> Any:
        return self.durable.run_workflow(workflow_type, *args, **options)


try:  # the fixtures exist only where pytest does
    import pytest
except ImportError:  # pragma: no cover
    pass
else:

    @pytest.fixture
    def durable_server() -> Iterator[DurableTestEnvironment]:
        """A started :class:`DurableTestEnvironment` (dev server + settings), no workers yet."""
        environment = DurableTestEnvironment().start()
        try:
            yield environment
        finally:
            environment.stop()

    @pytest.fixture
    def durable_workers(durable_server: DurableTestEnvironment) -> Iterator[DurableTestEnvironment]:
        """:func:`durable_server` with every ``TASK_QUEUES`` worker running."""
        durable_server.start_workers()
        yield durable_server
