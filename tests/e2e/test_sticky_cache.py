"""The sticky workflow cache against the dev server over real sockets (threads, then gevent).

Every test checks the run's result and that replaying the final history cold gives the same
completion, so a sticky mistake cannot hide behind a passing run.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity, payloads, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker
from sync_worker.workflow import replay

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@activity.defn(name="e2e.sticky.add")
def add(total: int, step: int) -> int:
    return total + step


@activity.defn(name="e2e.sticky.slow_add")
def slow_add(total: int, step: int) -> int:
    time.sleep(0.15)
    return total + step


@workflow.defn(name="e2e.sticky.counter")
class Counter:
    def run(self, ctx: Any, steps: int, pause: int = 0) -> Any:
        total = 0
        for step in range(1, steps + 1):
            total = yield ctx.schedule_activity("e2e.sticky.add", [total, step])
            if pause and step == steps // 2:
                yield ctx.start_timer(pause)
        token = yield ctx.side_effect(lambda: "side")
        return {"total": total, "token": token}


@workflow.defn(name="e2e.sticky.notes")
class Notes:
    def __init__(self) -> None:
        self.notes: List[str] = []

    @workflow.signal("note")
    def note(self, text: str) -> None:
        self.notes.append(f"signal:{text}")

    @workflow.update("stamp")
    def stamp(self, text: str) -> int:
        self.notes.append(f"update:{text}")
        return len(self.notes)

    @workflow.query("notes")
    def read(self) -> List[str]:
        return list(self.notes)

    def run(self, ctx: Any, steps: int) -> Any:
        total = 0
        for step in range(1, steps + 1):
            total = yield ctx.schedule_activity("e2e.sticky.slow_add", [total, step])
        return {"total": total, "notes": list(self.notes)}


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def _sticky_worker(client: Client, queue: str, **kwargs: Any) -> Worker:
    kwargs.setdefault("sticky_cache_capacity", 16)
    return make_worker(client, task_queue=queue, workflows=[Counter, Notes], activities=[add, slow_add],
                       poll_timeout=2.0, **kwargs)


def _spy_polls(client: Client) -> List[Dict[str, Any]]:
    """Record what the dev server sends on each workflow poll (mode, first sequence, size)."""
    seen: List[Dict[str, Any]] = []
    original = client.poll_workflow_task

    def poll(*args: Any, **kwargs: Any) -> Any:
        task = original(*args, **kwargs)
        if task:
            events = task.get("history_events") or []
            seen.append({"mode": task.get("sticky_replay_mode"), "count": len(events),
                         "first": events[0].get("sequence") if events else None})
        return task

    client.poll_workflow_task = poll  # type: ignore[method-assign]
    return seen


def _cold_result(client: Client, workflow_id: str, cls: type, args: List[Any]) -> Any:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    history = [event for event in client.iter_history(workflow_id, run_id)
               if event.get("event_type") not in ("WorkflowCompleted",)]
    commands = replay(cls, history, args, workflow_id=workflow_id, run_id=run_id).commands
    wire = commands[-1].to_wire("q")
    assert wire["type"] == "complete_workflow"
    return payloads.decode_envelope(wire["result"])


def test_a_long_run_is_resumed_from_history_tails(client: Client) -> None:
    queue = unique_queue("sticky")
    polls = _spy_polls(client)
    worker = _sticky_worker(client, queue)
    handle = client.start_workflow("e2e.sticky.counter", 25, task_queue=queue)
    with RunningWorker(worker):
        assert handle.result(timeout=60) == {"total": 325, "token": "side"}
        metrics = worker.sticky_cache_metrics()
    assert metrics["hit"] >= 24 and metrics["forced_cold_replay"] == 0, metrics
    tails = [poll for poll in polls if poll["mode"] == "sticky_hit_expected"]
    assert len(tails) >= 24 and all(poll["first"] > 1 and poll["count"] <= 4 for poll in tails), polls
    assert _cold_result(client, handle.workflow_id, Counter, [25]) == {"total": 325, "token": "side"}


def test_capacity_and_ttl_evict_and_the_runs_still_finish(client: Client) -> None:
    queue = unique_queue("sticky-evict")
    worker = _sticky_worker(client, queue, sticky_cache_capacity=1, sticky_cache_ttl_seconds=1)
    with RunningWorker(worker):
        handles = [client.start_workflow("e2e.sticky.counter", 8, task_queue=queue) for _ in range(3)]
        timed = client.start_workflow("e2e.sticky.counter", 4, 2, task_queue=queue)  # a 2 s timer > TTL
        for handle in handles:
            assert handle.result(timeout=60) == {"total": 36, "token": "side"}
        assert timed.result(timeout=60) == {"total": 10, "token": "side"}
        metrics = worker.sticky_cache_metrics()
    assert metrics["eviction"] >= 1 and metrics["entries"] <= 1, metrics
    assert metrics["hit"] >= 1 and metrics["miss"] >= 4, metrics
    assert _cold_result(client, timed.workflow_id, Counter, [4, 2]) == {"total": 10, "token": "side"}


def test_a_restarted_worker_replays_cold_from_the_full_history(client: Client) -> None:
    queue = unique_queue("sticky-restart")
    worker_id = f"sticky-restart-{uuid.uuid4().hex[:8]}"
    handle = client.start_workflow("e2e.sticky.counter", 6, 3, task_queue=queue)
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    first = _sticky_worker(client, queue, worker_id=worker_id)
    with RunningWorker(first) as running:
        wait_for(lambda: any(event.get("event_type") == "TimerScheduled"
                             for event in client.iter_history(handle.workflow_id, run_id)), timeout=30)
        assert first.sticky_cache_metrics()["entries"] == 1
        running.stop()
    polls = _spy_polls(client)
    second = _sticky_worker(client, queue, worker_id=worker_id)  # same id: the server still sends tails
    with RunningWorker(second):
        assert handle.result(timeout=60) == {"total": 21, "token": "side"}
        metrics = second.sticky_cache_metrics()
    assert polls[0]["mode"] == "sticky_hit_expected" and polls[0]["first"] > 1, polls
    assert metrics["forced_cold_replay"] >= 1 and metrics["hit"] >= 1, metrics


def test_two_workers_share_a_queue_and_hand_runs_over(client: Client) -> None:
    queue = unique_queue("sticky-pair")
    one, two = _sticky_worker(client, queue), _sticky_worker(client, queue)
    with RunningWorker(one), RunningWorker(two):
        handles = [client.start_workflow("e2e.sticky.counter", 10, task_queue=queue) for _ in range(4)]
        for handle in handles:
            assert handle.result(timeout=60) == {"total": 55, "token": "side"}
    both = [one.sticky_cache_metrics(), two.sticky_cache_metrics()]
    assert sum(m["hit"] for m in both) >= 10, both
    # A run handed from one worker to the other: the first stops while the run waits on a timer.
    handle = client.start_workflow("e2e.sticky.counter", 4, 2, task_queue=queue)
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    first, second = _sticky_worker(client, queue), _sticky_worker(client, queue)
    with RunningWorker(first) as running:
        wait_for(lambda: any(event.get("event_type") == "TimerScheduled"
                             for event in client.iter_history(handle.workflow_id, run_id)), timeout=30)
        running.stop()
    polls = _spy_polls(client)
    with RunningWorker(second):
        assert handle.result(timeout=60) == {"total": 10, "token": "side"}
    assert polls[0]["mode"] == "forced_cold_replay" and polls[0]["first"] == 1, polls
    assert second.sticky_cache_metrics()["forced_cold_replay"] >= 1


def test_signals_queries_and_updates_on_cached_runs(client: Client) -> None:
    queue = unique_queue("sticky-msg")
    worker = _sticky_worker(client, queue)
    handle = client.start_workflow("e2e.sticky.notes", 12, task_queue=queue)
    sent: List[str] = []
    with RunningWorker(worker):
        wait_for(lambda: worker.sticky_cache_metrics()["entries"] == 1, timeout=30)
        for index in range(3):
            client.signal_workflow(handle.workflow_id, "note", args=[f"s{index}"])
            sent.append(f"signal:s{index}")
            answer = client.update_workflow(handle.workflow_id, "stamp", args=[f"u{index}"], wait_for="completed")
            sent.append(f"update:u{index}")
            assert answer["result"] == len(sent)
            assert client.query_workflow(handle.workflow_id, "notes")["result"] == sent
        result = handle.result(timeout=60)
        metrics = worker.sticky_cache_metrics()
    assert result == {"total": 78, "notes": sent}
    assert metrics["hit"] >= 6, metrics
    assert _cold_result(client, handle.workflow_id, Notes, [12]) == result


def test_the_example_runs_with_and_without_the_cache() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "sticky_long_run.py"
    spec = importlib.util.spec_from_file_location("sticky_long_run_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cached = module.main(["--steps", "30"])
    assert cached["result"] == 465 and cached["sticky_cache"]["hit"] == 30
    cold = module.main(["--steps", "10", "--no-cache"])
    assert cold["result"] == 55 and cold["sticky_cache"]["hit"] == 0
    # A condition wait released by a signal per step: both tasks of every step resumed.
    gated = module.main(["--steps", "12", "--shape", "gated"])
    assert gated["result"] == 78 and gated["sticky_cache"]["forced_cold_replay"] == 0, gated
    assert gated["sticky_cache"]["hit"] >= 24, gated
    parallel = module.main(["--steps", "12", "--shape", "parallel"])
    assert parallel["result"] == 156 and parallel["sticky_cache"]["forced_cold_replay"] == 0, parallel
    assert parallel["sticky_cache"]["hit"] >= 12, parallel
