"""gevent-only behaviour of the worker: greenlet activities, heartbeats, cold kill, hub liveness.

Collected only by ``tests/gevent_suite.py`` (see this folder's ``conftest.py``).
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Tuple

import gevent
import gevent.event
import pytest
from gevent import monkey

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.worker import InMemoryMetrics, ShutdownIncomplete

from .._worker_support import RunningWorker, make_worker, unique_queue, wait_for

CONCURRENT = 5
_arrived: List[str] = []
_all_arrived = gevent.event.Event()
_killed: List[str] = []
_sleeping = gevent.event.Event()


@activity.defn(name="gevent.heartbeat_together")
def heartbeat_together(token: str) -> Dict[str, Any]:
    ctx = activity.context()
    ctx.heartbeat_sync({"token": token, "stage": "arrived"})
    _arrived.append(token)
    if len(_arrived) >= CONCURRENT:
        _all_arrived.set()
    # Every attempt waits for the others: they only all get here if they run at once.
    arrived_together = _all_arrived.wait(10)
    ctx.heartbeat_sync({"token": token, "stage": "together"})
    return {
        "token": token,
        "together": bool(arrived_together),
        "same_context": activity.context() is ctx,
        "greenlet": isinstance(gevent.getcurrent(), gevent.Greenlet),
        "beats": ctx.heartbeats_sent,
    }


@activity.defn(name="gevent.sleep_long")
def sleep_long() -> str:
    task_id = activity.context().info.task_id
    _sleeping.set()
    try:
        gevent.sleep(60)
    except gevent.GreenletExit:
        _killed.append(task_id)
        raise
    return "woke up"


@activity.defn(name="gevent.burn_cpu")
def burn_cpu(seconds: float) -> int:
    # Pure computation, no cooperative point: the hub cannot run until it returns.
    spins = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spins += 1
    return spins


ACTIVITIES = [heartbeat_together, sleep_long, burn_cpu]


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def test_heartbeat_sync_from_concurrent_activity_greenlets(client: Client) -> None:
    _arrived.clear()
    _all_arrived.clear()
    queue = unique_queue("gevent-hb")
    worker = make_worker(client, task_queue=queue, activities=ACTIVITIES, poll_timeout=2.0,
                         max_concurrent_activity_tasks=CONCURRENT + 1)
    assert worker.backend.name == "gevent"
    with RunningWorker(worker) as running:
        tokens = [f"t{i}" for i in range(CONCURRENT)]
        receipts = [client.start_activity("gevent.heartbeat_together", token, task_queue=queue) for token in tokens]
        results = [client.get_activity_result(r["activity_id"], timeout=20) for r in receipts]
        assert [r["token"] for r in results] == tokens
        for result in results:
            assert result["together"] is True, result
            assert result["same_context"] is True and result["greenlet"] is True
            assert result["beats"] == 2
        for receipt in receipts:
            assert client.describe_activity(receipt["activity_id"]).get("last_heartbeat_at")
        assert running.stop() is None


def test_cold_stop_kills_a_greenlet_blocked_in_a_cooperative_sleep(client: Client) -> None:
    _killed.clear()
    _sleeping.clear()
    queue = unique_queue("gevent-cold")
    metrics = InMemoryMetrics()
    worker = make_worker(client, task_queue=queue, activities=ACTIVITIES, poll_timeout=2.0,
                         shutdown_timeout=30.0, metrics=metrics)
    with RunningWorker(worker) as running:
        client.start_activity("gevent.sleep_long", task_queue=queue)
        assert _sleeping.wait(15), "the activity never started"
        started = time.monotonic()
        error = running.stop(cold=True)
        assert isinstance(error, ShutdownIncomplete)
        assert time.monotonic() - started < 5.0, "a cold stop must not wait for the sleeping activity"
        wait_for(lambda: _killed, timeout=5)
        assert len(_killed) == 1
        # the killed greenlet ran its clean-up: slot released, counted as abandoned, not as a crash
        wait_for(lambda: metrics.counter("durable_workflow_worker_tasks", outcome="abandoned") == 1, timeout=5)
        assert metrics.counter("durable_workflow_worker_tasks", outcome="crashed") == 0
        assert worker.task_slots()["activity_available"] == worker.max_concurrent_activity_tasks


def _sample_status_from_a_real_thread(worker: Any, stall: float) -> Tuple[List[Tuple[bool, str]], Any]:
    """Poll ``worker.status()`` from an OS thread (not a greenlet) until told to stop."""
    start_thread = monkey.get_original("_thread", "start_new_thread")
    real_sleep = monkey.get_original("time", "sleep")
    samples: List[Tuple[bool, str]] = []
    stop = {"now": False}

    def sample() -> None:
        while not stop["now"]:
            status = worker.status(event_loop_stall_seconds=stall)
            samples.append((status.live, status.live_reason))
            real_sleep(0.05)

    start_thread(sample, ())
    return samples, stop


def test_a_cpu_bound_activity_makes_the_worker_not_live_while_the_hub_is_blocked(client: Client, monkeypatch: Any
                                                                                  ) -> None:
    queue = unique_queue("gevent-hub")
    stall = 1.5
    monkeypatch.setenv("SYNC_WORKER_HUB_MONITOR_SECONDS", "0.2")  # a short threshold wants a short interval
    worker = make_worker(client, task_queue=queue, activities=ACTIVITIES, poll_timeout=2.0)
    with RunningWorker(worker) as running:
        assert worker.status(event_loop_stall_seconds=stall).live
        samples, stop = _sample_status_from_a_real_thread(worker, stall)
        try:
            receipt = client.start_activity("gevent.burn_cpu", 3.5, task_queue=queue)
            assert client.get_activity_result(receipt["activity_id"], timeout=20) > 0
            # once the hub runs again the worker is live again
            wait_for(lambda: worker.status(event_loop_stall_seconds=stall).live, timeout=5)
        finally:
            stop["now"] = True
        blocked = [reason for live, reason in samples if not live]
        assert blocked, f"the sampling thread never saw the blocked hub ({len(samples)} samples)"
        assert all(reason.startswith("hub_blocked:") for reason in blocked), blocked
        assert "the gevent hub has been blocked for" in blocked[-1]
        worst = float(blocked[-1].rsplit("for ", 1)[1].split(" s")[0])
        assert stall < worst < 10.0
        status = worker.status(event_loop_stall_seconds=stall)
        assert status.live and status.live_reason == "live"
        assert running.stop() is None


def test_task_greenlets_keep_their_spawner_but_no_spawning_stack() -> None:
    from sync_worker.runtime.gevent_backend import GeventBackend

    backend = GeventBackend()
    seen: Dict[str, Any] = {}

    def body() -> None:
        me = gevent.getcurrent()
        seen.update(stack=me.spawning_stack, spawner=me.spawning_greenlet(), tree=me.spawn_tree_locals,
                    name=me.name)

    handle = backend.spawn_task("sync-worker-activity-t1", body)
    assert handle.join(5)
    assert seen["stack"] is None  # the frames' line-number walk is skipped for tasks
    assert seen["spawner"] is gevent.getcurrent()  # greenlet tree tracking otherwise as gevent does it
    assert isinstance(seen["tree"], dict)
    assert seen["name"] == "sync-worker-activity-t1"
    other = backend.spawn("sync-worker-poller", lambda: None)
    assert other.join(5)
    assert other._greenlet.spawning_stack is not None  # other greenlets keep gevent's record
