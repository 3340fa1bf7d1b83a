"""Our BullMQ job operations (sync_worker.nestjs.bullmq) on the real Redis, without the engine.

The engine tests prove Node BullMQ and the engine accept what we write; these pin the job
semantics edge by edge: locks, stalls, the deferred failure and its bridge, retention, release.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any, Iterator

import pytest

from ._nestjs_harness import flush_redis_prefix, redis_url

redis = pytest.importorskip("redis")

from sync_worker.nestjs.bullmq import BullQueue  # noqa: E402
from sync_worker.nestjs.redis_transport import RedisTransport  # noqa: E402

if not redis_url():
    pytest.skip("no Redis: SYNC_WORKER_TEST_REDIS_URL is unset (scripts/services.sh starts one)",
                allow_module_level=True)

NOW = lambda: int(time.time() * 1000)  # noqa: E731


@pytest.fixture()
def client() -> Iterator[Any]:
    url = redis_url()
    assert url is not None
    prefix = f"swnj-bull{os.getpid()}"
    conn = redis.Redis.from_url(url, decode_responses=True)
    conn.test_prefix = prefix  # type: ignore[attr-defined]
    yield conn
    conn.close()
    flush_redis_prefix(url, prefix)


def queue(client: Any, name: str) -> BullQueue:
    return BullQueue(client, f"{client.test_prefix}-{name}-{uuid.uuid4().hex[:6]}")


def task(seq: int = 0) -> str:
    return json.dumps({"runId": "r1", "seq": seq, "stepId": f"r1:{seq}", "name": "s", "input": {}, "attempt": 1})


def test_fetch_locks_and_finish_honours_remove_on_complete(client: Any) -> None:
    q = queue(client, "tasks")
    first = q.add("task", task(0), {"removeOnComplete": True, "removeOnFail": {"age": 86400}}, NOW())
    second = q.add("task", task(1), {"removeOnComplete": False}, NOW())
    assert client.zscore(q.key("marker"), "0") == 0  # a blocked worker wakes
    job = q.fetch("tok-1", 5000, "w1", NOW())
    assert job is not None and job.id == first and job.name == "task" and job.data["seq"] == 0
    assert client.get(q.key(f"{first}:lock")) == "tok-1" and 0 < client.pttl(q.key(f"{first}:lock")) <= 5000
    assert client.hget(q.key(first), "pb") == "w1" and client.hget(q.key(first), "ats") == "1"
    assert q.finish(first, "not-mine", completed=True, value="null", now_ms=NOW()) == -6
    assert q.finish(first, "tok-1", completed=True, value="null", now_ms=NOW()) == 0
    assert not client.exists(q.key(first)) and client.lrange(q.key("active"), 0, -1) == []
    job2 = q.fetch("tok-2", 5000, "w1", NOW())
    assert job2 is not None and job2.id == second
    assert q.finish(second, "tok-2", completed=True, value='{"a":1}', now_ms=NOW()) == 0
    assert client.zscore(q.key("completed"), second) is not None  # kept: removeOnComplete false
    assert client.hget(q.key(second), "returnvalue") == '{"a":1}'
    assert q.fetch("tok-3", 5000, "w1", NOW()) is None


def test_a_lapsed_lock_stalls_back_to_wait_then_fails_and_is_bridged(client: Any) -> None:
    transport = RedisTransport(redis_url() or "", prefix=client.test_prefix, lock_duration=0.2,
                               stalled_interval=0.05, max_stalled_count=1, client=client)
    q = BullQueue(client, transport.tasks_queue(f"s{uuid.uuid4().hex[:6]}"))
    job_id = q.add("task", task(3), {"removeOnComplete": True, "removeOnFail": {"age": 86400}}, NOW())
    for stall in (1, 2):
        assert q.fetch(f"tok-{stall}", 200, "w1", NOW()) is not None
        assert q.check_stalled(1, 50, NOW()) == []  # marks the active job as a stall candidate
        time.sleep(0.3)  # the lock lapses (the worker "died")
        assert q.extend_lock(job_id, f"tok-{stall}", 200) is False
        assert q.check_stalled(1, 50, NOW()) == [job_id]
        assert client.lrange(q.key("wait"), 0, -1) == [job_id]
        assert client.hget(q.key(job_id), "stc") == str(stall)
        time.sleep(0.06)  # the stalled-check mutex lapses
    assert client.hget(q.key(job_id), "defa") == "job stalled more than allowable limit"
    # The next fetch fails the job instead of running it, and bridges a retryable failure.
    transport._queues, transport._results = [q], BullQueue(client, transport.results_queue)
    transport._worker = object()  # type: ignore[assignment]  # claim() only needs an instance id
    job = q.fetch("tok-3", 200, "w1", NOW())
    assert job is not None and transport._delivery(job) is None
    assert client.zscore(q.key("failed"), job_id) is not None  # kept a day: removeOnFail {age}
    results = BullQueue(client, transport.results_queue)
    result_job = results.fetch("tok-r", 1000, "engine", NOW())
    assert result_job is not None and result_job.name == "result"
    assert result_job.data == {"runId": "r1", "seq": 3, "stepId": "r1:3", "status": "failed",
                               "error": {"message": "remote step worker failed: job stalled more than allowable "
                                                    "limit", "retryable": True}}


def test_a_held_lock_is_never_stalled(client: Any) -> None:
    q = queue(client, "tasks")
    job_id = q.add("task", task(), {"removeOnComplete": True}, NOW())
    assert q.fetch("tok", 200, "w1", NOW()) is not None
    for _ in range(4):
        assert q.check_stalled(1, 10, NOW()) == []
        assert q.extend_lock(job_id, "tok", 200) is True
        time.sleep(0.1)
    assert client.lrange(q.key("active"), 0, -1) == [job_id]


def test_release_hands_the_job_back_first_in_line(client: Any) -> None:
    q = queue(client, "tasks")
    held = q.add("task", task(0), {"removeOnComplete": True}, NOW())
    later = q.add("task", task(1), {"removeOnComplete": True}, NOW())
    assert q.fetch("tok", 30000, "w1", NOW()) is not None
    assert q.release(held, "other") is False
    assert q.release(held, "tok") is True
    assert not client.exists(q.key(f"{held}:lock"))
    nxt = q.fetch("tok2", 30000, "w2", NOW())
    assert nxt is not None and nxt.id == held  # ahead of `later`
    assert later != held


def test_a_paused_queue_hands_out_nothing(client: Any) -> None:
    q = queue(client, "tasks")
    client.hset(q.key("meta"), "paused", 1)
    q.add("task", task(), {"removeOnComplete": True}, NOW())
    assert client.llen(q.key("paused")) == 1 and client.llen(q.key("wait")) == 0
    assert q.fetch("tok", 1000, "w1", NOW()) is None


def test_the_worker_in_process_reports_ready_and_stops_clean(client: Any) -> None:
    """NestjsWorker.run() in a thread: ready/live through status() and the health registry, then a warm stop."""
    import threading

    from sync_worker import health
    from sync_worker.nestjs import NestjsWorker, StepWorker
    from sync_worker.runtime.status import WorkerState

    steps = StepWorker()
    steps.register("probe.echo", lambda data: data)
    transport = RedisTransport(redis_url() or "", prefix=client.test_prefix)
    worker = NestjsWorker(steps, transport, concurrency=2, pool="threads", idle_wait=0.2)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 10
    while worker.state is not WorkerState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # one claim round, so the fetcher has a success on record
    status = worker.status()
    assert (status.ready, status.ready_reason, status.live) == (True, "ready", True), status
    assert status.concurrency is not None and status.concurrency.limit == 2
    assert health.probe("ready")[0] == 200
    key = f"{client.test_prefix}-worker-heartbeat:probe.echo:{worker.instance_id}"
    assert json.loads(client.get(key))["status"]["concurrency"]["limit"] == 2
    worker.stop()
    runner.join(10)
    assert worker.state is WorkerState.STOPPED and not client.exists(key)
    assert worker not in health.running_workers()  # type: ignore[comparison-overlap]


def test_the_memory_gate_is_asked_before_a_job_is_claimed(client: Any) -> None:
    """Adaptive slots: a job the gate will not admit stays in BullMQ's wait list for another replica."""
    import threading

    from sync_worker.nestjs import NestjsWorker, StepWorker
    from sync_worker.runtime.admission import MemoryProbe

    usage = {"bytes": 100}
    probe = MemoryProbe(usage_reader=lambda: usage["bytes"], limit_reader=lambda: 1000)
    release = {name: threading.Event() for name in "abc"}
    running: list = []

    steps = StepWorker()

    @steps.step("mem.big")
    def big(data: Any) -> Any:
        running.append(data["k"])
        release[data["k"]].wait(20)
        return data["k"]

    transport = RedisTransport(redis_url() or "", prefix=client.test_prefix)
    worker = NestjsWorker(steps, transport, concurrency={"min": 4, "max": 4}, pool="threads", idle_wait=0.2,
                          memory_probe=probe)
    q = BullQueue(client, transport.tasks_queue("mem.big"))
    for seq, k in enumerate("abc"):
        q.add("task", json.dumps({"runId": "m", "seq": seq, "stepId": f"m:{seq}", "name": "mem.big",
                                  "input": {"k": k}, "attempt": 1}), {"removeOnComplete": True}, NOW())
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()

    def until(predicate: Any, what: str) -> None:
        deadline = time.monotonic() + 10
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {worker.status().concurrency}"
            time.sleep(0.02)

    try:
        until(lambda: running == ["a"], "a to run")
        time.sleep(0.8)  # several admission polls: the first step of a process runs alone
        assert running == ["a"] and client.llen(q.key("wait")) == 2
        usage["bytes"] = 800  # 80%: above ramAdmitPct (75%) ...
        release["a"].set()  # ... but with nothing in flight the gate always admits: b runs
        until(lambda: running == ["a", "b"], "b to run")
        time.sleep(0.8)  # with b in flight, c is deferred
        status = worker.status().concurrency
        assert status is not None and status.gate == "deferring" and status.waiting == 1, status
        assert running == ["a", "b"] and client.llen(q.key("wait")) == 1  # c was never claimed
        usage["bytes"] = 300
        release["b"].set()
        until(lambda: running == ["a", "b", "c"], "c to run once memory is back")
        release["c"].set()
    finally:
        for event in release.values():
            event.set()
        worker.stop()
        runner.join(10)
    results = BullQueue(client, transport.results_queue)
    outputs = sorted(job.data["output"] for job in iter(lambda: results.fetch("t", 1000, "e", NOW()), None))
    assert outputs == ["a", "b", "c"]
