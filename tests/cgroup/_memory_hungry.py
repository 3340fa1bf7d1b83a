"""The worker of the cgroup tests and bench: activities that allocate and touch a lot of memory.

``sync-worker run tests.cgroup._memory_hungry:build -Q QUEUE -c adaptive|N|--autoscale MAX``.
``SW_MEMGATE_CONCURRENCY`` (JSON, e.g. ``{"max": 8, "start": 8}``) builds the worker with that
option instead (leave ``-c`` off then). With ``SW_MEMGATE_STATUS_FILE`` set, the worker's final
``status().concurrency`` (camelCase wire form plus ``forcedAdmissions``) is written there when
the process exits normally.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any, Optional

from sync_worker import activity
from sync_worker.worker import Worker


@activity.defn(name="cg.allocate")
def allocate(megabytes: int, hold_seconds: float) -> int:
    """Allocate ``megabytes`` MiB, touch every page (so it is really resident), hold it, free it."""
    block = bytearray(megabytes * 1024 * 1024)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    time.sleep(hold_seconds)
    size = len(block)
    del block
    return size


@activity.defn(name="cg.noop")
def noop() -> None:
    return None


def _dump(worker: Worker, path: str) -> None:
    status = worker.status().concurrency
    if status is None:
        return
    wire = status.to_wire()
    wire["forcedAdmissions"] = status.forced_admissions
    with open(path, "w") as handle:
        json.dump(wire, handle)


def build(client: Any, task_queue: str, concurrency: Any = 8, pool: Optional[str] = None) -> Worker:
    spec = os.environ.get("SW_MEMGATE_CONCURRENCY")
    if spec:
        concurrency = json.loads(spec)
    worker = Worker(client, task_queue=task_queue, activities=[allocate, noop], pool=pool,
                    max_concurrent_activity_tasks=concurrency, shutdown_timeout=20.0)
    path = os.environ.get("SW_MEMGATE_STATUS_FILE")
    if path:
        atexit.register(_dump, worker, path)
    return worker
