"""``sync-worker nestjs tests.interop._nestjs_app:worker [..:workflows]``: our StepWorker with the
interop steps, and our WorkflowWorker with the interop workflows."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict

from sync_worker.nestjs import FatalError, StepContext, StepFailed, StepWorker, WorkflowWorker, current_step

from ._nestjs_steps import install
from ._nestjs_workflows import GROUP
from ._nestjs_workflows import install as install_workflows

worker = StepWorker()
install(worker.step, FatalError)
#: The same steps with dot-free names, for SQS (``payments-charge-card``...).
sqs_worker = StepWorker()
install(sqs_worker.step, FatalError, sep="-")


def cancellable(data: Dict[str, Any], ctx: StepContext) -> Dict[str, Any]:
    """Beats until the engine cancels the run, then says what it saw (ours only: uses the context)."""
    Path(data["dir"], "cancellable.running").write_text(ctx.step_id, encoding="utf-8")
    deadline = time.monotonic() + float(data.get("seconds", 30))
    while not ctx.cancelled and time.monotonic() < deadline:
        ctx.heartbeat_sync()
        time.sleep(0.05)
    seen = {"cancelled": ctx.cancelled, "runId": ctx.run_id, "seq": ctx.seq, "stepId": ctx.step_id,
            "attempt": ctx.attempt, "traceparent": ctx.traceparent, "current": current_step() is ctx}
    Path(data["dir"], "cancellable.seen").write_text(json.dumps(seen), encoding="utf-8")
    ctx.raise_if_cancelled()
    return {"cancelled": False}


def slow_ok(data: Dict[str, Any]) -> Dict[str, Any]:
    """Runs longer than the lease; counts its starts (a second start would mean a double claim)."""
    with open(Path(data["dir"], "slow-ok.starts"), "a", encoding="utf-8") as handle:
        handle.write("1\n")
    time.sleep(float(data["seconds"]))
    return {"done": True}


for _steps, _sep in ((worker, "."), (sqs_worker, "-")):
    _steps.register(f"payments{_sep}cancellable", cancellable)
    _steps.register(f"payments{_sep}slow-ok", slow_ok)


#: Python-authored workflows on the group ``py-workflows`` (``sync-worker nestjs ..._nestjs_app:workflows``).
workflows = WorkflowWorker(group=GROUP)
install_workflows(workflows.workflow, StepFailed)
