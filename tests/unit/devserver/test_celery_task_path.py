"""A Celery-facade task's four requests on the dev server (start, poll, complete, describe) cost less
(issue 29), with the same answers, rows and events.

* a path with a parameter (a completion, a describe) is matched against its directory's few routes,
  with the answer a scan of the whole table gives;
* a standalone activity's describe executes no ``BEGIN IMMEDIATE`` / ``COMMIT`` (it only reads) and
  reads its activity by the key noted at the start (no ``SELECT`` by run), with the answer the old
  transaction and the index lookup gave; what it read of an open group-commit batch is committed
  before the answer leaves;
* a start stores its host run once (no second encode of the same document), the same row;
* ``Engine.current_run`` reads a run the engine created by its key, the same run the index's newest
  is (several runs of one id, a rolled-back creation, a deleted run, another namespace).
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sync_worker.devserver import control
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.queries import QueryBroker
from sync_worker.devserver.routes import _ROUTES, Handler, Request, Routes, first_match
from sync_worker.payloads import envelope

_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")


def _whole_table_scan(routes: Routes, method: str, path: str) -> Tuple[Optional[Handler], Dict[str, str], bool]:
    """What the route lookup answered before directories: every route of the table, in order."""
    return first_match(routes.table, method, path)


def _paths() -> List[str]:
    """Every route's pattern with its parameters filled in (several ways), and paths near them."""
    out = set()
    for _, pattern, _ in _ROUTES:
        for fill in ("x-1", "poll", "runs", "a.b:c@d~e", "activity-tasks"):
            path = re.sub(r"\(\?P<\w+>\[\^/\]\+\)", fill, pattern)
            path = re.sub(r"[\\^$?*+()|\[\]{}]", "", path)
            out.update({path, path + "/", path + "/extra", path.rsplit("/", 1)[0], path[:-1]})
    out.update({"", "/", "/api", "/api/", "/nothing", "/api/nothing/here", "/api/worker", "/api/worker/",
                "/api/activities/a/b", "/api//activities", "/api/worker/activity-tasks//complete"})
    return sorted(out)


@pytest.fixture()
def engine(tmp_path: object) -> Iterator[Engine]:
    found = Engine(Config(), os.path.join(str(tmp_path), "dev.sqlite"))
    yield found
    found.store.close()


def test_every_path_matches_as_the_whole_table_scan_does(engine: Engine) -> None:
    routes = Routes(engine, QueryBroker(engine))
    paths = _paths()
    assert len(paths) > 300
    matched = 0
    for path in paths:
        for method in _METHODS:
            answer = routes.match(method, path)
            assert answer == _whole_table_scan(routes, method, path), (method, path)
            matched += answer[0] is not None
    assert matched > len(_ROUTES)  # the filled-in patterns do reach their handlers


def test_a_parameterised_path_scans_its_directorys_routes_only(engine: Engine) -> None:
    routes = Routes(engine, QueryBroker(engine))
    complete = routes._candidates("/api/worker/activity-tasks/at-1/complete")
    describe = routes._candidates("/api/activities/act-1")
    assert len(complete) < 8 and len(describe) < 8 < len(routes.table)
    assert routes.match("POST", "/api/worker/activity-tasks/at-1/complete")[1] == {"task_id": "at-1"}
    assert routes.match("GET", "/api/activities/act-1")[1] == {"activity_id": "act-1"}
    # a workflow id is not a directory: the walk stops at /api/workflows/ (its routes, not the table's)
    assert routes._candidates("/api/workflows/wf-1/signal/go") is routes._dirs["/api/workflows/"]
    assert routes._candidates("relative/path") is routes.table


# -- the describe --------------------------------------------------------------------------------
def _call(routes: Routes, method: str, path: str, body: Dict[str, Any], plane: str) -> Any:
    handler, params, _ = routes.match(method, path)
    assert handler is not None
    request = Request(method=method, path=path, query={}, headers={}, namespace="default", plane=plane,
                      body=body, params=params)
    with routes.engine.grouped():
        return handler(routes, request)[1]


def _celery_task(routes: Routes, task_id: str) -> None:
    """A ``.delay()``'s start, the worker's poll and its complete."""
    _call(routes, "POST", "/api/activities", {
        "activity_type": "noop", "task_queue": "q", "activity_id": task_id, "input": envelope([1]),
        "retry_policy": {"max_attempts": None, "backoff_seconds": [1], "non_retryable_error_types": []},
        "start_to_close_timeout_seconds": 86400, "heartbeat_timeout_seconds": 30}, "control")
    task = _call(routes, "POST", "/api/worker/activity-tasks/poll", {
        "worker_id": "w1", "task_queue": "q", "timeout_seconds": 0}, "worker")["task"]
    _call(routes, "POST", f"/api/worker/activity-tasks/{task['task_id']}/complete", {
        "activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w1", "result": envelope(2)}, "worker")


def _committed_status(db: str, task_id: str) -> List[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [str(r[0]) for r in conn.execute("SELECT status FROM runs WHERE workflow_id = ?", (task_id,))]
    finally:
        conn.close()


def test_a_describe_executes_no_transaction_statement_and_answers_as_the_transaction_did(engine: Engine) -> None:
    routes = Routes(engine, QueryBroker(engine))
    _call(routes, "POST", "/api/worker/register", {"worker_id": "w1", "task_queue": "q",
                                                   "supported_activity_types": ["noop"]}, "worker")
    _celery_task(routes, "celery-1")
    statements: List[str] = []
    engine.store._conn.set_trace_callback(lambda sql: statements.append(sql.split(None, 1)[0].upper()))
    described = _call(routes, "GET", "/api/activities/celery-1", {}, "control")
    engine.store._conn.set_trace_callback(None)
    assert statements == []  # the run and its activity by key (cached text): no SELECT, no BEGIN, no COMMIT
    with engine.tx():  # the old path: the reads inside a transaction, by the indexes
        engine._newest_runs = type(engine._newest_runs)()  # no notes: the index lookups
        engine.host_activities = type(engine.host_activities)()
        run = engine.current_run("default", "celery-1")
        assert run is not None
        before = control.describe_activity(engine, "default", "celery-1")
        by_index = engine.store.select("activities", "run_id = ?", (run["run_id"],))
    assert described == before
    assert len(by_index) == 1 and described["activity_execution_id"] == by_index[0]["execution_id"]
    assert described["status"] == "completed" and described["attempt_count"] == 1
    assert described["result"] == envelope(2)
    # an unknown id is still a 404, and leaves no transaction open
    handler, params, _ = routes.match("GET", "/api/activities/nobody")
    assert handler is not None
    with pytest.raises(Exception) as refused:
        handler(routes, Request(method="GET", path="/api/activities/nobody", query={}, headers={},
                                namespace="default", plane="control", params=params))
    assert getattr(refused.value, "status", None) == 404
    assert not engine.store.batch_open and engine.store._depth == 0


def test_a_describe_of_an_open_batch_commits_it_before_answering(engine: Engine) -> None:
    assert engine.config.group_commit
    routes = Routes(engine, QueryBroker(engine))
    _call(routes, "POST", "/api/worker/register", {"worker_id": "w1", "task_queue": "q",
                                                   "supported_activity_types": ["noop"]}, "worker")
    _celery_task(routes, "celery-2")
    engine._local.defer = True  # another request's write left its batch open (group commit)
    with engine.tx():
        engine.store.put("kv", {"key": "k", "namespace": "default", "kind": "t"})
    engine._local.defer = False
    assert engine.store.batch_open
    described = _call(routes, "GET", "/api/activities/celery-2", {}, "control")
    assert described["status"] == "completed"
    assert not engine.store.batch_open  # what the describe read is durable before its answer leaves
    assert _committed_status(engine.store.path, "celery-2") == ["completed"]


def test_a_hint_whose_row_is_gone_falls_back_to_the_index(engine: Engine) -> None:
    routes = Routes(engine, QueryBroker(engine))
    _call(routes, "POST", "/api/worker/register", {"worker_id": "w1", "task_queue": "q",
                                                   "supported_activity_types": ["noop"]}, "worker")
    _celery_task(routes, "celery-3")
    run = engine.current_run("default", "celery-3")
    assert run is not None
    right = engine.host_activities.get(run["run_id"])
    engine.host_activities.note(run["run_id"], "act-rolled-back")  # e.g. a start that rolled back
    described = _call(routes, "GET", "/api/activities/celery-3", {}, "control")
    assert described["activity_execution_id"] == right and described["status"] == "completed"


def test_a_start_stores_its_host_run_once_with_the_same_document(engine: Engine, monkeypatch: Any) -> None:
    from sync_worker.devserver import store as store_module

    routes = Routes(engine, QueryBroker(engine))
    puts: List[str] = []
    created: List[Dict[str, Any]] = []
    real_put, real_create = engine.store.put, engine.create_run

    def put(table: str, row: Dict[str, Any]) -> None:
        puts.append(table)
        real_put(table, row)

    def create_run(**kwargs: Any) -> Dict[str, Any]:
        created.append(real_create(**kwargs))
        return created[-1]

    monkeypatch.setattr(engine.store, "put", put)
    monkeypatch.setattr(engine, "create_run", create_run)
    _call(routes, "POST", "/api/activities", {"activity_type": "noop", "task_queue": "q", "activity_id": "c-4",
                                              "input": envelope([1])}, "control")
    assert puts.count("runs") == 1 and puts.count("activities") == 1
    # the run as the start left it in memory (what a second save would have written) is the stored text
    stored = engine.store._conn.execute("SELECT data FROM runs WHERE workflow_id = 'c-4'").fetchone()[0]
    assert store_module._encode(created[0]) == stored
    assert engine.store.get("runs", created[0]["run_id"]) == created[0]


def test_a_celery_tasks_answers_rows_and_events_are_those_of_the_tree_before() -> None:
    """Three tasks (two completed, one failed), each described before its poll, after it and at its end,
    then the list: every answer, every row and every event as the tree before these changes wrote them."""
    import json
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    out = subprocess.run([sys.executable, os.path.join(here, "_celery_task_dump.py"), tree], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    got = json.loads(out)
    with open(os.path.join(here, "celery_task_golden.json"), encoding="utf-8") as golden:
        expected = json.load(golden)
    assert len(expected["events"]) == 18 and len(expected["answers"]) == 20
    for key in ("answers", "runs", "activities", "events", "workers", "kv"):
        assert got[key] == expected[key], key


def _by_index(engine: Engine, namespace: str, workflow_id: str) -> Optional[Dict[str, Any]]:
    found = engine.store.select("runs", "namespace = ? AND workflow_id = ?", (namespace, workflow_id),
                                order="created_order DESC", limit=1)
    return found[0] if found else None


def test_the_current_run_by_its_note_is_the_indexs_newest(engine: Engine) -> None:
    def create(workflow_id: str, namespace: str = "default") -> Dict[str, Any]:
        return engine.create_run(namespace=namespace, workflow_id=workflow_id, workflow_type="t",
                                 task_queue="q", arguments=None)

    with engine.tx():
        first = create("wf")
        second = create("wf")  # the first is retired (is_current 0); the second is the newest
        other = create("wf", namespace="elsewhere")
    for namespace, newest in (("default", second), ("elsewhere", other)):
        statements: List[str] = []
        engine.store._conn.set_trace_callback(statements.append)
        with engine.tx():
            got = engine.current_run(namespace, "wf")
        engine.store._conn.set_trace_callback(None)
        assert not [s for s in statements if s.startswith("SELECT")]  # by its note, from the cached text
        assert got == _by_index(engine, namespace, "wf") and got is not None
        assert got["run_id"] == newest["run_id"]
    assert first["run_id"] != second["run_id"]
    # a creation that rolled back leaves a note whose row is gone: the index's newest, as before
    with pytest.raises(RuntimeError), engine.tx():
        create("wf")
        raise RuntimeError("rolled back")
    with engine.tx():
        assert engine.current_run("default", "wf") == _by_index(engine, "default", "wf")
        assert engine.current_run("default", "wf")["run_id"] == second["run_id"]  # type: ignore[index]
    # the newest deleted (e.g. retention): the one before it, by the index
    with engine.tx():
        engine.store.delete("runs", second["run_id"])
        found, indexed = engine.current_run("default", "wf"), _by_index(engine, "default", "wf")
        assert found is not None and indexed is not None and found["run_id"] == first["run_id"] == indexed["run_id"]
        assert engine.current_run("default", "nobody") is None
