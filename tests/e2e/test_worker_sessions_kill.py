"""A session's holder killed with SIGKILL mid-session (a real worker process), on a real dev server.

The dev server notices the holder is gone (its registration goes stale, the session lease
lapses: the scheduler's tick). Then, as the engine's contract says:

* ``allow_reacquire_after_failure=False``: the session can never be held again; its pending
  activity (the killed attempt's retry) fails with the session error, and the workflow catches it;
* the default (reacquisition allowed): the other worker on the queue reacquires the session and
  runs the rest of it.

Runs on threads and again under gevent (the victim process then runs a gevent worker).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from typing import Any, Iterator

import pytest

from sync_worker.client import Client
from sync_worker.devserver import DevServer

from ._session_worker_app import KilledHolder, step
from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def server() -> Iterator[DevServer]:
    # a worker counts as gone 2 s after its last poll or heartbeat; workers beat every second
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=5, stale_after_seconds=2,
                   heartbeat_interval_seconds=1) as srv:
        yield srv


def _victim(server: DevServer, queue: str, worker_id: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.e2e._session_worker_app", server.url, queue, worker_id],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("reacquire", [False, True], ids=["reacquire-disallowed", "reacquired"])
def test_the_holder_killed_mid_session(server: DevServer, tmp_path: Any, reacquire: bool) -> None:
    queue = unique_queue("sess-kill")
    victim_id = f"victim-{uuid.uuid4().hex[:6]}"
    victim = _victim(server, queue, victim_id)
    client = Client(server.url)
    try:
        handle = client.start_workflow("e2e.session.kill", f"k-{uuid.uuid4().hex[:6]}", reacquire, str(tmp_path),
                                       task_queue=queue)
        # the victim holds the session and is inside the slow step
        wait_for(lambda: (tmp_path / f"{victim_id}-1").exists() or victim.poll() is not None, timeout=30)
        assert victim.poll() is None, victim.stderr.read().decode() if victim.stderr else ""
        survivor = make_worker(client, task_queue=queue, worker_id=f"survivor-{uuid.uuid4().hex[:6]}",
                               workflows=[KilledHolder], activities=[step], poll_timeout=2.0, shutdown_timeout=5.0)
        with RunningWorker(survivor):
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(10)
            result = handle.result(timeout=45)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        client.close()
    assert result["done"][0] == {"step": 0, "worker": victim_id}
    if not reacquire:
        assert result["lost"] == {"code": "session_reacquire_disallowed", "type": "WorkerSessionLost",
                                  "category": "internal"}, result
        assert len(result["done"]) == 1
        # the survivor never ran a step of the session it could not hold
        assert not [p for p in os.listdir(tmp_path) if p.startswith("survivor")]
    else:
        assert result["lost"] is None, result
        assert [s["worker"] for s in result["done"][1:]] == [survivor.worker_id] * 2
