"""Pytest fixtures for the embedded dev server (re-exported by ``tests/conftest.py``)."""

from __future__ import annotations

from typing import Iterator

import pytest

from sync_worker.devserver import DevServer

__all__ = ["dev_server", "dev_server_session"]


@pytest.fixture
def dev_server() -> Iterator[DevServer]:
    """A fresh in-memory server per test, with short leases and a fast query timeout."""
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as server:
        yield server


@pytest.fixture(scope="session")
def dev_server_session() -> Iterator[DevServer]:
    """One in-memory server shared by a whole session (use unique ids and task queues)."""
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as server:
        yield server
