"""A long poll's round begins its transaction at its first write (``engine.round_tx()``, issue 29).

A round that only reads (it finds nothing) executes no transaction statement; what it read of an
open batch is still committed before its answer leaves; a round that writes is as atomic as before,
and one that fails undoes only its own work. ``engine.tx()`` begins at once, as before.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.util import ApiError
from tests.unit.devserver._raw import Raw


def _committed_keys(db: str) -> List[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return sorted(str(r[0]) for r in conn.execute("SELECT key FROM kv WHERE kind = 't'"))
    finally:
        conn.close()


def _row(key: str) -> Dict[str, Any]:
    return {"key": key, "namespace": "default", "kind": "t"}


@pytest.fixture()
def engine(tmp_path: object) -> Iterator[Engine]:
    found = Engine(Config(), os.path.join(str(tmp_path), "dev.sqlite"))
    yield found
    found.store.close()


def _traced(engine: Engine) -> List[str]:
    statements: List[str] = []
    engine.store._conn.set_trace_callback(lambda sql: statements.append(sql.split(None, 1)[0].upper()))
    return statements


def test_a_round_that_only_reads_executes_no_transaction_statement(engine: Engine) -> None:
    statements = _traced(engine)
    with engine.round_tx():
        assert engine.store.get("kv", "nothing") is None
        assert engine.store.select("kv", "kind = ?", ("t",)) == []
    assert statements == ["SELECT", "SELECT"]
    assert not engine.store.batch_open
    with engine.tx():  # a plain transaction begins at once
        assert engine.store.get("kv", "nothing") is None
    assert statements[2:] == ["BEGIN", "SELECT", "COMMIT"]


def test_the_first_write_begins_and_the_transaction_stays_atomic(engine: Engine) -> None:
    statements = _traced(engine)
    with engine.round_tx():
        engine.store.get("kv", "a")
        engine.store.put("kv", _row("a"))
        engine.store.put("kv", _row("b"))
    assert statements[:2] == ["SELECT", "BEGIN"] and statements[-1] == "COMMIT"
    with pytest.raises(ApiError), engine.round_tx():
        engine.store.get("kv", "c")
        engine.store.put("kv", _row("c"))
        engine.store.delete("kv", "a")
        raise ApiError(409, "conflict", "no")
    assert _committed_keys(engine.store.path) == ["a", "b"]
    assert engine.store.get("kv", "a") is not None and engine.store.get("kv", "c") is None


def test_a_read_of_an_open_batch_is_committed_before_the_answer(engine: Engine) -> None:
    engine._local.defer = True  # a request's transaction that left its batch open (group commit)
    with engine.tx():
        engine.store.put("kv", _row("written"))
    engine._local.defer = False
    assert engine.store.batch_open and _committed_keys(engine.store.path) == []
    with engine.grouped():  # another request, that only reads what the open batch holds
        with engine.round_tx():
            assert engine.store.get("kv", "written") is not None
        assert engine.store.batch_open
    assert not engine.store.batch_open  # its way out committed the batch it read from
    assert _committed_keys(engine.store.path) == ["written"]


def test_a_failed_read_only_transaction_leaves_the_open_batch_alone(engine: Engine) -> None:
    engine._local.defer = True
    with engine.tx():
        engine.store.put("kv", _row("kept"))
    assert engine.store.batch_open
    statements = _traced(engine)
    with pytest.raises(ApiError), engine.round_tx():
        engine.store.get("kv", "kept")
        raise ApiError(404, "not_found", "no")
    assert statements == ["SELECT"]  # nothing begun, nothing rolled back
    assert engine.store.batch_open
    with engine.round_tx():
        engine.store.put("kv", _row("joined"))
    assert statements == ["SELECT", "SAVEPOINT", "INSERT", "RELEASE"]  # joined the open batch
    engine._local.defer = False
    engine.flush()
    assert _committed_keys(engine.store.path) == ["joined", "kept"]


def test_a_parked_long_poll_executes_no_transaction_statement(tmp_path: object) -> None:
    with DevServer(port=0, db=os.path.join(str(tmp_path), "dev.sqlite")) as server:
        raw = Raw(server.url)
        raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q"}, plane="worker")
        raw.registered.add(("default", "w1"))
        statements = _traced(server.engine)
        assert raw.poll(queue="q", worker_id="w1", timeout=1) is None  # two empty rounds at least
        server.engine.store._conn.set_trace_callback(None)
        verbs = set(statements)
        assert "SELECT" in verbs and not verbs & {"BEGIN", "SAVEPOINT", "COMMIT", "RELEASE", "ROLLBACK"}, statements
