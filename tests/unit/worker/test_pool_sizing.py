"""A worker sizes its client's connection pool for every poller, slot and heartbeat."""

from __future__ import annotations

from sync_worker.client import Client
from sync_worker.worker import Worker


def test_worker_grows_the_client_pool_for_its_slots() -> None:
    client = Client("http://127.0.0.1:9", max_connections=8)
    Worker(client, task_queue="q", max_concurrent_activity_tasks=200, max_concurrent_workflow_tasks=20,
           pool="threads")
    assert client.max_connections >= 220 + 3
    small = Client("http://127.0.0.1:9", max_connections=500)
    Worker(small, task_queue="q", max_concurrent_activity_tasks=2, pool="threads")
    assert small.max_connections == 500  # never shrinks a bigger pool
