"""examples/nestjs_steps.py served by ``sync-worker nestjs`` and driven by the real engine over Redis."""

from __future__ import annotations

import os
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
