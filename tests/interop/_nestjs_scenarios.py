"""The four engine scenarios, run the same way against any step worker process (ours or the control).

Each returns :func:`record` of what the engine stored, after asserting what the scenario promises.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Dict

from ._nestjs_harness import Engine, StepWorkerProcess, record, wait_for_file


def _run_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


def success(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    result = engine.run(_run_id("ok"), "payments.charge-card", {"amount": 99})
    got = record(result)
    assert got["run_status"] == "completed", (result, worker.log()[-2000:])
    assert got["output"] == {"chargeId": "ch_99"}
    assert got["attempts"] == 1
    return got


def fatal(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    result = engine.run(_run_id("fatal"), "payments.declined", {"amount": 7, "dir": str(workdir)}, retries=3)
    got = record(result)
    assert got["run_status"] == "failed", (result, worker.log()[-2000:])
    assert got["step_status"] == "failed" and got["attempts"] == 1
    assert (workdir / "declined.starts").read_text().count("\n") == 1  # no retry, although 3 were allowed
    assert got["error"]["message"] == "card declined" and got["error"]["retryable"] is False
    return got


def retry(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    result = engine.run(_run_id("retry"), "payments.flaky", {"dir": str(workdir)}, retries=3, backoff=100)
    got = record(result)
    assert got["run_status"] == "completed", (result, worker.log()[-2000:])
    assert got["attempts"] == 2 and got["output"] == {"chargeId": "ch_retry", "starts": 2}
    return got


def killed(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """SIGKILL the worker while the step runs; a new worker process re-runs it and the run completes."""
    run_id = _run_id("kill")
    engine.call("start", runId=run_id, step=engine.step_name("payments.slow"),
                input={"dir": str(workdir), "seconds": 120})
    assert wait_for_file(workdir / "slow.running", 30), worker.log()[-2000:]
    worker.kill()
    worker.start()
    result = engine.call("wait", runId=run_id, timeoutMs=45000, timeout=60)
    got = record(result)
    assert got["run_status"] == "completed", (result, worker.log()[-3000:])
    assert got["output"] == {"done": True, "starts": 2}  # the step ran again, once
    return got


SCENARIOS = {"success": success, "fatal": fatal, "retry": retry, "killed": killed}
