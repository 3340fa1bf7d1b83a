"""Fixtures of the Celery-facade tests: the sample app on a live dev server, and its worker."""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

from sync_worker import Client
from sync_worker.devserver import DevServer

from ._support import SAMPLE

if str(SAMPLE) not in sys.path:
    sys.path.insert(0, str(SAMPLE))


@pytest.fixture(scope="module")
def celery_server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as server:
        yield server


@pytest.fixture(scope="module")
def sample_app(celery_server: DevServer) -> Iterator[object]:
    import proj.tasks  # noqa: F401 - registers the tasks
    from proj.celery import app

    app.client = Client(celery_server.url)
    app.conf.durable_workflow_heartbeat_interval = 0.5
    app.conf.task_always_eager = False
    yield app
    app.client = None


@pytest.fixture(scope="module")
def sample_worker(sample_app: object) -> Iterator[object]:
    from sync_worker_celery.worker import WorkerGroup

    from ._support import pool

    group = WorkerGroup(sample_app, sample_app.workers_for(  # type: ignore[attr-defined]
        ["proj-default", "proj-routed"], concurrency=8, pool=pool()))
    assert all(w.backend.name == pool() for w in group.workers)   # the gevent leg really runs on greenlets
    group.start()
    assert group.wait_ready(30), f"workers did not start: {group.errors}"
    yield group
    group.stop()
    group.join(30)
