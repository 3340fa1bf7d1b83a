"""A sync_worker worker with local external storage, for ``sync-worker run -P gevent`` in
tests/interop/test_sdk_external_storage.py (configured by the environment the test sets)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from sync_worker import Client, LocalFilesystemExternalStorage, Worker, activity, workflow


@activity.defn(name="interop.ext.shout")
def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="interop.ext.flow")
class OurFlow:
    def run(self, ctx: Any, text: str) -> Any:
        loud = yield ctx.schedule_activity("interop.ext.shout", [text])
        return {"arg": hashlib.sha256(text.encode()).hexdigest(), "loud": loud}


def build() -> Worker:
    client = Client(os.environ["EXT_TEST_SERVER_URL"])
    return Worker(client, task_queue=os.environ["EXT_TEST_QUEUE"], workflows=[OurFlow], activities=[shout],
                  poll_timeout=2.0, external_storage=LocalFilesystemExternalStorage(os.environ["EXT_TEST_DIR"]),
                  external_storage_threshold_bytes=int(os.environ["EXT_TEST_THRESHOLD"]))
