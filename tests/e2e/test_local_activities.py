"""Local activities on the real worker against the real dev server (threads; again under gevent).

* The workflow task's lease is renewed before each attempt and on each heartbeat: with a 2 s lease
  a local activity whose attempts take ~4 s in all completes in one task, its function running
  exactly as many times as the policy allows (a lapsed lease would re-deliver the task, and the
  activity would run again).
* Blocking code in a local activity holds its own slot only: while one workflow's local activity
  sleeps, another workflow's task, activity and completion go through.
* A heartbeat inside a local activity is recorded in its attempt.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests.e2e._worker_support import RunningWorker, make_worker, unique_queue

CALLS: Dict[str, int] = {}
LOCK = threading.Lock()
RELEASED = threading.Event()


@activity.defn(name="e2e.local.slow_flaky")
def slow_flaky(key: str) -> str:
    with LOCK:
        CALLS[key] = CALLS.get(key, 0) + 1
        count = CALLS[key]
    time.sleep(1.4)
    if count < 3:
        raise RuntimeError(f"attempt {count}")
    return f"ok after {count}"


@activity.defn(name="e2e.local.beating")
def beating(steps: int) -> int:
    for step in range(steps):
        time.sleep(0.5)
        activity.context().heartbeat_sync({"step": step})
    return steps


@activity.defn(name="e2e.local.blocking")
def blocking(seconds: float) -> str:
    time.sleep(seconds)  # plain blocking code (a patched sleep under gevent)
    return "woke"


@activity.defn(name="e2e.local.quick")
def quick(value: int) -> int:
    return value + 1


@workflow.defn(name="e2e.local.retrying")
class Retrying:
    def run(self, ctx: Any, key: str) -> Any:
        value = yield ctx.local_activity("e2e.local.slow_flaky", [key], retry_policy={"max_attempts": 3})
        beats = yield ctx.local_activity("e2e.local.beating", [6])
        return {"value": value, "beats": beats}


@workflow.defn(name="e2e.local.sleeper")
class Sleeper:
    def run(self, ctx: Any, seconds: float) -> Any:
        return (yield ctx.local_activity("e2e.local.blocking", [seconds]))


@workflow.defn(name="e2e.local.quick")
class Quick:
    def run(self, ctx: Any, value: int) -> Any:
        return (yield ctx.schedule_activity("e2e.local.quick", [value]))


def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    return list(client.iter_history(workflow_id, client.describe_workflow(workflow_id).run_id or ""))


def test_the_lease_is_renewed_across_attempts_and_heartbeats() -> None:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=2) as server:
        client = Client(server.url)
        queue = unique_queue("local-lease")
        key = f"lease-{queue}"
        worker = make_worker(client, task_queue=queue, workflows=[Retrying], activities=[slow_flaky, beating],
                             poll_timeout=2.0, shutdown_timeout=10.0)
        try:
            with RunningWorker(worker) as running:
                handle = client.start_workflow("e2e.local.retrying", key, task_queue=queue)
                result = client.get_result(handle.workflow_id, timeout=60, poll_interval=0.1)
                assert running.stop() is None
            assert result == {"value": "ok after 3", "beats": 6}
            assert CALLS[key] == 3  # ~4.2 s of attempts under a 2 s lease: never re-delivered
            events = _history(client, handle.workflow_id)
            local = [e["payload"] for e in events if e["event_type"] == "ActivityScheduled"]
            assert [len(p["attempts"]) for p in local] == [3, 1]
            assert [beat["details"] for beat in local[1]["attempts"][0]["heartbeats"]] == \
                [{"step": step} for step in range(6)]
            assert [e["event_type"] for e in events].count("WorkflowCompleted") == 1
        finally:
            client.close()


def test_a_blocking_local_activity_does_not_stall_other_slots(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("local-block")
    worker = make_worker(client, task_queue=queue, workflows=[Sleeper, Quick], activities=[blocking, quick],
                         max_concurrent_workflow_tasks=4, poll_timeout=2.0, shutdown_timeout=10.0)
    try:
        with RunningWorker(worker) as running:
            sleeper = client.start_workflow("e2e.local.sleeper", 4.0, task_queue=queue)
            time.sleep(0.5)  # the sleeper's task is now inside its local activity
            started = time.monotonic()
            quick_run = client.start_workflow("e2e.local.quick", 41, task_queue=queue)
            assert client.get_result(quick_run.workflow_id, timeout=20, poll_interval=0.05) == 42
            quick_took = time.monotonic() - started
            assert client.describe_workflow(sleeper.workflow_id).status not in ("completed",), \
                "the sleeper finished first: the test proves nothing"
            assert client.get_result(sleeper.workflow_id, timeout=30, poll_interval=0.1) == "woke"
            assert running.stop() is None
        assert quick_took < 3.0, f"another workflow waited {quick_took:.1f}s behind a blocking local activity"
    finally:
        client.close()
