"""Warm and cold stops of ``sync-worker nestjs`` from real signals, and bad tasks on the queue,
on threads, gevent and the prefork pool (the signals go to the pool's parent).

Over Redis with the real engine: a warm stop (SIGTERM) lets the running step finish and deliver
its result, then withdraws the worker's liveness keys; a cold stop (SIGTERM twice) exits at once and
hands the unfinished job straight back, so a new worker runs it long before its 30 s lock lapses.
A job that is not a step task is failed and the worker carries on.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest

from ._nestjs_harness import Engine, StepWorkerProcess, flush_redis_prefix, missing, redis_url, wait_for_file

pytestmark = [pytest.mark.timeout(180)]

_reason = missing("redis")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(params=["threads", "gevent", "prefork"])
def setup(request: Any, tmp_path: Path) -> Iterator[Tuple[Engine, StepWorkerProcess, Path, str]]:
    url = redis_url()
    assert url is not None
    prefix = f"swnj-stop{request.param[:3]}{os.getpid()}"
    flush_redis_prefix(url, prefix)
    worker = StepWorkerProcess(request.param, url, prefix, lease=30.0, log_dir=tmp_path,
                               extra=["--stalled-interval", "30"]).start()
    engine = Engine("redis", prefix, url=url)
    yield engine, worker, tmp_path, prefix
    worker.stop()
    engine.close()
    flush_redis_prefix(url, prefix)


def test_warm_stop_finishes_the_running_step(setup: Tuple[Engine, StepWorkerProcess, Path, str]) -> None:
    import redis

    engine, worker, workdir, prefix = setup
    run_id = f"warm-{uuid.uuid4().hex[:8]}"
    engine.call("start", runId=run_id, step="payments.slow-ok", input={"dir": str(workdir), "seconds": 2})
    assert wait_for_file(workdir / "slow-ok.starts", 20), worker.log()[-2000:]
    assert worker.proc is not None
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(30) == 0, worker.log()[-3000:]
    result = engine.call("wait", runId=run_id, timeoutMs=10000, timeout=20)
    assert result["status"] == "completed" and result["output"] == {"done": True}
    client = redis.Redis.from_url(redis_url() or "", decode_responses=True)
    assert list(client.scan_iter(match=f"{prefix}-worker-*")) == []  # liveness withdrawn at once
    client.close()
    assert "draining 1 task(s)" in worker.log()
    if worker.kind == "prefork":  # four step processes under the parent, each its own worker instance
        assert "prefork pool of 4 step process(es)" in worker.log()
        assert worker.log().count("prefork child a") >= 4 and "exited with code 0" in worker.log()


def test_cold_stop_hands_the_step_back(setup: Tuple[Engine, StepWorkerProcess, Path, str]) -> None:
    engine, worker, workdir, _prefix = setup
    run_id = f"cold-{uuid.uuid4().hex[:8]}"
    engine.call("start", runId=run_id, step="payments.slow", input={"dir": str(workdir), "seconds": 120})
    assert wait_for_file(workdir / "slow.running", 20), worker.log()[-2000:]
    assert worker.proc is not None
    worker.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(20) == 4, worker.log()[-3000:]  # EXIT_COLD_STOP
    started = time.monotonic()
    worker.start()
    result = engine.call("wait", runId=run_id, timeoutMs=20000, timeout=30)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"done": True, "starts": 2}
    assert time.monotonic() - started < 15  # not the 30 s lock: the job was handed back


def test_a_job_that_is_not_a_step_task_is_failed_and_the_worker_goes_on(
        setup: Tuple[Engine, StepWorkerProcess, Path, str]) -> None:
    import redis

    from sync_worker.nestjs.bullmq import BullQueue

    engine, worker, _workdir, prefix = setup
    client = redis.Redis.from_url(redis_url() or "", decode_responses=True)
    q = BullQueue(client, f"{prefix}-tasks-payments.charge-card")
    bad = [q.add("task", "not json at all", {"removeOnFail": {"age": 3600}}, int(time.time() * 1000)),
           q.add("task", json.dumps({"hello": "world"}), {"removeOnFail": {"age": 3600}}, int(time.time() * 1000))]
    result = engine.run(f"after-{uuid.uuid4().hex[:6]}", "payments.charge-card", {"amount": 5})
    assert result["status"] == "completed" and result["output"] == {"chargeId": "ch_5"}
    for job_id in bad:
        assert client.zscore(q.key("failed"), job_id) is not None
        assert client.hget(q.key(job_id), "failedReason") == "not a nestjs-durable step task"
    client.close()
    assert worker.proc is not None and worker.proc.poll() is None
