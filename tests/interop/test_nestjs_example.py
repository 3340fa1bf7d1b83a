"""examples/nestjs_steps.py and examples/nestjs_workflows.py, driven by the real engine over Redis."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from ._nestjs_harness import ROOT, Engine, StepWorkerProcess, flush_redis_prefix, missing, record, redis_url

pytestmark = [pytest.mark.timeout(120)]

_reason = missing("redis")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


class _ExampleWorker(StepWorkerProcess):
    def command(self) -> list:  # type: ignore[type-arg]
        cmd = super().command()
        cmd[cmd.index("tests.interop._nestjs_app:worker")] = "examples.nestjs_steps:worker"
        return cmd


def test_the_example_charges_and_declines(tmp_path: Path) -> None:
    assert (ROOT / "examples" / "nestjs_steps.py").exists()
    url = redis_url()
    assert url is not None
    prefix = f"swnj-example{os.getpid()}"
    flush_redis_prefix(url, prefix)
    worker = _ExampleWorker("threads", url, prefix, lease=30.0, log_dir=tmp_path).start()
    engine = Engine("redis", prefix, url=url)
    try:
        charged = record(engine.run("ex-1", "payments.charge-card", {"orderId": "o1", "amountCents": 4200}))
        assert charged["run_status"] == "completed"
        assert charged["output"] == {"chargeId": "ch_o1", "amountCents": 4200}
        receipt = record(engine.run("ex-2", "orders.receipt", {"orderId": "o1"}))
        assert receipt["output"] == {"receiptId": "rc_ex-2:0", "attempt": 1}
        declined = record(engine.run("ex-3", "payments.charge-card", {"orderId": "o2", "card": "4000000000000002"},
                                     retries=3))
        assert declined["run_status"] == "failed" and declined["attempts"] == 1
        assert declined["error"] == {"message": "card declined", "code": "card_declined", "retryable": False,
                                     "details": {"orderId": "o2"}}
    finally:
        assert worker.stop() == 0, worker.log()[-2000:]
        engine.close()
        flush_redis_prefix(url, prefix)


class _WorkflowExample(StepWorkerProcess):
    """examples/nestjs_workflows.py: run as a script (``workflows.run``) on threads, or served by
    ``sync-worker nestjs ... -P gevent``."""

    def command(self) -> list:  # type: ignore[type-arg]
        if self.kind == "threads":
            return [sys.executable, str(ROOT / "examples" / "nestjs_workflows.py"), self.transport_url, self.prefix]
        return [sys.executable, "-m", "sync_worker", "nestjs", "examples.nestjs_workflows:steps",
                "examples.nestjs_workflows:workflows", "--transport", self.transport_url, "--prefix", self.prefix,
                "-P", self.kind]


@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_the_workflow_example_runs_to_its_signal_and_stops_warm(tmp_path: Path, pool: str) -> None:
    import redis

    url = redis_url()
    assert url is not None
    prefix = f"swnj-exwf{pool[:3]}{os.getpid()}"
    flush_redis_prefix(url, prefix)
    worker = _WorkflowExample(pool, url, prefix, lease=30.0, log_dir=tmp_path).start()
    engine = Engine("redis", prefix, url=url)
    try:
        engine.call("remote", workflow="pipeline", group="py-workflows")
        engine.call("serveTsSteps")
        engine.call("startWorkflow", workflow="pipeline", input="b-42", runId="ex-wf-1")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # loaded, rendered, slept: now waiting for the approval
            described = engine.call("describe", runId="ex-wf-1")
            if described["awaiting"] is None and any(cp["name"] == "sleep:4" for cp in described["checkpoints"]):
                time.sleep(1.0)  # the 500 ms timer fires and the turn that waits for the signal runs
                break
            time.sleep(0.1)
        engine.call("signal", token="approve:b-42", payload={"by": "ops"})
        result = engine.call("wait", runId="ex-wf-1", timeoutMs=30000, timeout=40)
        assert result["status"] == "completed", (result, worker.log()[-3000:])
        output = result["output"]
        assert output["rows"] == 300 and output["report"] == {"pages": 6, "by": "typescript"}
        assert output["approval"] == {"by": "ops"} and len(output["batch"]) == 32
        progress = engine.call("progress", runId="ex-wf-1")["events"]
        assert [e["event"]["message"] for e in progress] == ["loaded batch 1", "loaded batch 2", "loaded batch 3"]
        assert progress[0]["name"] == "ingestion.load" and progress[0]["seq"] == 2
    finally:
        code = worker.stop()
        engine.close()
    assert code == 0, worker.log()[-3000:]  # SIGTERM: a warm stop
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        # ours withdrawn (the engine's own TypeScript worker keys, ts-..., only lapse)
        assert list(client.scan_iter(match=f"{prefix}-worker-*:py-*")) == []
    finally:
        client.close()
        flush_redis_prefix(url, prefix)
