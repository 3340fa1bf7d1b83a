"""Group commit and the leaner schema (issue 29): fewer COMMITs and WAL pages, the same durability.

* every answer leaves after what it reports is committed: another connection reads it at once,
  also while many clients write at the same time;
* a failing transaction inside an open batch undoes only its own work;
* a batch a request left open is committed by the scheduler's tick; ``group_commit=False`` commits
  every transaction at once;
* the activity indexes and the workflow tasks' deadline index are partial and serve every reader;
  an older file's full indexes are dropped and rebuilt as the partial ones, its rows kept.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.store import LEASED_WF_TASKS, Store
from sync_worker.devserver.util import ApiError
from tests.unit.devserver._raw import Raw


def _committed_runs(db: str) -> List[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [str(r[0]) for r in conn.execute("SELECT workflow_id FROM runs")]
    finally:
        conn.close()


def test_an_answer_is_durable_when_it_arrives_even_under_concurrent_writers(tmp_path: object) -> None:
    db = os.path.join(str(tmp_path), "dev.sqlite")
    with DevServer(port=0, db=db) as server:
        failures: List[str] = []

        def client(n: int) -> None:
            raw = Raw(server.url)
            for k in range(25):
                workflow_id = f"wf-{n}-{k}"
                raw.start(workflow_id)
                if workflow_id not in _committed_runs(db):  # another connection: committed data only
                    failures.append(workflow_id)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == []
        assert len(_committed_runs(db)) == 150
        assert server.engine.store._commits <= 150 + 5  # never more than one COMMIT per start


def test_a_failed_transaction_in_an_open_batch_undoes_only_its_own_work(tmp_path: object) -> None:
    engine = Engine(Config(), os.path.join(str(tmp_path), "dev.sqlite"))
    try:
        local = engine._local
        local.defer = True
        with engine.tx():
            engine.store.put("kv", {"key": "kept", "namespace": "default", "kind": "t"})
        assert engine.store.batch_open  # left open for the next request to join
        with pytest.raises(ApiError), engine.tx():
            engine.store.put("kv", {"key": "undone", "namespace": "default", "kind": "t"})
            raise ApiError(409, "conflict", "no")
        assert engine.store.batch_open
        with engine.tx():
            engine.store.put("kv", {"key": "also-kept", "namespace": "default", "kind": "t"})
        local.defer = False
        engine.flush()
        assert not engine.store.batch_open
        conn = sqlite3.connect(engine.store.path)
        keys = sorted(str(r[0]) for r in conn.execute("SELECT key FROM kv WHERE kind = 't'"))
        conn.close()
        assert keys == ["also-kept", "kept"]
    finally:
        engine.store.close()


def test_a_batch_left_open_is_committed_by_the_scheduler_tick(tmp_path: object) -> None:
    db = os.path.join(str(tmp_path), "dev.sqlite")
    with DevServer(port=0, db=db, tick_seconds=0.02) as server:
        engine = server.engine
        engine._local.defer = True
        try:
            with engine.tx():
                engine.store.put("runs", {"run_id": "r-open", "namespace": "default", "workflow_id": "left-open",
                                          "status": "pending", "is_current": 1, "created_order": 0})
        finally:
            engine._local.defer = False
        deadline = time.monotonic() + 5
        while "left-open" not in _committed_runs(db) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "left-open" in _committed_runs(db)


def test_group_commit_off_commits_every_transaction(tmp_path: object) -> None:
    db = os.path.join(str(tmp_path), "dev.sqlite")
    with DevServer(port=0, db=db, group_commit=False) as server:
        raw = Raw(server.url)
        before = server.engine.store._commits
        for n in range(5):
            raw.start(f"wf-{n}")
            assert not server.engine.store.batch_open
        assert server.engine.store._commits - before >= 5


def _plan(store: Store, sql: str) -> str:
    return " ".join(str(row[-1]) for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql, (1,) * sql.count("?")))


def test_the_partial_indexes_serve_every_hot_reader(tmp_path: object) -> None:
    store = Store(os.path.join(str(tmp_path), "dev.sqlite"))
    try:
        assert "acts_task_id" in _plan(store, "SELECT data FROM activities WHERE task_id = ? AND namespace = ? LIMIT 1")
        assert "acts_deadline" in _plan(store, "SELECT data FROM activities WHERE state IN ('ready', 'leased', "
                                               "'backoff') AND due_at <= ? LIMIT 200")
        # one index serves the cross-namespace fence and a workflow id's runs in its namespace
        assert "runs_wid" in _plan(store, "SELECT data FROM runs WHERE workflow_id = ? AND namespace != ? LIMIT 1")
        assert "runs_wid" in _plan(store, "SELECT data FROM runs WHERE namespace = ? AND workflow_id = ? "
                                          "ORDER BY created_order DESC LIMIT 1")
        # the workflow tasks waiting on a deadline: the scheduler's scan, the next deadline, the lease lookups
        assert "tasks_waiting" in _plan(store, "SELECT data FROM wf_tasks WHERE state IN ('delayed', 'leased') "
                                               "AND due_at <= ? LIMIT 200")
        assert "tasks_waiting" in _plan(store, "SELECT MIN(due_at) FROM wf_tasks WHERE state IN ('delayed', "
                                               "'leased') AND due_at IS NOT NULL")
        assert "tasks_waiting" in _plan(store, f"SELECT COUNT(*) FROM wf_tasks WHERE {LEASED_WF_TASKS}")
        assert "tasks_waiting" in _plan(store, f"SELECT data FROM wf_tasks WHERE namespace = ? AND {LEASED_WF_TASKS}")
        assert "tasks_q" in _plan(store, "SELECT data FROM wf_tasks WHERE namespace = ? AND task_queue = ? "
                                         "AND state = 'ready' ORDER BY due_at LIMIT 1")
    finally:
        store.close()


def test_an_older_file_gets_the_partial_indexes_and_keeps_its_rows(tmp_path: object) -> None:
    db = os.path.join(str(tmp_path), "old.sqlite")
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE activities (execution_id TEXT PRIMARY KEY, namespace, task_queue, run_id, state, "
                 "due_at, task_id, activity_type, data TEXT NOT NULL)")
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, namespace, kind, data TEXT NOT NULL)")
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, namespace, workflow_id, status, is_current, "
                 "created_order, data TEXT NOT NULL)")
    conn.execute("CREATE INDEX runs_wf ON runs(namespace, workflow_id, created_order)")
    conn.execute("CREATE INDEX runs_id ON runs(workflow_id)")
    conn.execute("INSERT INTO runs VALUES ('run-1', 'default', 'wf-1', 'running', 1, 1, "
                 "'{\"run_id\": \"run-1\", \"namespace\": \"default\", \"workflow_id\": \"wf-1\"}')")
    for name, cols in (("acts_due", "state, due_at"), ("acts_claim", "namespace, task_queue, state, execution_id"),
                       ("acts_task", "task_id")):
        conn.execute(f"CREATE INDEX {name} ON activities({cols})")
    conn.execute("INSERT INTO activities VALUES ('x1', 'default', 'q', 'r1', 'ready', NULL, NULL, 'a', "
                 "'{\"execution_id\": \"x1\", \"state\": \"ready\"}')")
    conn.execute("INSERT INTO kv VALUES ('k', 'default', 't', '{\"key\": \"k\"}')")
    conn.execute("CREATE TABLE wf_tasks (task_id TEXT PRIMARY KEY, namespace, task_queue, run_id, state, due_at, "
                 "workflow_type, data TEXT NOT NULL)")
    conn.execute("CREATE INDEX tasks_due ON wf_tasks(state, due_at)")
    conn.execute("INSERT INTO wf_tasks VALUES ('wft-1', 'default', 'q', 'run-1', 'leased', 5, 't', "
                 "'{\"task_id\": \"wft-1\", \"state\": \"leased\"}')")
    conn.commit()
    conn.close()
    store = Store(db)
    try:
        names = {str(r[0]) for r in store._conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"acts_ready", "acts_deadline", "acts_task_id"} <= names
        assert not {"acts_due", "acts_claim", "acts_task", "runs_wf", "runs_id", "tasks_due"} & names
        assert "tasks_waiting" in names
        assert [t["task_id"] for t in store.select("wf_tasks", LEASED_WF_TASKS)] == ["wft-1"]
        assert "runs_wid" in names
        assert [r["run_id"] for r in store.select("runs", "namespace = ? AND workflow_id = ?", ("default", "wf-1"),
                                                  order="created_order DESC", limit=1)] == ["run-1"]
        found = store.select("activities", "namespace = ? AND task_queue = ? AND state = 'ready'", ("default", "q"),
                             order="execution_id", limit=1)
        assert [r["execution_id"] for r in found] == ["x1"]
        assert store.get("kv", "k") == {"key": "k"}  # the rowid kv table of an older file still works
    finally:
        store.close()
