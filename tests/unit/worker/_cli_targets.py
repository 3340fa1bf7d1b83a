"""Targets for the CLI unit tests (importable as tests.unit.worker._cli_targets)."""

from __future__ import annotations

from typing import Any

from sync_worker import activity
from sync_worker.worker import Worker

from .fakes import FakeClient


@activity.defn(name="cli.noop")
def noop() -> None:
    return None


ready_worker = Worker(FakeClient(), task_queue="cli-q", activities=[noop])
not_a_worker = 42
CALLS: list = []


def factory(client: Any, task_queue: str, concurrency: int = 1) -> Worker:
    CALLS.append((client, task_queue, concurrency))
    return Worker(FakeClient(), task_queue=task_queue, activities=[noop],
                  max_concurrent_activity_tasks=concurrency)


def fresh_worker() -> Worker:
    return Worker(FakeClient(), task_queue="cli-q", activities=[noop])


def bad_factory() -> str:
    return "nope"


def raising_factory(client: Any) -> Worker:
    raise RuntimeError("settings not configured")
