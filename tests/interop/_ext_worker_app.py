"""A sync_worker worker for ``sync-worker run -P gevent`` in tests/interop/test_sdk_external_storage.py.

Its client comes from the command's environment (``DURABLE_WORKFLOW_SERVER_URL``,
``SYNC_WORKER_EXTERNAL_STORAGE``, ``SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES``), as any
deployment's would: the external storage is configured there, not in code."""

from __future__ import annotations

import hashlib
from typing import Any

from sync_worker import Client, Worker, activity, workflow


@activity.defn(name="interop.ext.shout")
def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="interop.ext.flow")
class OurFlow:
    def run(self, ctx: Any, text: str) -> Any:
        loud = yield ctx.schedule_activity("interop.ext.shout", [text])
        return {"arg": hashlib.sha256(text.encode()).hexdigest(), "loud": loud}


def build(client: Client, task_queue: str) -> Worker:
    assert client.external_storage is not None, "SYNC_WORKER_EXTERNAL_STORAGE is not set"
    return Worker(client, task_queue=task_queue, workflows=[OurFlow], activities=[shout], poll_timeout=2.0)
