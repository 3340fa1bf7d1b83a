"""The worker app of ``bench/fault_campaign.py``: ``sync-worker run bench._fault_app:make_worker``.

Each activity records its side effect as one JSON line (workflow id, step, worker pid, attempt)
appended to ``$FAULT_EFFECTS`` with ``fsync``, so the campaign can count duplicates after kills.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from sync_worker import activity, workflow
from sync_worker.worker import Worker

#: The activity's start-to-close timeout: how long a lost attempt blocks before the server retries it.
LEASE_SECONDS = 10


@activity.defn(name="fault.step")
def step(workflow_id: str, index: int) -> str:
    time.sleep(0.15)  # a little work, so kills land while activities run
    line = json.dumps({"wf": workflow_id, "step": index, "pid": os.getpid(), "at": time.time(),
                       "attempt": activity.context().info.attempt_number})
    fd = os.open(os.environ["FAULT_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"{workflow_id}:{index}"


@workflow.defn(name="fault.flow")
class FaultFlow:
    def run(self, ctx: Any, workflow_id: str, steps: int) -> Any:
        done = []
        for index in range(steps):
            result = yield ctx.schedule_activity(
                "fault.step", [workflow_id, index], start_to_close_timeout=LEASE_SECONDS,
                retry_policy={"max_attempts": 20, "backoff_seconds": [0.5]})
            done.append(result)
        return done


def make_worker(client: Any, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[FaultFlow], activities=[step], poll_timeout=10.0,
                  shutdown_timeout=10.0, max_concurrent_activity_tasks=8)
