"""A worker handed a task type it does not register says so once per type, and fails the attempt
as retryable (a server that routes by registered types never does this; an older one may)."""

from __future__ import annotations

import logging
from typing import Any, Dict, List

import pytest

from sync_worker import activity
from sync_worker.protocol import parse_task
from sync_worker.runtime.backend import backend_for_pool
from sync_worker.runtime.inflight import InflightTask
from sync_worker.worker.activities import activity_map, run_activity_task


@activity.defn(name="known.one")
def known() -> None:
    return None


class _Client:
    def __init__(self) -> None:
        self.failures: List[Dict[str, Any]] = []

    def fail_activity_task(self, task_id: str, **kwargs: Any) -> Dict[str, Any]:
        self.failures.append(kwargs["failure"])
        return {"outcome": "failed"}


def test_an_unregistered_activity_type_is_logged_once_naming_the_registered_ones(
        caplog: pytest.LogCaptureFixture) -> None:
    client, activities = _Client(), activity_map([known])
    backend = backend_for_pool("threads")
    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    for attempt in (1, 2):
        task = {"task_id": f"t{attempt}", "activity_attempt_id": f"a{attempt}", "activity_type": "missing.one",
                "payload_codec": "avro", "arguments": None, "attempt_number": attempt}
        outcome = run_activity_task(client=client, task=parse_task("activity", task), activities=activities,
                                    worker_id="w", task_queue="q",
                                    inflight=InflightTask(backend, "activity", f"t{attempt}"))
        assert outcome == "no_handler"
    warnings = [r.getMessage() for r in caplog.records if "does not register" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "'missing.one'" in warnings[0] and "['known.one']" in warnings[0]
    assert [f["message"] for f in client.failures] == ["no activity registered for 'missing.one'"] * 2
    assert all(not f.get("non_retryable") for f in client.failures)
