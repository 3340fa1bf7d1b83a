"""Bad input never crashes the dev server or changes its state: each case is a 4xx with
``{error, reason}``."""

from __future__ import annotations

import http.client
import json
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import CONTROL, WORKER, Raw


@pytest.fixture
def small_server() -> Iterator[DevServer]:
    with DevServer(max_request_bytes=64 * 1024) as server:
        yield server


def _raw_request(server: DevServer, method: str, path: str, body: bytes, headers: Dict[str, str]
                 ) -> Tuple[int, Dict[str, Any]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read().decode("utf-8"))
    finally:
        conn.close()


def _snapshot(raw: Raw) -> Any:
    listing = raw.ok("GET", "/workflows")
    return listing, {w["workflow_id"]: raw.history(w["workflow_id"]) for w in listing["workflows"]}


@pytest.fixture
def seeded(small_server: DevServer) -> Tuple[DevServer, Raw, Dict[str, Any]]:
    raw = Raw(small_server.url)
    raw.start("wf-seed", args=["x"])
    task = raw.poll()
    assert task is not None
    return small_server, raw, task


def _expect(status: int, reason: str, got: Tuple[int, Dict[str, Any]]) -> None:
    assert got[0] == status, got
    assert got[1]["reason"] == reason, got
    assert isinstance(got[1]["error"], str) and got[1]["error"]


CASES = {
    "malformed_json": ("POST", "/api/workflows", b'{"workflow_id": ', {"Content-Type": "application/json", **CONTROL},
                       400, "malformed_json"),
    "json_not_object": ("POST", "/api/workflows", b"[1, 2]", {"Content-Type": "application/json", **CONTROL},
                        400, "malformed_json"),
    "wrong_content_type": ("POST", "/api/workflows", b"workflow_id=x", {"Content-Type": "text/plain", **CONTROL},
                           415, "unsupported_media_type"),
    "unknown_route": ("GET", "/api/nope", b"", CONTROL, 404, "route_not_found"),
    "wrong_method": ("DELETE", "/api/workflows", b"", CONTROL, 405, "method_not_allowed"),
    "unknown_http_method": ("FOO", "/api/health", b"", CONTROL, 405, "method_not_allowed"),
    "bad_page_token": ("GET", "/api/workflows?next_page_token=%%%", b"", CONTROL, 400, "invalid_page_token"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_requests_are_refused(name: str, seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    server, raw, _ = seeded
    before = _snapshot(raw)
    method, path, body, headers, status, reason = CASES[name]
    _expect(status, reason, _raw_request(server, method, path, body, headers))
    assert _snapshot(raw) == before


def _start_body(payload: Any) -> Dict[str, Any]:
    return {"workflow_id": "wf-bad", "workflow_type": "t", "task_queue": "q", "input": payload}


@pytest.mark.parametrize("payload,reason", [
    ({"codec": "avro", "blob": "bm90IGF2cm8="}, "invalid_payload_framing"),
    ({"codec": "avro", "blob": "%%% not base64"}, "invalid_payload_framing"),
    ({"codec": "json", "blob": "[1]"}, "unsupported_payload_codec"),
    ({"blob": envelope(["x"])["blob"]}, "unsupported_payload_codec"),
    ('["x"]', "unsupported_payload_codec"),
])
def test_non_avro_payloads_are_refused(payload: Any, reason: str, seeded: Tuple[DevServer, Raw, Dict[str, Any]]
                                       ) -> None:
    _, raw, _ = seeded
    before = _snapshot(raw)
    resp = raw.call("POST", "/workflows", _start_body(payload))
    assert (resp.status_code, resp.json()["reason"]) == (422, reason)
    assert _snapshot(raw) == before


def test_oversized_body_is_refused_before_reading(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    server, raw, _ = seeded
    before = _snapshot(raw)
    big = json.dumps(_start_body({"codec": "avro", "blob": "A" * (128 * 1024)})).encode()
    _expect(413, "payload_too_large", _raw_request(server, "POST", "/api/workflows", big,
                                                   {"Content-Type": "application/json", **CONTROL}))
    assert _snapshot(raw) == before


def test_invalid_commands_change_nothing(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    _, raw, task = seeded
    before = _snapshot(raw)
    bad_batches = [
        [{"type": "start_timer", "delay_seconds": 1}, {"type": "teleport"}],
        [{"type": "schedule_activity", "activity_type": "a", "arguments": {"codec": "json", "blob": "[]"}}],
        [{"type": "complete_workflow", "result": {"codec": "avro", "blob": "AAAA"}}],
        [{"type": "start_timer"}],
        [],
        "not a list",
    ]
    for commands in bad_batches:
        resp = raw.complete(task, commands)  # type: ignore[arg-type]
        assert resp.status_code == 422, resp.text
        assert resp.json()["reason"] in ("validation_failed", "unsupported_workflow_task_command",
                                         "invalid_payload_framing", "unsupported_payload_codec")
    assert _snapshot(raw) == before
    # the lease is intact: a valid completion still goes through
    ok = raw.complete(task, [{"type": "complete_workflow", "result": envelope("done")}])
    assert ok.status_code == 200
    assert raw.types("wf-seed")[-1] == "WorkflowCompleted"


@pytest.mark.parametrize("path,plane,status,reason", [
    ("/worker/workflow-tasks/wft-missing/complete", "worker", 404, "task_not_found"),
    ("/worker/activity-tasks/at-missing/complete", "worker", 404, "task_not_found"),
    ("/worker/query-tasks/qt-missing/complete", "worker", 404, "query_task_not_found"),
    ("/workflows/wf-missing/signal/go", "control", 404, "workflow_not_found"),
    ("/workflows/wf-missing/cancel", "control", 404, "workflow_not_found"),
])
def test_unknown_ids(path: str, plane: str, status: int, reason: str,
                     seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    _, raw, _ = seeded
    before = _snapshot(raw)
    resp = raw.call("POST", path, {"lease_owner": "w1", "workflow_task_attempt": 1, "commands": [],
                                   "activity_attempt_id": "x", "query_task_attempt": 1}, plane=plane)
    assert (resp.status_code, resp.json()["reason"]) == (status, reason)
    assert _snapshot(raw) == before


def test_stale_leases_are_refused(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    _, raw, task = seeded
    before = _snapshot(raw)
    wrong_attempt = dict(task, workflow_task_attempt=task["workflow_task_attempt"] + 1)
    resp = raw.complete(wrong_attempt, [{"type": "complete_workflow", "result": envelope(1)}])
    assert (resp.status_code, resp.json()["reason"]) == (409, "workflow_task_attempt_mismatch")
    wrong_owner = dict(task, lease_owner="someone-else")
    resp = raw.complete(wrong_owner, [{"type": "complete_workflow", "result": envelope(1)}])
    assert (resp.status_code, resp.json()["reason"]) == (409, "lease_owner_mismatch")
    assert _snapshot(raw) == before


def test_garbage_request_line_gets_a_json_refusal(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    import socket

    server, raw, _ = seeded
    before = _snapshot(raw)
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(b"NOT AN HTTP REQUEST LINE AT ALL\r\n\r\n")
        reply = sock.recv(4096)
    assert b'"reason": "bad_request"' in reply
    assert _snapshot(raw) == before


def test_keep_alive_survives_refusals(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    server, _, _ = seeded
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        for _ in range(3):
            conn.request("POST", "/api/workflows", body=b'{"broken"', headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())["reason"]) == (400, "missing_control_plane_version")
            conn.request("GET", "/api/health")
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["status"] == "serving"
    finally:
        conn.close()


def test_handler_bug_is_a_500_envelope(seeded: Tuple[DevServer, Raw, Dict[str, Any]],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _server, raw, _ = seeded
    from sync_worker.devserver import control

    def boom(*args: Any, **kwargs: Optional[Any]) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(control, "describe", boom)
    resp = raw.call("GET", "/workflows/wf-seed")
    assert resp.status_code == 500
    assert resp.json() == {"error": "internal server error", "reason": "internal_error"}
    monkeypatch.undo()
    assert raw.call("GET", "/workflows/wf-seed").status_code == 200


def test_worker_plane_header_is_echoed(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    _, raw, _ = seeded
    resp = raw.call("POST", "/worker/heartbeat", {"worker_id": "nobody"}, plane="worker")
    assert (resp.status_code, resp.json()["reason"]) == (404, "worker_not_registered")
    assert resp.headers["X-Durable-Workflow-Protocol-Version"] == WORKER["X-Durable-Workflow-Protocol-Version"]


def test_bad_activity_result_keeps_the_attempt_leased(seeded: Tuple[DevServer, Raw, Dict[str, Any]]) -> None:
    _, raw, task = seeded
    raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([1]),
                         "queue": "q"}])
    act = raw.poll(kind="activity")
    before = _snapshot(raw)
    path = f"/worker/activity-tasks/{act['task_id']}/complete"
    claim = {"activity_attempt_id": act["activity_attempt_id"], "lease_owner": act["lease_owner"]}
    bad = raw.call("POST", path, {**claim, "result": {"codec": "json", "blob": "1"}}, plane="worker")
    assert (bad.status_code, bad.json()["reason"]) == (422, "unsupported_payload_codec")
    assert _snapshot(raw) == before
    assert raw.call("POST", path, {**claim, "result": envelope(1)}, plane="worker").status_code == 200
    assert raw.types("wf-seed")[-1] == "ActivityCompleted"
