"""The dev server's per-request hot paths stay cheap as it fills (issue 15), with the same answers.

* the activity claim is an indexed lookup (no sort of every ready row);
* run creation takes ``created_order`` from a counter that survives a restart;
* a poll rewrites the worker row only when ``last_seen_at`` is old enough to matter;
* the ``server_capabilities`` block is encoded once and spliced into each poll answer;
* timestamps are formatted once per second, with ``datetime``'s exact text;
* the body nesting check counts brackets in C and walks them only when there are many.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest

from sync_worker.devserver import DevServer
from sync_worker.devserver.discovery import server_capabilities
from sync_worker.devserver.encoding import PreEncoded, encode_body
from tests.unit.devserver._raw import Raw

_CLAIM = ("SELECT data FROM activities WHERE namespace = ? AND task_queue = ? AND state = 'ready' "
          "ORDER BY execution_id LIMIT 1")


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:") as dev:
        yield dev


def test_activity_claim_is_an_indexed_lookup(server: DevServer) -> None:
    conn = server.engine.store._conn
    plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + _CLAIM, ("default", "q")))
    assert "acts_ready" in plan and "TEMP B-TREE" not in plan, plan


def test_claim_still_takes_the_oldest_ready_activity(server: DevServer) -> None:
    raw = Raw(server.url)
    ids = [raw.ok("POST", "/activities", {"activity_type": "a", "task_queue": "hq", "input": None})
           for _ in range(3)]
    leased = [raw.poll(queue="hq", kind="activity", timeout=0) for _ in range(3)]
    assert [t["activity_execution_id"] for t in leased] == [i["activity_execution_id"] for i in ids]


def test_created_order_counter_survives_a_restart(tmp_path: object) -> None:
    db = os.path.join(str(tmp_path), "dev.sqlite")
    with DevServer(port=0, db=db) as first:
        raw = Raw(first.url)
        for n in range(3):
            raw.start(f"wf-{n}")
        before = max(r["created_order"] for r in first.engine.store.iter_all("runs"))
    with DevServer(port=0, db=db) as second:
        Raw(second.url).start("wf-after")
        orders = {r["workflow_id"]: r["created_order"] for r in second.engine.store.iter_all("runs")}
    assert before == 3 and orders["wf-after"] == 4
    assert len(set(orders.values())) == 4


def test_polls_rewrite_the_worker_row_only_when_stale_enough(server: DevServer) -> None:
    raw = Raw(server.url)
    raw.ok("POST", "/worker/register", {"worker_id": "w-touch", "task_queue": "tq"}, plane="worker")
    store = server.engine.store
    row = next(r for r in store.iter_all("workers") if r["worker_id"] == "w-touch")
    key = row["key"]
    seen = row["last_seen_at"]
    raw.poll(queue="tq", worker_id="w-touch", timeout=0, kind="activity")
    assert store.get("workers", key)["last_seen_at"] == seen  # type: ignore[index]
    row["last_seen_at"] = seen - 10.0  # as if the last refresh were long ago
    with server.engine.tx():
        store.put("workers", row)
    raw.poll(queue="tq", worker_id="w-touch", timeout=0, kind="activity")
    assert store.get("workers", key)["last_seen_at"] > seen - 10.0  # type: ignore[index]


def test_capabilities_are_encoded_once_and_answer_the_same(server: DevServer) -> None:
    block = server_capabilities(server.engine)
    assert isinstance(block, PreEncoded) and server_capabilities(server.engine) is block
    body = {"task": None, "protocol_version": "1.20", "server_capabilities": block, "text": "é"}
    assert json.loads(encode_body(body)) == json.loads(json.dumps(body))
    assert json.loads(encode_body({"only": PreEncoded({"a": [1]})})) == {"only": {"a": [1]}}
    answer = Raw(server.url).call("POST", "/worker/activity-tasks/poll",
                                  {"worker_id": "w", "task_queue": "cq", "timeout_seconds": 0}, plane="worker")
    assert answer.status_code == 200
    assert answer.json()["server_capabilities"] == dict(block)


def test_iso_formats_as_datetime_does() -> None:
    """``iso`` formats each second once; the text must stay what ``datetime`` gives (half-even micros)."""
    import math
    import random
    from datetime import datetime, timezone

    from sync_worker.devserver.util import iso

    rng = random.Random(15)
    samples = [0.0, 5e-7, 1.5e-6, 2.5e-6, 0.9999995, 0.99999949, 1e9 + 0.9999995, 253402300798.9999996]
    samples += [rng.uniform(0, 4e9) for _ in range(20000)]
    samples += [math.floor(rng.uniform(0, 4e9)) + k / 1e6 + 5e-7 for k in range(0, 1000000, 991)]
    for ts in samples:
        assert iso(ts) == datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ts
    assert iso(float("nan")) == "9999-12-31T23:59:59.999999Z" and iso(1e20) == "9999-12-31T23:59:59.999999Z"
    assert iso(-1.5) == "1969-12-31T23:59:58.500000Z" and iso(None) is None


def test_nesting_depth_check_counts_only_brackets_outside_strings() -> None:
    from sync_worker.devserver.validation import MAX_DEPTH, _depth_ok

    assert _depth_ok(b'{"a": "' + b"[" * 500 + b'"}')
    assert _depth_ok(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert not _depth_ok(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert _depth_ok(b"[" + b"[]," * 300 + b"[]]")  # many openers, shallow
    assert not _depth_ok(b'["\\"", ' + b"{" * (MAX_DEPTH + 1) + b"}" * (MAX_DEPTH + 1) + b"]")  # escaped quote


def test_stored_documents_decode_as_json_loads_does() -> None:
    """``decode_stored`` scans compact text directly; anything else takes ``json.loads``'s path."""
    from sync_worker.devserver.encoding import decode_stored

    doc = {"a": [1, 2.5, None, True], "b": {"c": "é\u2028"}, "d": 1e300}
    spaced = json.dumps(doc)
    for text in (json.dumps(doc, separators=(",", ":")), spaced, " " + spaced, spaced + "\n"):
        decoded = decode_stored(text)
        assert decoded == json.loads(text) and decoded is not decode_stored(text)
    for bad in ('{"a": 1} x', '{"a": }', "", "  "):
        with pytest.raises(ValueError):
            decode_stored(bad)


def test_routes_skip_by_literal_prefix_with_the_same_answers(server: DevServer) -> None:
    from sync_worker.devserver.routes import _ROUTES, _literal_prefix

    assert _literal_prefix("/api/health") == "/api/health"
    assert _literal_prefix("/api/workers/(?P<worker_id>[^/]+)") == "/api/workers/"
    assert _literal_prefix("/api/x/?") == "/api/x"  # a quantifier makes the character before it optional
    assert _literal_prefix("/api/a.b") == "/api/a"
    from sync_worker.devserver.queries import QueryBroker
    from sync_worker.devserver.routes import Routes

    routes = Routes(server.engine, QueryBroker(server.engine))
    handler, params, known = routes.match("POST", "/api/worker/activity-tasks/at-1/complete")
    assert handler is not None and params == {"task_id": "at-1"} and known
    assert routes.match("GET", "/api/worker/activity-tasks/at-1/complete") == (None, {}, True)  # 405
    assert routes.match("POST", "/api/nothing/here") == (None, {}, False)  # 404
    for method, pattern, _ in _ROUTES:  # every route's own literal text still matches it
        literal = _literal_prefix(pattern)
        if literal == pattern:
            assert routes.match(method, pattern)[0] is not None, pattern


def test_a_literal_routes_answer_is_kept_and_equals_the_scan(server: DevServer) -> None:
    from sync_worker.devserver.queries import QueryBroker
    from sync_worker.devserver.routes import _ROUTES, Routes, _literal_prefix

    routes = Routes(server.engine, QueryBroker(server.engine))
    literal = sorted({pattern for _, pattern, _ in _ROUTES if _literal_prefix(pattern) == pattern})
    assert "/api/worker/activity-tasks/poll" in literal and "/api/activities" in literal
    for path in literal:
        for method in ("GET", "POST", "PUT", "DELETE"):
            for _ in range(2):  # the first answer is scanned and kept, the second read back
                assert routes.match(method, path) == routes._scan(method, path), (method, path)
    assert len(routes._known) == 4 * len(literal)
    routes.match("GET", "/api/activities/act-1")  # a path with a parameter is never kept
    routes.match("POST", "/api/worker/activity-tasks/at-1/complete")
    assert len(routes._known) == 4 * len(literal)
    _, params, _ = routes.match("POST", "/api/worker/activity-tasks/poll")
    params["x"] = "y"  # a caller's change to its params does not reach the kept answer
    assert routes.match("POST", "/api/worker/activity-tasks/poll")[1] == {}


def test_percent_encoded_paths_and_queries_are_still_split_and_unquoted(server: DevServer) -> None:
    """Plain paths skip ``urlsplit`` / ``unquote``; the others must still get them."""
    raw = Raw(server.url)
    raw.ok("POST", "/workflows", {"workflow_id": "wf-1", "workflow_type": "t", "task_queue": "q"})
    assert raw.call("GET", "/workflows/wf-1").json()["workflow_id"] == "wf-1"
    assert raw.call("GET", "/workflows/wf%2D1").json()["workflow_id"] == "wf-1"  # %2D is "-"
    assert raw.call("GET", "/workflows/wf-1?x=1").json()["workflow_id"] == "wf-1"
    assert raw.call("GET", "/workflows/wf-2").status_code == 404
