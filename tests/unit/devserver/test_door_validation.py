"""Validation at the door (issue 9): what the fault campaign's fuzzer found answered 500, and what
was accepted and later broke every read or claim (poison rows), is refused with a 4xx, a
``reason`` and no state change; a healthy task behind a refused one is still delivered."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any, Dict, Iterator, Tuple

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import CONTROL, Raw


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30) as dev:
        yield dev


def _send(server: DevServer, path: str, raw_body: bytes) -> Tuple[int, Dict[str, Any]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("POST", path, body=raw_body, headers={"Content-Type": "application/json", **CONTROL})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read().decode("utf-8"))
    finally:
        conn.close()


def _snapshot(raw: Raw) -> Any:
    listing = raw.ok("GET", "/workflows")
    return listing, {w["workflow_id"]: raw.history(w["workflow_id"]) for w in listing["workflows"]}


def _start_text(field: str) -> bytes:
    return ('{"workflow_id": "wf-x", "workflow_type": "t", "task_queue": "q", "input": '
            + json.dumps(envelope([])) + ', "execution_timeout_seconds": ' + field + "}").encode()


@pytest.mark.parametrize("name,raw_body,reason", [
    ("deep_nesting", b'{"workflow_id": "wf-x", "memo": ' + b"[" * 50000 + b"]" * 50000 + b"}", "malformed_json"),
    ("nan", _start_text("NaN"), "malformed_json"),
    ("infinity", _start_text("Infinity"), "malformed_json"),
    ("minus_infinity", _start_text("-Infinity"), "malformed_json"),
    ("float_overflow", _start_text("1e999"), "malformed_json"),
    ("huge_integer", _start_text("9" * 40), "malformed_json"),
    ("integer_past_64_bits", _start_text(str(2 ** 63)), "malformed_json"),
    ("huge_timeout", _start_text("1e308"), "validation_failed"),
    ("timeout_past_year_9999", _start_text("1e12"), "validation_failed"),
    ("timeout_text", _start_text('"abc"'), "validation_failed"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "")
def test_start_fields_are_validated_at_the_door(server: DevServer, name: str, raw_body: bytes, reason: str) -> None:
    raw = Raw(server.url)
    raw.start("wf-existing")
    before = _snapshot(raw)
    status, body = _send(server, "/api/workflows", raw_body)
    assert 400 <= status < 500, (name, status, body)
    assert body["reason"] == reason, body
    assert isinstance(body["error"], str) and body["error"]
    assert _snapshot(raw) == before


def test_64_bit_integers_arrive_whole(server: DevServer) -> None:
    """2**53 + 1 (past what a double holds) and the int64 bounds are legitimate JSON integers."""
    for value in (2 ** 53 + 1, 2 ** 63 - 1, -(2 ** 63)):
        body = ('{"workflow_type": "t", "task_queue": "q", "input": ' + json.dumps(envelope([]))
                + ', "memo": {"n": ' + str(value) + "}}").encode()
        status, answer = _send(server, "/api/workflows", body)
        assert status == 201, answer
        described = Raw(server.url).ok("GET", f"/workflows/{answer['workflow_id']}")
        assert described["memo"] == {"n": value}


def _leased_task(raw: Raw, workflow_id: str) -> Dict[str, Any]:
    raw.start(workflow_id)
    task = raw.poll()
    assert task is not None and task["workflow_id"] == workflow_id
    return dict(task)


@pytest.mark.parametrize("command", [
    {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]), "start_to_close_timeout": 1e12},
    {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
     "retry_policy": {"max_attempts": "abc"}},
    {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
     "retry_policy": {"backoff_seconds": [1e300]}},
    {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]), "heartbeat_timeout": -5},
    {"type": "start_timer", "delay_seconds": 1e15},
    {"type": "start_timer", "delay_seconds": "soon"},
    {"type": "start_child_workflow", "workflow_type": "c", "arguments": envelope([]),
     "execution_timeout_seconds": 1e308},
    {"type": "open_condition_wait", "condition_key": "k", "timeout_seconds": 1e20},
], ids=["activity_timeout_1e12", "max_attempts_text", "backoff_huge", "negative_heartbeat", "timer_past_9999",
        "timer_text", "child_timeout_1e308", "condition_wait_1e20"])
def test_commands_that_would_poison_reads_and_claims_are_refused(server: DevServer, command: Dict[str, Any]) -> None:
    raw = Raw(server.url)
    task = _leased_task(raw, "wf-poison")
    before = _snapshot(raw)
    resp = raw.complete(task, [command])
    assert resp.status_code == 422, resp.text
    assert resp.json()["reason"] == "validation_failed"
    assert "commands.0" in resp.json()["error"]
    assert _snapshot(raw) == before
    # The lease is intact; a healthy activity is scheduled and delivered; reads keep working.
    ok = raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([1]),
                              "start_to_close_timeout": 30}])
    assert ok.status_code == 200, ok.text
    act = raw.poll(kind="activity", timeout=2)
    assert act is not None and act["activity_type"] == "a"
    assert raw.call("GET", "/workflows").status_code == 200
    assert raw.call("GET", "/workflows/wf-poison").status_code == 200


def test_standalone_activity_retry_policy_is_validated(server: DevServer) -> None:
    raw = Raw(server.url)
    before = raw.ok("GET", "/activities")
    resp = raw.call("POST", "/activities", {"activity_type": "a", "task_queue": "q", "input": envelope([]),
                                            "retry_policy": {"max_attempts": "abc"}})
    assert (resp.status_code, resp.json()["reason"]) == (422, "validation_failed")
    assert "retry_policy.max_attempts" in resp.json()["error"]
    assert raw.ok("GET", "/activities") == before


def test_rows_stored_before_validation_do_not_break_reads_or_claims(server: DevServer) -> None:
    """Defence in depth: a deadline past year 9999 already in a database (written by an older
    server) renders as the last instant instead of failing the whole listing or the poll."""
    raw = Raw(server.url)
    task = _leased_task(raw, "wf-old")
    assert raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                                "start_to_close_timeout": 30}]).status_code == 200
    engine = server.engine
    with engine.tx():
        for act in engine.store.select("activities", "state = 'ready'", ()):
            act["timeouts"] = {"start_to_close": 10 ** 12}
            engine.store.put("activities", act)
        for run in engine.store.select("runs", "workflow_id = ?", ("wf-old",)):
            run["execution_timeout_seconds"] = 10 ** 300
            engine.store.put("runs", run)
    assert raw.call("GET", "/workflows").status_code == 200
    assert raw.call("GET", "/workflows/wf-old").status_code == 200
    act = raw.poll(kind="activity", timeout=2)
    assert act is not None
    started = time.monotonic()
    assert raw.call("GET", "/workflows/wf-old").status_code == 200
    assert time.monotonic() - started < 5
