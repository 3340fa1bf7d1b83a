"""Repeated activity reports and polls get their first answer (issue 29's leaner store).

A completion's receipt lives in the execution's row, a failure's in ``kv``, a poll's lease in the
engine's memory; these tests pin what the worker sees either way: a retried report is answered with
the first report's receipt and records nothing twice, a report of the other kind on a closed attempt
is refused, and a retried poll is handed the lease it obtained.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Dict, Iterator

import pytest

from sync_worker.devserver import DevServer
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.update_validation import declared_contract
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer() as server:
        yield Raw(server.url)


def _start(raw: Raw, activity_id: str, **extra: Any) -> Dict[str, Any]:
    return dict(raw.ok("POST", "/activities", {"activity_id": activity_id, "activity_type": "a", "task_queue": "q",
                                                "input": envelope([]), **extra}))


def _poll(raw: Raw, worker_id: str = "w1", **extra: Any) -> Any:
    return raw.poll(kind="activity", worker_id=worker_id, **extra)


def _report(raw: Raw, task: Dict[str, Any], operation: str, body: Dict[str, Any]) -> Any:
    return raw.call("POST", f"/worker/activity-tasks/{task['task_id']}/{operation}",
                    {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": task["lease_owner"], **body},
                    plane="worker")


def _types(raw: Raw, activity_id: str) -> Any:
    return raw.types(activity_id)


def test_a_repeated_completion_gets_the_first_receipt_and_records_nothing_more(raw: Raw) -> None:
    _start(raw, "act-1")
    task = _poll(raw)
    first = _report(raw, task, "complete", {"result": envelope(1)})
    assert first.status_code == 200 and first.json()["outcome"] == "completed"
    events = _types(raw, "act-1")
    again = _report(raw, task, "complete", {"result": envelope(1)})
    assert (again.status_code, again.json()) == (200, first.json())
    assert _types(raw, "act-1") == events and events.count("ActivityCompleted") == 1
    refused = _report(raw, task, "fail", {"failure": {"message": "late", "type": "E"}})
    assert (refused.status_code, refused.json()["reason"]) == (409, "activity_attempt_closed")
    other = raw.call("POST", f"/worker/activity-tasks/{task['task_id']}/complete",
                     {"activity_attempt_id": "attempt-other", "lease_owner": task["lease_owner"],
                      "result": envelope(1)}, plane="worker")
    assert (other.status_code, other.json()["reason"]) == (409, "activity_attempt_mismatch")


def test_a_repeated_failure_keeps_its_receipt_after_the_retry_is_leased(raw: Raw) -> None:
    _start(raw, "act-1", retry_policy={"max_attempts": 3, "backoff_seconds": [0]})
    task = _poll(raw)
    first = _report(raw, task, "fail", {"failure": {"message": "boom", "type": "E"}})
    assert first.status_code == 200 and first.json()["outcome"] == "retrying"
    retry = _poll(raw, timeout=5)
    assert retry is not None and retry["task_id"] != task["task_id"] and retry["attempt_number"] == 2
    again = _report(raw, task, "fail", {"failure": {"message": "boom", "type": "E"}})
    assert (again.status_code, again.json()) == (200, first.json())
    refused = _report(raw, task, "complete", {"result": envelope(1)})
    assert (refused.status_code, refused.json()["reason"]) == (409, "activity_attempt_closed")
    assert _types(raw, "act-1").count("ActivityRetryScheduled") == 1
    assert _report(raw, retry, "complete", {"result": envelope(2)}).json()["outcome"] == "completed"


def test_stale_reports_are_refused_as_before(raw: Raw) -> None:
    _start(raw, "act-1")
    task = _poll(raw)
    missing = raw.call("POST", "/worker/activity-tasks/at-missing/complete",
                       {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w1",
                        "result": envelope(1)}, plane="worker")
    assert (missing.status_code, missing.json()["reason"]) == (404, "task_not_found")
    foreign = raw.call("POST", f"/worker/activity-tasks/{task['task_id']}/complete",
                       {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w2",
                        "result": envelope(1)}, plane="worker")
    assert (foreign.status_code, foreign.json()["reason"]) == (409, "lease_owner_mismatch")
    assert _report(raw, task, "complete", {"result": envelope(1)}).status_code == 200


def test_a_retried_activity_poll_gets_the_lease_it_obtained(raw: Raw) -> None:
    _start(raw, "act-1")
    _start(raw, "act-2")
    first = _poll(raw, poll_request_id="activity-poll-1")
    again = _poll(raw, poll_request_id="activity-poll-1")
    assert (again["task_id"], again["activity_attempt_id"]) == (first["task_id"], first["activity_attempt_id"])
    other = _poll(raw, worker_id="w2", poll_request_id="activity-poll-1")  # another worker's poll: new work
    assert other is not None and other["task_id"] != first["task_id"]
    assert _report(raw, first, "complete", {"result": envelope(1)}).status_code == 200
    assert _poll(raw, timeout=0, poll_request_id="activity-poll-1") is None  # the lease is closed


def test_an_older_workers_table_gains_its_task_queue_column(tmp_path: Any) -> None:
    """A file written before ``workers.task_queue`` was a column: opened, the column is added and filled."""
    path = os.path.join(str(tmp_path), "old.sqlite")
    engine = Engine(Config(), path)
    with engine.tx():
        engine.store.put("workers", {"key": "default\0w1", "namespace": "default", "worker_id": "w1",
                                     "task_queue": "q", "status": "active", "last_seen_at": engine.now(),
                                     "supported_workflow_types": ["t"],
                                     "workflow_command_contracts": {"t": {"signals": ["go"]}}})
    engine.store.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE workers DROP COLUMN task_queue")
    conn.commit()
    conn.close()
    reopened = Engine(Config(), path)
    try:
        with reopened.tx():
            assert declared_contract(reopened, "default", "q", "t")["declared_signals"] == ["go"]
            assert declared_contract(reopened, "default", "other", "t") == {}
        column = reopened.store._conn.execute("SELECT task_queue FROM workers").fetchall()
        assert column == [("q",)]
    finally:
        reopened.store.close()
