"""Author a whole nestjs-durable workflow in Python, driven by the NestJS engine (docs/nestjs.md).

The engine owns the run (state, timers, recovery); this worker replays the workflow function on
every turn and answers with what it did next. The TypeScript side registers the workflow by name
and the group that runs it, and serves its own steps:

    engine.remote('pipeline', { group: 'py-workflows' });
    transport.handle('reports.render', async ({ rows }) => ({ pages: Math.ceil(rows / 50) }));
    await engine.start('pipeline', 'b-42');
    await engine.signal('approve:b-42', { by: 'ops' });

This side serves the workflow and its Python step from one process, either

    python examples/nestjs_workflows.py redis://127.0.0.1:6379/0      (SIGTERM or Ctrl-C stops warm)

or  sync-worker nestjs examples.nestjs_workflows:steps examples.nestjs_workflows:workflows \\
        --transport redis://127.0.0.1:6379/0 -P gevent
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from typing import Any, Dict

from sync_worker.nestjs import StepContext, StepFailed, StepWorker, WorkflowContext, WorkflowWorker

workflows = WorkflowWorker(group="py-workflows")
steps = StepWorker()


@steps.step("ingestion.load")
def load(data: Dict[str, Any], ctx: StepContext) -> int:
    """A blocking step; its progress reaches the engine's subscribers while it runs."""
    rows = 0
    for batch in range(3):
        time.sleep(0.05)  # read a chunk of the file
        rows += 100
        ctx.progress(f"loaded batch {batch + 1}", {"rows": rows})
    return rows


@workflows.workflow("pipeline")
def pipeline(ctx: WorkflowContext, base_id: str) -> Dict[str, Any]:
    started_at = ctx.now()  # epoch ms, the same on every replay
    batch_key = ctx.side_effect(lambda: uuid.uuid4().hex)  # runs once, replayed after
    rows = ctx.step("ingestion.load", {"key": f"/{base_id}/data.csv", "batch": batch_key})  # Python
    try:
        report = ctx.step("reports.render", {"rows": rows})  # a TypeScript step
    except StepFailed as failure:  # the engine's message and code
        report = {"skipped": failure.message, "code": failure.code}
    ctx.sleep(500)  # a durable timer: the engine wakes the run
    approval = ctx.wait_signal(f"approve:{base_id}")  # engine.signal('approve:<id>', payload)
    return {"rows": rows, "report": report, "approval": approval, "batch": batch_key, "startedAt": started_at}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
    prefix = sys.argv[2] if len(sys.argv) > 2 else "durable"
    sys.exit(workflows.run(redis=url, prefix=prefix, steps=steps))
