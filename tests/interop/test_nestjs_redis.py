"""The real nestjs-durable engine (BullMQ transport 0.19.0) runs steps served by our worker.

Our worker runs as ``sync-worker nestjs`` processes, one on threads and one under gevent; the
published asyncio ``durable-worker`` 0.26.1 serves the same steps as the control. Every scenario
runs against all three, each with its own engine and key prefix on the shared Redis, and the last
test compares what the engine recorded for ours against the control.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from ._nestjs_harness import Engine, Fleet, StepWorkerProcess, flush_redis_prefix, missing, redis_url, wait_for_file
from ._nestjs_scenarios import SCENARIOS

pytestmark = [pytest.mark.timeout(300)]

KINDS = ("threads", "gevent", "control")

_reason = missing("redis")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    url = redis_url()
    assert url is not None
    fleet = Fleet("redis", url, tmp_path_factory.mktemp("nestjs-redis"))
    yield fleet
    fleet.close()



@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_engine_runs_the_step(fleet: Fleet, kind: str, scenario: str) -> None:
    engine, worker = fleet.member(kind)
    fleet.records[(kind, scenario)] = SCENARIOS[scenario](engine, worker, fleet.workdir(kind, scenario))


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_engine_sees_the_worker_heartbeat_and_descriptor(fleet: Fleet, kind: str) -> None:
    import redis

    engine, worker = fleet.get(kind)
    seen = engine.call("workers", group="payments.charge-card")
    assert "payments.charge-card" in seen["groups"] and "payments.slow" in seen["groups"]
    # A worker SIGKILLed by the kill scenario stays listed until its key's TTL lapses: pick ours by pid.
    assert worker.proc is not None
    ours = [w for w in seen["live"] if w["instanceId"].endswith(f"-{worker.proc.pid}")]
    assert len(ours) == 1, seen
    assert ours[0]["status"]["runtime"] == "python"
    assert ours[0]["status"]["concurrency"] == {"mode": "fixed", "limit": 4, "min": 4, "max": 4}
    assert "gate" not in ours[0]["status"]["memory"]  # a fixed N is never gated (the SDK omits it too)
    assert ours[0]["status"]["memory"]["source"] != "unavailable"
    index = [d["instanceId"] for d in seen["descriptors"]].index(ours[0]["instanceId"])
    descriptor = seen["descriptors"][index]
    assert descriptor["steps"] == sorted(descriptor["steps"]) and "payments.charge-card" in descriptor["steps"]
    assert seen["negotiation"][index] == "compatible"
    assert seen["routing"]["status"] == "routable", seen["routing"]
    client = redis.Redis.from_url(fleet.url, decode_responses=True)
    key = f"{worker.prefix}-worker-heartbeat:payments.charge-card:{ours[0]['instanceId']}"
    beat = json.loads(client.get(key))
    assert beat["descriptorHash"] == seen["hashes"][index]  # our FNV hash equals the engine's
    assert 0 < client.ttl(key) <= 35
    client.close()


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_engine_cancel_reaches_the_running_step(fleet: Fleet, kind: str) -> None:
    engine, worker = fleet.get(kind)
    workdir = fleet.workdir(kind, "cancel")
    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    engine.call("start", runId=run_id, step="payments.cancellable", input={"dir": str(workdir)})
    assert wait_for_file(workdir / "cancellable.running", 20), worker.log()[-2000:]
    engine.call("cancel", runId=run_id)
    assert wait_for_file(workdir / "cancellable.seen", 20), worker.log()[-2000:]
    seen = json.loads((workdir / "cancellable.seen").read_text())
    assert seen == {"cancelled": True, "runId": run_id, "seq": 0, "stepId": f"{run_id}:0", "attempt": 1,
                    "traceparent": None, "current": True}
    assert engine.call("describe", runId=run_id)["status"] in ("cancelled", "cancelling")


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_a_long_step_keeps_its_lock(fleet: Fleet, kind: str) -> None:
    """A step running for 3 lock durations is not redelivered: the keeper renews its BullMQ lock."""
    engine, worker = fleet.get(kind)
    workdir = fleet.workdir(kind, "long")
    result = engine.run(f"long-{kind}-{uuid.uuid4().hex[:6]}", "payments.slow-ok",
                        {"dir": str(workdir), "seconds": 3 * fleet.lease}, timeout=60)
    assert result["status"] == "completed", (result, worker.log()[-2000:])
    assert (workdir / "slow-ok.starts").read_text().count("\n") == 1


def test_engine_records_match_the_control(fleet: Fleet) -> None:
    fleet.assert_matches_control(SCENARIOS)




@pytest.mark.parametrize("pool", ("threads", "gevent"))
def test_adaptive_slots_behind_the_memory_gate(tmp_path: Path, pool: str) -> None:
    """``-c adaptive``: steps run behind the admission gate; its figures ride the worker heartbeat."""
    import redis

    url = redis_url()
    assert url is not None
    prefix = f"swnj-ada{pool[:3]}{os.getpid()}"
    flush_redis_prefix(url, prefix)
    worker = StepWorkerProcess(pool, url, prefix, lease=5.0, log_dir=tmp_path, concurrency="adaptive").start()
    engine = Engine("redis", prefix, url=url)
    try:
        engine.call("startMany", prefix=f"ada-{pool}", count=20, step="bench.echo", input={})
        outcome = engine.call("waitMany", prefix=f"ada-{pool}", count=20, timeoutMs=60000)
        assert outcome["completed"] == 20, (outcome, worker.log()[-2000:])
        client = redis.Redis.from_url(url, decode_responses=True)
        assert worker.proc is not None
        key = f"{prefix}-worker-heartbeat:bench.echo:py-{socket.gethostname()}-{worker.proc.pid}"
        status = json.loads(client.get(key))["status"]
        client.close()
        assert status["concurrency"]["mode"] == "adaptive" and status["concurrency"]["max"] == 32
        assert status["memory"]["gate"] in ("open", "deferring")
        assert status["memory"]["source"] != "unavailable"
        assert "step slots are adaptive (1..32)" in worker.log()
    finally:
        assert worker.stop() == 0, worker.log()[-2000:]
        engine.close()
        flush_redis_prefix(url, prefix)
