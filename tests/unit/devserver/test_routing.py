"""Routing by registered types, over real sockets (the engine's ``DefaultActivityTaskBridge::poll``
and the server's ``WorkflowTaskPoller``): a task goes only to a worker that registered its type; an
empty list gets ``no_*_capability`` at once; a non-matching poll waits out its long poll; the
unsupported task stays ready for a worker that runs it."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30) as server:
        yield Raw(server.url)


def _register(raw: Raw, worker_id: str, workflows: Optional[List[str]] = None,
              activities: Optional[List[str]] = None, queue: str = "q") -> None:
    body: Dict[str, Any] = {"worker_id": worker_id, "task_queue": queue}
    if workflows is not None:
        body["supported_workflow_types"] = workflows
    if activities is not None:
        body["supported_activity_types"] = activities
    raw.ok("POST", "/worker/register", body, plane="worker")


def _poll(raw: Raw, worker_id: str, kind: str = "workflow", timeout: int = 0) -> Dict[str, Any]:
    return dict(raw.ok("POST", f"/worker/{kind}-tasks/poll",
                       {"worker_id": worker_id, "task_queue": "q", "timeout_seconds": timeout}, plane="worker"))


def _activity(raw: Raw, activity_id: str, activity_type: str) -> None:
    raw.ok("POST", "/activities", {"activity_id": activity_id, "activity_type": activity_type, "task_queue": "q",
                                   "input": envelope([activity_id])})


def _queue_ready(raw: Raw) -> Dict[str, int]:
    stats = raw.ok("GET", "/task-queues/q")["stats"]
    return {"workflow": stats["workflow_tasks"]["ready_count"], "activity": stats["activity_tasks"]["ready_count"]}


def test_activity_tasks_go_only_to_workers_that_registered_their_type(raw: Raw) -> None:
    _register(raw, "w-one", workflows=[], activities=["act.one"])
    _register(raw, "w-two", workflows=[], activities=["act.two"])
    _activity(raw, "older", "act.two")  # the oldest ready activity is of the other type
    _activity(raw, "newer", "act.one")
    got = _poll(raw, "w-one", "activity")["task"]
    assert (got["activity_type"], got["workflow_id"]) == ("act.one", "newer")

    started = time.monotonic()
    empty = _poll(raw, "w-one", "activity", timeout=1)  # nothing of its type: a long poll, then empty
    assert empty["task"] is None and empty["poll_status"] == "timeout"
    assert time.monotonic() - started >= 0.9
    assert _queue_ready(raw)["activity"] == 1  # the unsupported task stays ready, unchanged
    assert raw.ok("GET", "/activities/older")["activity_status"] == "scheduled"

    other = _poll(raw, "w-two", "activity")["task"]
    assert (other["activity_type"], other["workflow_id"]) == ("act.two", "older")


def test_a_matching_activity_wakes_a_waiting_poll_and_a_foreign_one_does_not(raw: Raw) -> None:
    _register(raw, "w-one", workflows=[], activities=["act.one"])
    answers: List[Dict[str, Any]] = []
    poller = threading.Thread(target=lambda: answers.append(_poll(raw, "w-one", "activity", timeout=5)))
    poller.start()
    time.sleep(0.3)
    _activity(raw, "foreign", "act.other")
    time.sleep(0.3)
    assert not answers  # woken, found nothing of its type, waits again
    _activity(raw, "mine", "act.one")
    poller.join(10)
    assert answers[0]["task"]["workflow_id"] == "mine"


def test_an_empty_activity_list_gets_no_activity_tasks(raw: Raw) -> None:
    _register(raw, "w-none", workflows=["wf"], activities=[])
    _activity(raw, "a-1", "act.one")
    started = time.monotonic()
    answer = _poll(raw, "w-none", "activity", timeout=5)
    assert (answer["task"], answer["poll_status"]) == (None, "no_activity_capability")
    assert time.monotonic() - started < 2.0  # answered at once, not after the long poll
    assert _queue_ready(raw)["activity"] == 1


def test_workflow_tasks_go_only_to_workers_that_registered_the_run_type(raw: Raw) -> None:
    _register(raw, "w-orders", workflows=["orders"], activities=[])
    _register(raw, "w-billing", workflows=["billing"], activities=[])
    raw.start("wf-billing", workflow_type="billing")  # older, other type
    raw.start("wf-orders", workflow_type="orders")
    task = _poll(raw, "w-orders")["task"]
    assert (task["workflow_id"], task["workflow_type"]) == ("wf-orders", "orders")
    assert _poll(raw, "w-orders", timeout=1)["task"] is None
    assert _queue_ready(raw)["workflow"] == 1
    assert raw.types("wf-billing") == ["StartAccepted", "WorkflowStarted"]
    assert _poll(raw, "w-billing")["task"]["workflow_id"] == "wf-billing"


def test_an_empty_workflow_list_gets_no_workflow_or_query_tasks(raw: Raw) -> None:
    _register(raw, "w-acts", workflows=[], activities=["act.one"])
    raw.start("wf-1")
    for kind in ("workflow", "query"):
        started = time.monotonic()
        answer = _poll(raw, "w-acts", kind, timeout=5)
        assert (answer["task"], answer["poll_status"]) == (None, "no_workflow_capability"), kind
        assert time.monotonic() - started < 2.0
    assert _queue_ready(raw)["workflow"] == 1


def test_update_tasks_are_routed_by_the_run_type(raw: Raw) -> None:
    _register(raw, "w-orders", workflows=["orders"], activities=[])
    _register(raw, "w-billing", workflows=["billing"], activities=[])
    raw.start("wf-b", workflow_type="billing")
    first = _poll(raw, "w-billing")["task"]
    raw.complete(first, [{"type": "open_condition_wait", "condition_key": "k"}])
    raw.ok("POST", "/workflows/wf-b/update/set", {"input": envelope([1]), "wait_for": "accepted"})
    assert _poll(raw, "w-orders", timeout=1)["task"] is None
    task = _poll(raw, "w-billing")["task"]
    assert task["workflow_update_id"] and task["resume_source_kind"] == "workflow_update"


def test_query_tasks_are_routed_by_the_run_type(raw: Raw) -> None:
    _register(raw, "w-orders", workflows=["orders"], activities=[])
    _register(raw, "w-billing", workflows=["billing"], activities=[])
    raw.start("wf-b", workflow_type="billing")
    answers: List[Any] = []
    asker = threading.Thread(target=lambda: answers.append(
        raw.call("POST", "/workflows/wf-b/query/state", {"input": envelope([])})))
    asker.start()
    time.sleep(0.2)
    assert _poll(raw, "w-orders", "query", timeout=1)["task"] is None
    query = _poll(raw, "w-billing", "query", timeout=5)["task"]
    assert query["workflow_type"] == "billing"
    raw.ok("POST", f"/worker/query-tasks/{query['query_task_id']}/complete",
           {"result": envelope("ok"), "lease_owner": query["lease_owner"]}, plane="worker")
    asker.join(10)
    assert answers[0].status_code == 200


def test_workers_that_declared_no_list_and_unregistered_pollers_get_any_type(raw: Raw) -> None:
    raw.ok("POST", "/worker/register", {"worker_id": "w-legacy", "task_queue": "q"}, plane="worker")
    raw.start("wf-1", workflow_type="anything")
    raw.start("wf-2", workflow_type="else")
    assert _poll(raw, "w-legacy")["task"]["workflow_id"] == "wf-1"
    assert _poll(raw, "never-registered")["task"]["workflow_id"] == "wf-2"


def test_a_file_from_an_older_server_gains_the_type_columns() -> None:
    """Tasks stored before the type columns existed are routed after a restart (columns and documents
    filled from the run and the activity row)."""
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "old.sqlite")
    with DevServer(db=path) as server:
        raw = Raw(server.url)
        raw.start("wf-old", workflow_type="orders")
        _activity(raw, "act-old", "act.one")
    conn = sqlite3.connect(path)
    for table, column in (("wf_tasks", "workflow_type"), ("activities", "activity_type")):
        key = "task_id" if table == "wf_tasks" else "execution_id"
        for pk, data in conn.execute(f"SELECT {key}, data FROM {table}").fetchall():
            row = json.loads(data)
            if table == "wf_tasks":
                row.pop(column, None)  # older task documents did not carry it
            conn.execute(f"UPDATE {table} SET data = ? WHERE {key} = ?", (json.dumps(row), pk))
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.commit()
    conn.close()
    with DevServer(db=path) as server:
        raw = Raw(server.url)
        _register(raw, "w-new", workflows=["orders"], activities=["act.one"])
        assert _poll(raw, "w-new")["task"]["workflow_id"] == "wf-old"
        assert _poll(raw, "w-new", "activity")["task"]["workflow_id"] == "act-old"
