"""Broker trouble: a private redis-server is stopped under a running worker and started again.

The worker does not start without its broker (fail fast); once running it survives an outage:
``status()`` turns not-ready (the claim role failing, with back-off) but stays live, and when Redis
is back it claims and runs steps again without a restart.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

redis = pytest.importorskip("redis")

from sync_worker.nestjs import NestjsWorker, RedisTransport, StepWorker  # noqa: E402
from sync_worker.nestjs.bullmq import BullQueue  # noqa: E402
from sync_worker.runtime.status import WorkerState  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (scripts/services.sh installs it)", allow_module_level=True)


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Any = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    private = PrivateRedis(tmp_path)
    yield private
    private.stop()


def _steps() -> StepWorker:
    steps = StepWorker()
    steps.register("outage.echo", lambda data: data)
    return steps


def _task(seq: int) -> str:
    return json.dumps({"runId": "o", "seq": seq, "stepId": f"o:{seq}", "name": "outage.echo", "input": seq,
                       "attempt": 1})


def test_no_broker_no_start(server: PrivateRedis) -> None:
    worker = NestjsWorker(_steps(), RedisTransport(server.url), pool="threads")
    with pytest.raises(redis.ConnectionError):
        worker.run()
    assert worker.state is WorkerState.FAILED
    assert not worker.status().live


def test_the_worker_rides_out_a_redis_outage(server: PrivateRedis) -> None:
    server.start()
    transport = RedisTransport(server.url, prefix="outage")
    worker = NestjsWorker(_steps(), transport, concurrency=2, pool="threads", idle_wait=0.2)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()

    def until(predicate: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {worker.status()}"
            time.sleep(0.05)

    try:
        until(lambda: worker.status().ready, "ready")
        server.stop()
        until(lambda: not worker.status().ready, "not ready during the outage")
        status = worker.status()
        assert status.live and status.state is WorkerState.RUNNING, status
        assert status.ready_reason == "last_exchange_failed:step", status
        time.sleep(2.0)  # a few failed claims, backing off (1 s doubling)
        assert worker.status().role("step").consecutive_failures >= 2  # type: ignore[union-attr]
        server.start()  # same port, empty: the worker reconnects by itself
        until(lambda: worker.status().ready, "ready again")
        client = redis.Redis.from_url(server.url, decode_responses=True)
        BullQueue(client, transport.tasks_queue("outage.echo")).add("task", _task(1), {"removeOnComplete": True},
                                                                      int(time.time() * 1000))
        results = BullQueue(client, transport.results_queue)
        until(lambda: client.llen(results.key("wait")) == 1, "the step's result")
        job = results.fetch("t", 1000, "engine", int(time.time() * 1000))
        assert job is not None and job.data["status"] == "completed" and job.data["output"] == 1
        client.close()
    finally:
        worker.stop()
        runner.join(15)
    assert worker.state is WorkerState.STOPPED
