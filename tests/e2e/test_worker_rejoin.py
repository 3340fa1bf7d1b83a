"""A worker whose registration an operator removed learns it from the server and registers again
(issue 27): the dev server refuses its polls (412 ``worker_not_registered``, as the real server
does), the worker logs it once, registers again, and the run started meanwhile completes."""

from __future__ import annotations

import logging
import uuid
from typing import Any, Iterator

import pytest

from sync_worker import activity
from sync_worker.client import Client

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@activity.defn(name="e2e.rejoin.echo")
def echo(value: str) -> str:
    return f"echo {value}"


@pytest.fixture
def client(dev_server: Any) -> Iterator[Client]:
    c = Client(dev_server.url)
    try:
        yield c
    finally:
        c.close()


def _status(client: Client, queue: str, worker_id: str) -> str:
    workers = [w for w in client.list_workers(task_queue=queue)["workers"] if w["worker_id"] == worker_id]
    return str(workers[0]["status"]) if workers else "absent"


def test_a_removed_registration_is_noticed_and_the_worker_registers_again(
        client: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sync_worker.worker")
    queue = unique_queue("rejoin")
    worker_id = f"rejoin-{uuid.uuid4().hex[:6]}"
    worker = make_worker(client, task_queue=queue, activities=[echo], poll_timeout=1.0, worker_id=worker_id,
                         shutdown_timeout=10.0)
    with RunningWorker(worker) as running:
        assert _status(client, queue, worker_id) == "active"
        client.deregister_worker(worker_id)  # the operator removes it while it polls
        assert _status(client, queue, worker_id) == "deregistered"
        handle = client.start_activity("e2e.rejoin.echo", "a", task_queue=queue)
        assert client.get_activity_result(handle, timeout=15, poll_interval=0.1) == "echo a"
        wait_for(lambda: _status(client, queue, worker_id) == "active", timeout=10)
        assert running.stop() is None
    said = [r.getMessage() for r in caplog.records if "no longer knows worker" in r.getMessage()]
    assert len(said) == 1, said  # once, however many pollers (and the heartbeat) were refused
    assert "registering it again" in said[0] and worker_id in said[0]
    assert any(r.getMessage() == f"worker {worker_id} registered again" for r in caplog.records)
