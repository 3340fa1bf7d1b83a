"""The store's write shortcuts keep the file consistent (issue 15).

``Store.put`` rewrites only the indexed columns that changed since the row was last read or
written, and ``event_count`` answers from a remembered last sequence; both must agree with the
file after rollbacks, deletes and a restart, or an index would point at the wrong rows. Every
check compares the indexed columns with the JSON document they are copied from, straight from
SQLite.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import Client, Worker, activity
from sync_worker.devserver import DevServer
from sync_worker.devserver.store import TABLES, Store
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw


def _mismatches(store: Store) -> List[str]:
    """Every row whose indexed columns differ from its document, and events out of sequence."""
    bad: List[str] = []
    for table, (key, columns) in TABLES.items():
        names = ", ".join([key, *columns, "data"])
        for values in store._conn.execute(f"SELECT {names} FROM {table}"):
            doc = json.loads(values[-1])
            expected = (doc[key], *[doc.get(c) for c in columns])
            if tuple(values[:-1]) != expected:
                bad.append(f"{table}: columns {values[:-1]} but document {expected}")
    for run_id, count, top in store._conn.execute("SELECT run_id, COUNT(*), MAX(seq) FROM events GROUP BY run_id"):
        if count != top:
            bad.append(f"events of {run_id}: {count} rows, last seq {top}")
    return bad


@pytest.fixture
def store(tmp_path: Any) -> Iterator[Store]:
    opened = Store(os.path.join(str(tmp_path), "s.sqlite"))
    yield opened
    opened.close()


def _activity(n: int, **extra: Any) -> Dict[str, Any]:
    return {"execution_id": f"act-{n}", "namespace": "default", "task_queue": "q", "run_id": f"run-{n}",
            "state": "ready", "due_at": None, "task_id": None, **extra}


def test_changed_columns_are_rewritten_and_unchanged_ones_kept(store: Store) -> None:
    store.begin()
    store.put("activities", _activity(1))
    store.end(True)
    row = store.get("activities", "act-1")
    assert row is not None
    row.update(state="leased", due_at=12.5, task_id="at-1")
    store.begin()
    store.put("activities", row)
    store.end(True)
    got = store.select("activities", "task_id = ?", ("at-1",))
    assert [r["state"] for r in got] == ["leased"]
    assert store.count("activities", "state = 'ready'") == 0
    assert _mismatches(store) == []


def test_a_rolled_back_write_is_forgotten(store: Store) -> None:
    store.begin()
    store.put("activities", _activity(2))
    store.end(True)
    row = store.get("activities", "act-2")
    assert row is not None
    store.begin()
    store.put("activities", {**row, "state": "leased", "task_id": "at-2"})
    store.add_event("run-2", 1, {"sequence": 1})
    store.end(False)  # rolled back: the file still says ready, with no event
    store.begin()
    store.put("activities", {**row, "state": "leased", "task_id": "at-2"})  # the same values again
    store.end(True)
    assert store.count("activities", "state = 'leased' AND task_id = 'at-2'") == 1
    assert store.event_count("run-2") == 0
    assert _mismatches(store) == []


def test_deleted_rows_are_inserted_again_not_updated_into_nothing(store: Store) -> None:
    store.begin()
    store.put("activities", _activity(3))
    store.put("activities", _activity(4))
    store.end(True)
    row = store.get("activities", "act-3")
    assert row is not None
    store.begin()
    store.delete_where("activities", "run_id = ?", ("run-3",))
    store.delete("activities", "act-4")
    store.put("activities", {**row, "state": "leased"})
    store.end(True)
    assert [r["execution_id"] for r in store.select("activities")] == ["act-3"]
    assert _mismatches(store) == []


def test_event_sequence_memory_follows_deletes(store: Store) -> None:
    store.begin()
    for seq in (1, 2, 3):
        store.add_event("run-9", seq, {"sequence": seq})
    store.end(True)
    assert store.event_count("run-9") == 3
    store.begin()
    store.delete_where("events", "run_id = ?", ("run-9",))
    store.end(True)
    assert store.event_count("run-9") == 0


def test_a_busy_server_leaves_every_index_consistent(tmp_path: Any) -> None:
    """Activities, workflows and failures through the real server and worker, then a restart."""
    db = os.path.join(str(tmp_path), "dev.sqlite")

    @activity.defn(name="consistent.echo")
    def echo(value: int) -> int:
        if value % 5 == 0:
            raise ValueError("every fifth fails")
        return value

    with DevServer(port=0, db=db) as server:
        raw = Raw(server.url)
        for n in range(30):
            raw.ok("POST", "/activities", {"activity_type": "consistent.echo", "task_queue": "cq",
                                           "input": envelope([n])})
        worker = Worker(Client(server.url), task_queue="cq", activities=[echo], poll_timeout=1.0)
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and server.engine.store.count(
                "activities", "state IN ('ready', 'leased')") > 0:
            time.sleep(0.05)
        worker.stop()
        runner.join(15)
        with server.engine.lock:
            assert server.engine.store.count("activities", "state = 'done'") == 30
            assert _mismatches(server.engine.store) == []
    reopened = Store(db)
    try:
        assert _mismatches(reopened) == []
        assert reopened.count("runs", "status = 'completed'") == 24
        assert reopened.count("runs", "status = 'failed'") == 6
    finally:
        reopened.close()


def test_cached_documents_follow_rollbacks_and_deletes(store: Store) -> None:
    """``runs`` and ``workers`` documents are served from their cached text: it must be the file's."""
    run = {"run_id": "r1", "namespace": "default", "workflow_id": "wf", "status": "running", "is_current": 1,
           "created_order": 1}
    store.begin()
    store.put("runs", run)
    store.end(True)
    assert store.get("runs", "r1") == run
    store.begin()
    store.put("runs", {**run, "status": "completed"})
    assert store.get("runs", "r1") == {**run, "status": "completed"}
    store.end(False)  # rolled back: the cache must not keep what the file does not hold
    assert store.get("runs", "r1") == run
    store.begin()
    store.delete("runs", "r1")
    store.end(True)
    assert store.get("runs", "r1") is None
    store.begin()
    store.put("runs", run)
    store.delete_where("runs", "workflow_id = ?", ("wf",))
    store.end(True)
    assert store.get("runs", "r1") is None
    assert _mismatches(store) == []


def test_a_remembered_column_is_the_files_or_unknown(store: Store) -> None:
    """``stored_column`` (the claim reads a run's status from it) never answers what the file does not hold."""
    run = {"run_id": "r2", "namespace": "default", "workflow_id": "wf2", "status": "running", "is_current": 1,
           "created_order": 2}
    assert store.stored_column("runs", "r2", "status") is None  # never seen: unknown
    store.begin()
    store.put("runs", run)
    store.end(True)
    assert store.stored_column("runs", "r2", "status") == "running"
    store.begin()
    store.put("runs", {**run, "status": "completed"})
    assert store.stored_column("runs", "r2", "status") == "completed"
    store.end(False)  # rolled back: forgotten, not the rolled-back value
    assert store.stored_column("runs", "r2", "status") is None
    assert store.get("runs", "r2") == run
    assert store.stored_column("runs", "r2", "status") == "running"
    store.begin()
    store.delete("runs", "r2")
    store.end(True)
    assert store.stored_column("runs", "r2", "status") is None


def test_a_row_without_an_indexed_column_stores_it_as_null(store: Store) -> None:
    """The columns are read by one ``itemgetter`` call; a row lacking one takes the slow path (``NULL``)."""
    partial = {"execution_id": "act-p", "namespace": "default", "run_id": "run-p", "state": "ready"}
    store.begin()
    store.put("activities", partial)
    store.end(True)
    found = store._conn.execute("SELECT task_queue, due_at, task_id, activity_type, state FROM activities "
                                "WHERE execution_id = 'act-p'").fetchone()
    assert found == (None, None, None, None, "ready")
    row = store.get("activities", "act-p")
    assert row == partial
    row.update(task_queue="q", state="leased")
    store.begin()
    store.put("activities", row)
    store.end(True)
    assert store.select("activities", "task_queue = 'q' AND state = 'leased'") == [row]
    assert _mismatches(store) == []


def test_reading_a_remembered_row_keeps_the_files_columns(store: Store) -> None:
    """A read does not note a row again (the note is already the file's): a changed copy still updates the index."""
    store.begin()
    store.put("activities", _activity(7))
    store.end(True)
    first = store.get("activities", "act-7")
    second = store.get("activities", "act-7")
    assert first is not None and second is not None and first is not second
    first["state"] = "leased"  # changed in memory, not written: the file still holds "ready"
    assert store.stored_column("activities", "act-7", "state") == "ready"
    store.begin()
    store.put("activities", {**second, "state": "done"})
    store.end(True)
    assert store.count("activities", "state = 'done'") == 1 and store.count("activities", "state = 'ready'") == 0
    assert _mismatches(store) == []
