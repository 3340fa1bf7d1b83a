"""An idle worker app for the wake-up test, loaded by ``sync-worker run tests.e2e._idle_app:make_worker``."""

from __future__ import annotations

from sync_worker import activity
from sync_worker.worker import Worker


@activity.defn(name="idle.noop")
def noop() -> None:
    return None


def make_worker(client: object, task_queue: str) -> Worker:
    # The defaults a deployment has: a 35 s long poll, 10 fixed activity slots.
    return Worker(client, task_queue=task_queue, activities=[noop])
