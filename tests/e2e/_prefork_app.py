"""A worker app for the prefork tests: ``sync-worker run -P prefork tests.e2e._prefork_app:make_worker``.

Every activity answers with the pid of the process that ran it, so a test sees which child did
the work; ``prefork.grow`` leaks memory on purpose (recycling by memory).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List

from sync_worker import activity, workflow
from sync_worker.worker import Worker

_LEAK: List[bytes] = []


@activity.defn(name="prefork.pid")
def pid() -> int:
    return os.getpid()


@activity.defn(name="prefork.sleep")
def sleep(seconds: float) -> Dict[str, Any]:
    """Sleeps, heartbeating every 0.2 s (the first beat lets a test see the attempt really runs)."""
    ctx = activity.context()
    deadline = time.monotonic() + seconds
    while True:
        ctx.heartbeat_sync({"pid": os.getpid()})
        left = deadline - time.monotonic()
        if left <= 0:
            return {"pid": os.getpid(), "slept": seconds}
        time.sleep(min(0.2, left))


@activity.defn(name="prefork.rss")
def rss() -> Dict[str, Any]:
    from sync_worker.host.prefork import resident_bytes

    return {"pid": os.getpid(), "rss": resident_bytes()}


@activity.defn(name="prefork.grow")
def grow(megabytes: int) -> int:
    chunk = bytearray(megabytes * 1024 * 1024)
    for index in range(0, len(chunk), 4096):  # touch every page: resident, not just reserved
        chunk[index] = 1
    _LEAK.append(bytes(chunk))
    return os.getpid()


@workflow.defn(name="prefork.fanout")
class Fanout:
    def run(self, ctx: Any, count: int) -> Any:
        pids = []
        for _ in range(count):
            answer = yield ctx.schedule_activity("prefork.pid", [])
            pids.append(answer)
        return {"workflow_pid": os.getpid(), "activity_pids": pids}


def make_worker(client: object, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, activities=[pid, sleep, grow, rss], workflows=[Fanout],  # type: ignore[arg-type]
                  poll_timeout=2.0, shutdown_timeout=20.0)
