"""Sentry with the Celery facade: a project that runs ``sentry_sdk.init(dsn=...)`` and swapped its
Celery import keeps its error reports. The facade's workers turn the reporting on as they are built
(as Sentry's Celery integration turns itself on); one event per failed task, none for a task
that failed and then succeeded on a retry, with the task's tags. Events caught by a capturing
transport; the sample app on the dev server over real sockets.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest

from tests.e2e._sentry_support import CapturingTransport, sentry_capturing

from ._support import pool, wait_for


@pytest.fixture
def sentry_and_worker(sample_app: Any) -> Iterator[CapturingTransport]:
    from sync_worker_celery.worker import WorkerGroup

    with sentry_capturing() as transport:  # no SyncWorkerIntegration named: the shop's existing init
        group = WorkerGroup(sample_app, sample_app.workers_for(["proj-default"], concurrency=4, pool=pool()))
        group.start()
        assert group.wait_ready(30), f"workers did not start: {group.errors}"
        try:
            yield transport
        finally:
            group.stop()
            group.join(30)


def _about(events: List[Dict[str, Any]], task_id: str) -> List[Dict[str, Any]]:
    return [e for e in events if (e.get("contexts") or {}).get("sync_worker", {}).get("activity_id") == task_id
            or (e.get("tags") or {}).get("workflow.id") == task_id]


def test_a_failed_task_is_one_event_and_a_retried_success_none(sample_app: Any,
                                                               sentry_and_worker: CapturingTransport) -> None:
    from proj.tasks import autoretried, explode

    failed = explode.delay("kaboom")
    with pytest.raises(ValueError, match="kaboom"):
        failed.get(timeout=20)
    recovered = autoretried.delay(1)  # fails once, then succeeds on Celery's autoretry
    recovered.get(timeout=30)
    events = wait_for(lambda: [e for e in sentry_and_worker.events
                               if (e.get("tags") or {}).get("activity.type") == "proj.tasks.explode"], timeout=10)
    assert len(events) == 1
    [event] = events
    assert event["tags"]["task_queue"] == "proj-default" and event["tags"]["activity.attempt"] == "1"
    assert event["exception"]["values"][-1]["type"] == "ValueError"
    assert not [e for e in sentry_and_worker.events
                if (e.get("tags") or {}).get("activity.type") == "proj.tasks.autoretried"]
