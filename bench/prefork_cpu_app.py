"""The worker of ``bench/prefork_cpu.py``: one CPU-bound activity (a fixed pure-Python loop)."""

from __future__ import annotations

import time

from sync_worker import activity
from sync_worker.worker import Worker


def burn(iterations: int) -> int:
    """Pure-Python arithmetic, holding the GIL throughout (the same loop in every bench app)."""
    total = 0
    for number in range(iterations):
        total += number * number % 7
    return total


@activity.defn(name="bench.spin")
def spin(iterations: int) -> float:
    """Burns, then answers when it finished (the bench's end of the window: no polling delay)."""
    burn(iterations)
    return time.time()


def make_worker(client: object, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, activities=[spin], poll_timeout=5.0)  # type: ignore[arg-type]
