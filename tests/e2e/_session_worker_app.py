"""A worker process for the session kill test: ``python -m tests.e2e._session_worker_app URL QUEUE ID DIR``.

It runs the session workflow and its activities on the suite's pool (gevent, patched first, when
``SYNC_WORKER_TEST_POOL=gevent``) until it is killed. ``e2e.session.kill.step`` writes
``DIR/<worker id>-<step>`` when it starts; a step marked slow then sleeps until the process dies.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("SYNC_WORKER_TEST_POOL") == "gevent":  # as a real gevent worker: patch before anything
    from gevent import monkey

    monkey.patch_all()

import time
from typing import Any, Dict, List

from sync_worker import ActivityRetryPolicy, WorkerSessionOptions, activity, workflow
from sync_worker.errors import ActivityFailed

SLOW_STEP = 1


@activity.defn(name="e2e.session.kill.step")
def step(index: int, marker_dir: str) -> Dict[str, Any]:
    worker_id = activity.context().info.worker_id
    with open(os.path.join(marker_dir, f"{worker_id}-{index}"), "w") as marker:
        marker.write(str(os.getpid()))
    if index == SLOW_STEP and worker_id.startswith("victim"):
        time.sleep(600)  # killed meanwhile
    return {"step": index, "worker": worker_id}


@workflow.defn(name="e2e.session.kill")
class KilledHolder:
    """Three session steps; a step whose session is gone for good is caught and reported."""

    def run(self, ctx: Any, session_id: str, reacquire: bool, marker_dir: str) -> Any:
        session = WorkerSessionOptions(session_id=session_id, lease_seconds=3,
                                       allow_reacquire_after_failure=reacquire)
        done: List[Dict[str, Any]] = []
        for index in range(3):
            try:
                done.append((yield ctx.schedule_activity(
                    "e2e.session.kill.step", [index, marker_dir], worker_session=session, start_to_close_timeout=4,
                    retry_policy=ActivityRetryPolicy(max_attempts=3, initial_interval_seconds=1))))
            except ActivityFailed as error:
                return {"done": done, "lost": {"code": error.code, "type": error.exception_type,
                                               "category": error.failure_category}}
        return {"done": done, "lost": None}


def main(argv: List[str]) -> None:
    from sync_worker.client import Client
    from sync_worker.worker import Worker

    url, queue, worker_id = argv[:3]
    client = Client(url)
    worker = Worker(client, task_queue=queue, worker_id=worker_id, workflows=[KilledHolder], activities=[step],
                    poll_timeout=2.0, shutdown_timeout=5.0,
                    pool="gevent" if os.environ.get("SYNC_WORKER_TEST_POOL") == "gevent" else "threads")
    worker.run()


if __name__ == "__main__":
    main(sys.argv[1:])
