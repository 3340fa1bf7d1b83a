"""A workflow task completion's receipt lives in the task's row (a completed task is final).

A repeated completion is answered with the first receipt and records nothing more, in the same
server and after a restart; a failure report on a completed attempt is refused as before; a
completion's receipt an older dev server kept in ``kv`` still answers; a completion writes no
``kv`` row (a failure's receipt stays there: its task is leased again under the next attempt).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import control, tasks
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.util import ApiError
from sync_worker.payloads import envelope


@pytest.fixture
def path(tmp_path: Any) -> str:
    return os.path.join(str(tmp_path), "receipts.sqlite")


@pytest.fixture
def engine(path: str) -> Iterator[Engine]:
    opened = Engine(Config(), path)
    with opened.tx():
        control.start_workflow(opened, "default", {"workflow_id": "wf-1", "workflow_type": "t", "task_queue": "q",
                                                   "input": envelope([])})
    yield opened
    opened.store.close()


def _claim(engine: Engine) -> Dict[str, Any]:
    with engine.tx():
        task = tasks.claim(engine, "default", "q", "w1", 500)
    assert task is not None
    return task


def _complete(engine: Engine, task: Dict[str, Any], commands: List[Dict[str, Any]]) -> Dict[str, Any]:
    with engine.tx():
        return tasks.complete(engine, "default", task["task_id"], {
            "lease_owner": "w1", "workflow_task_attempt": task["workflow_task_attempt"], "commands": commands})


def _done(result: Any = 1) -> List[Dict[str, Any]]:
    return [{"type": "complete_workflow", "result": envelope(result)}]


def _history(engine: Engine, task: Dict[str, Any]) -> List[str]:
    with engine.tx():
        return [e["event_type"] for e in engine.history(task["run_id"])]


def _kv_rows(engine: Engine) -> int:
    with engine.tx():
        return engine.store.count("kv", "kind = 'wft'")


def test_a_repeated_completion_gets_the_first_receipt_and_records_nothing_more(engine: Engine) -> None:
    task = _claim(engine)
    first = _complete(engine, task, _done())
    assert first == {"task_id": task["task_id"], "workflow_task_attempt": 1, "outcome": "completed",
                     "run_status": "completed", "run_id": task["run_id"]}
    events = _history(engine, task)
    assert _complete(engine, task, _done(2)) == first
    assert _history(engine, task) == events and events.count("WorkflowCompleted") == 1
    assert _kv_rows(engine) == 0
    with pytest.raises(ApiError) as refused, engine.tx():
        tasks.fail(engine, "default", task["task_id"], {"lease_owner": "w1", "workflow_task_attempt": 1,
                                                        "failure": {"message": "late", "type": "E"}})
    assert refused.value.status == 409 and refused.value.body()["reason"] == "task_not_leased"


def test_the_receipt_survives_a_restart(path: str) -> None:
    engine = Engine(Config(), path)
    with engine.tx():
        control.start_workflow(engine, "default", {"workflow_id": "wf-1", "workflow_type": "t", "task_queue": "q",
                                                   "input": envelope([])})
    task = _claim(engine)
    first = _complete(engine, task, [{"type": "start_timer", "delay_seconds": 60}])  # the run waits
    assert first["run_status"] == "waiting"
    engine.store.close()
    reopened = Engine(Config(), path)  # nothing of the task in memory: its row answers
    try:
        assert _complete(reopened, task, _done()) == first
        assert "WorkflowCompleted" not in _history(reopened, task)
    finally:
        reopened.store.close()


def test_a_receipt_an_older_dev_server_kept_in_kv_still_answers(engine: Engine) -> None:
    task = _claim(engine)
    first = _complete(engine, task, _done())
    with engine.tx():  # the row as an older dev server left it, the receipt in kv
        row = engine.store.get("wf_tasks", task["task_id"])
        assert row is not None and row["closed_by"]["receipt"] == first
        del row["closed_by"]
        engine.store.put("wf_tasks", row)
        engine.store.put("kv", {"key": f"default\0wft\0{task['task_id']}:1", "namespace": "default", "kind": "wft",
                                "operation": "complete", "receipt": first})
    assert _complete(engine, task, _done()) == first


def test_a_failure_keeps_its_receipt_in_kv_after_the_task_is_leased_again(engine: Engine) -> None:
    task = _claim(engine)
    body = {"lease_owner": "w1", "workflow_task_attempt": 1, "failure": {"message": "boom", "type": "E"}}
    with engine.tx():
        first = tasks.fail(engine, "default", task["task_id"], body)
    assert first["outcome"] == "failed" and _kv_rows(engine) == 1
    with engine.tx():  # the retry's backoff, skipped
        row = engine.store.get("wf_tasks", task["task_id"])
        assert row is not None
        tasks.requeue(engine, {**row, "attempt": 1})
    retry = _claim(engine)
    assert retry["task_id"] == task["task_id"] and retry["workflow_task_attempt"] == 2
    with engine.tx():  # answered from kv (the stored receipt: task, attempt, outcome)
        again = tasks.fail(engine, "default", task["task_id"], body)
    assert again == {"task_id": task["task_id"], "workflow_task_attempt": 1, "outcome": "failed"}
    assert _complete(engine, retry, _done())["workflow_task_attempt"] == 2


@pytest.mark.parametrize("closing", [
    _done(),
    [{"type": "fail_workflow", "message": "boom"}],
    [{"type": "continue_as_new", "arguments": envelope([])}],
])
def test_a_closing_completion_writes_its_task_once_and_done(engine: Engine, closing: List[Dict[str, Any]]) -> None:
    """The run closes under the completing task: its row goes straight to ``done`` (no ``cancelled`` write first)."""
    task = _claim(engine)
    writes: List[str] = []
    engine.store._conn.set_trace_callback(writes.append)
    try:
        _complete(engine, task, closing)
    finally:
        engine.store._conn.set_trace_callback(None)
    task_writes = [sql for sql in writes if sql.startswith("UPDATE wf_tasks")]
    assert len(task_writes) == 1 and "state = 'done'" in task_writes[0], task_writes
    with engine.tx():
        row = engine.store.get("wf_tasks", task["task_id"])
        run = engine.get_run(task["run_id"])
    assert row is not None and run is not None
    assert (row["state"], row["due_at"], row["closed_by"]["operation"]) == ("done", None, "complete")
    assert run["task_id"] is None and run["status"] in ("completed", "failed", "continued")
