"""A worker app for the signal tests, loaded by ``sync-worker run tests.e2e._signal_app:make_worker``."""

from __future__ import annotations

import time

from sync_worker import activity
from sync_worker.worker import Worker


@activity.defn(name="signals.sleep")
def sleep_then_answer(seconds: float) -> str:
    activity.context().heartbeat_sync({"started": True})  # lets the test see the attempt really runs
    time.sleep(seconds)
    return f"slept {seconds}"


def make_worker(client: object, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, activities=[sleep_then_answer], poll_timeout=2.0,
                  shutdown_timeout=20.0)
