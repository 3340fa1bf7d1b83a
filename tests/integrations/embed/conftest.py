"""Fixtures of the embedding tests: a dev server with short leases, a client, a marker folder."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from sync_worker.client import Client
from sync_worker.devserver import DevServer


@pytest.fixture
def devserver() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=5, query_timeout_seconds=5) as server:
        yield server


@pytest.fixture
def client(devserver: DevServer) -> Iterator[Client]:
    with Client(devserver.url) as c:
        yield c


@pytest.fixture
def queue() -> str:
    return f"embed-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder
