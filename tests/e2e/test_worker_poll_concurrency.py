"""Several pollers per role and reused slot threads, against the real dev server.

Runs on threads and again under gevent (the e2e suite's second leg): a worker with three
activity pollers keeps three long polls open while idle, never leases more tasks than it has
free slots, and runs one task after another without one new OS thread per task (threads pool).
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, List

import pytest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

GATE = threading.Event()
SEEN_THREADS: List[str] = []


@activity.defn(name="polls.gated")
def gated(n: int) -> int:
    GATE.wait(20)
    return n


@activity.defn(name="polls.echo")
def echo(n: int) -> int:
    SEEN_THREADS.append(threading.current_thread().name)
    return n


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:") as dev:
        yield dev


@pytest.fixture
def client(server: DevServer) -> Iterator[Client]:
    c = Client(server.url)
    try:
        yield c
    finally:
        c.close()


def _leased(client: Client, ids: List[str]) -> int:
    return sum(1 for i in ids if client.describe_activity(i)["activity_status"] == "running")


def test_several_pollers_never_lease_beyond_free_slots(client: Client) -> None:
    GATE.clear()
    queue = unique_queue("polls")
    worker = make_worker(client, task_queue=queue, activities=[gated], poll_timeout=2.0,
                         max_concurrent_activity_tasks=3, max_concurrent_activity_task_polls=3,
                         shutdown_timeout=10.0)
    assert worker.max_concurrent_activity_task_polls == 3
    try:
        with RunningWorker(worker):
            # idle: every poller holds the slot reserved for the task it may receive
            wait_for(lambda: worker.task_slots()["activity_available"] == 0, timeout=5)
            wait_for(lambda: worker.status().role("activity") is not None
                     and worker.status().role("activity").in_flight_seconds is not None, timeout=5)  # type: ignore[union-attr]
            ids = [client.start_activity("polls.gated", n, task_queue=queue)["activity_id"] for n in range(5)]
            wait_for(lambda: _leased(client, ids) == 3, timeout=10)
            # three tasks hold all three slots: no poll is open, nothing more is leased
            for _ in range(5):
                assert _leased(client, ids) == 3
                assert worker.task_slots()["activity_available"] == 0
                worker.backend.sleep(0.1)
            GATE.set()
            assert sorted(client.get_activity_result(i, timeout=15) for i in ids) == list(range(5))
    finally:
        GATE.set()


def test_slot_threads_are_reused(client: Client) -> None:
    SEEN_THREADS.clear()
    queue = unique_queue("reuse")
    # one poller: every task is handed to a slot unit (with two, a poller runs a task itself while
    # the other poll is open, docs/worker.md "Poll concurrency", and starts no slot thread for it)
    worker = make_worker(client, task_queue=queue, activities=[echo], poll_timeout=2.0,
                         max_concurrent_activity_tasks=2, max_concurrent_activity_task_polls=1)
    with RunningWorker(worker):
        for n in range(12):
            receipt = client.start_activity("polls.echo", n, task_queue=queue)
            assert client.get_activity_result(receipt["activity_id"], timeout=10) == n
    assert len(SEEN_THREADS) == 12
    if worker.backend.name == "threads":
        # a reused thread takes the name of the task it runs
        assert all(name.startswith("sync-worker-activity-") for name in SEEN_THREADS), SEEN_THREADS
        # at most one thread per slot ever started, not one per task
        started = worker.backend.slot_threads.started  # type: ignore[attr-defined]
        assert 1 <= started <= 2, started
        wait_for(lambda: worker.backend.slot_threads.parked == 0, timeout=5)  # type: ignore[attr-defined]
    else:
        assert worker.backend.name == "gevent"  # a greenlet per task: nothing to reuse


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_poller_count_is_validated(client: Client, value: Any) -> None:
    with pytest.raises(ValueError, match="max_concurrent_activity_task_polls"):
        Worker(client, task_queue="q", activities=[echo], max_concurrent_activity_task_polls=value)
    with pytest.raises(ValueError, match="max_concurrent_workflow_task_polls"):
        Worker(client, task_queue="q", activities=[echo], max_concurrent_workflow_task_polls=value)
