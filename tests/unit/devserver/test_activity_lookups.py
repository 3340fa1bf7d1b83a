"""An activity's claim and completion on a file another engine wrote, and its receipt after a restart.

The claim reads a run it does not remember in one statement (status, document text, event count)
and notes which execution the attempt belongs to; the completion finds the attempt by that note
(checked against the row) or by the ``task_id`` index, and rebuilds its receipt from the final row
(``closed_by: "complete"``). These tests pin that each path answers what the file holds: after a
restart (no note, no cached text), with a stale note, on a row an older dev server closed (the
receipt stored whole), and across namespaces.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from sync_worker.devserver import activities, control
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.util import ApiError
from sync_worker.payloads import envelope


@pytest.fixture
def path(tmp_path: Any) -> str:
    return os.path.join(str(tmp_path), "lookups.sqlite")


def _queue(path: str, count: int = 1) -> List[str]:
    """``count`` standalone activities queued by an engine that then closes (as another process would)."""
    filler = Engine(Config(), path)
    try:
        with filler.tx():
            return [control.start_activity(filler, "default", {"activity_type": "a", "task_queue": "q",
                                                                "input": envelope([])})["workflow_run_id"]
                    for _ in range(count)]
    finally:
        filler.store.close()


@pytest.fixture
def engine(path: str) -> Iterator[Engine]:
    _queue(path)
    opened = Engine(Config(), path)
    yield opened
    opened.store.close()


def _claim(engine: Engine) -> Dict[str, Any]:
    with engine.tx():
        act = activities.claim(engine, "default", "q", "w1")
    assert act is not None
    return act


def _body(act: Dict[str, Any], result: Any = 1) -> Dict[str, Any]:
    return {"activity_attempt_id": act["attempt_id"], "lease_owner": "w1", "result": envelope(result)}


def _complete(engine: Engine, act: Dict[str, Any], namespace: str = "default") -> Dict[str, Any]:
    with engine.tx():
        return activities.complete(engine, namespace, act["task_id"], _body(act))


def _events(engine: Engine, run_id: str) -> List[Tuple[int, str]]:
    with engine.tx():
        return [(e["sequence"], e["event_type"]) for e in engine.history(run_id)]


def _traced(engine: Engine) -> List[str]:
    statements: List[str] = []
    engine.store._conn.set_trace_callback(statements.append)
    return statements


def test_a_claim_on_a_run_another_engine_created_records_the_next_event_and_keeps_the_run(engine: Engine) -> None:
    statements = _traced(engine)
    act = _claim(engine)
    reads = [s for s in statements if s.startswith("SELECT")]
    assert len(reads) == 2, reads  # the ready activity, then the run's status, text and event count at once
    statements.clear()
    receipt = _complete(engine, act)
    engine.store._conn.set_trace_callback(None)
    assert receipt == {"outcome": "completed", "task_id": act["task_id"], "activity_attempt_id": act["attempt_id"],
                       "reason": None}
    assert not [s for s in statements if s.startswith("SELECT")], statements  # attempt and run came from memory
    assert _events(engine, act["run_id"]) == [(1, "StartAccepted"), (2, "WorkflowStarted"), (3, "ActivityScheduled"),
                                              (4, "ActivityStarted"), (5, "ActivityCompleted"),
                                              (6, "WorkflowCompleted")]
    with engine.tx():
        run = engine.get_run(act["run_id"])
    assert run is not None and run["status"] == "completed" and run["output"] == envelope(1)


def test_a_completion_repeated_after_a_restart_gets_the_first_receipt(path: str) -> None:
    _queue(path)
    engine = Engine(Config(), path)
    act = _claim(engine)
    first = _complete(engine, act)
    events = _events(engine, act["run_id"])
    engine.store.close()
    reopened = Engine(Config(), path)  # no note of the attempt, no cached text: the task_id index finds it
    try:
        assert _complete(reopened, act) == first
        assert _events(reopened, act["run_id"]) == events
        with pytest.raises(ApiError) as refused, reopened.tx():
            activities.fail(reopened, "default", act["task_id"], {**_body(act), "failure": {"message": "late"}})
        assert refused.value.status == 409 and refused.value.body()["reason"] == "activity_attempt_closed"
    finally:
        reopened.store.close()


def test_a_row_an_older_dev_server_closed_keeps_answering_a_repeat(engine: Engine) -> None:
    act = _claim(engine)
    first = _complete(engine, act)
    with engine.tx():
        row = engine.store.get("activities", act["execution_id"])
        assert row is not None and row["closed_by"] == "complete"
        row["closed_by"] = {"key": f"{act['task_id']}:{act['attempt_id']}", "operation": "complete",
                            "receipt": first}  # the receipt as an older dev server stored it
        engine.store.put("activities", row)
    assert _complete(engine, act) == first


def test_a_stale_note_falls_back_to_the_index_and_namespaces_stay_apart(path: str) -> None:
    _queue(path, count=2)
    engine = Engine(Config(), path)
    try:
        one, two = _claim(engine), _claim(engine)
        engine.activity_tasks.note(one["task_id"], two["execution_id"])  # points at another execution
        assert _complete(engine, one)["task_id"] == one["task_id"]
        with engine.tx():
            assert engine.store.get("activities", two["execution_id"])["state"] == "leased"  # type: ignore[index]
        with pytest.raises(ApiError) as missing, engine.tx():
            activities.complete(engine, "other", two["task_id"], _body(two))
        assert missing.value.status == 404
        assert _complete(engine, two)["outcome"] == "completed"
    finally:
        engine.store.close()


def test_a_standalone_start_writes_its_run_once_as_running(path: str) -> None:
    engine = Engine(Config(), path)
    try:
        statements: List[str] = []
        engine.store._conn.set_trace_callback(statements.append)
        with engine.tx():
            started = control.start_activity(engine, "default", {"activity_type": "a", "task_queue": "q",
                                                                 "input": envelope([]), "activity_id": "one"})
        engine.store._conn.set_trace_callback(None)
        run_writes = [s.split("(", 1)[0].split(" SET ", 1)[0] for s in statements
                      if s.startswith(("INSERT OR REPLACE INTO runs", "UPDATE runs"))]
        assert run_writes == ["INSERT OR REPLACE INTO runs "]
        assert started["status"] == "running"
        run = engine.store.get("runs", started["workflow_run_id"])
        assert run is not None and run["status"] == "running" and run["next_seq"] == 1
        assert run["kind"] == "activity_host" and run["activity_class"] is None
        assert [e["event_type"] for e in engine.history(run["run_id"])] == [
            "StartAccepted", "WorkflowStarted", "ActivityScheduled"]
    finally:
        engine.store.close()
