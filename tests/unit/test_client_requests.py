"""Client request shapes, headers and status mapping (pure; ``responses`` stands in for the server).

Request bodies are checked against the polyglot control-plane fixtures in ``../shared/fixtures``:
the same operation must produce the same path, body fields and decoded payload.
"""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest
import responses

from sync_worker import errors, payloads
from sync_worker.client import Client
from sync_worker.protocol.refusals import poll_capacity_delay
from tests._fixtures import load_fixture

BASE = "http://dw.test"


def _body(call: Any) -> Dict[str, Any]:
    return json.loads(call.request.body)


@pytest.fixture
def client() -> Client:
    return Client(BASE, token="secret-token", namespace="orders", transport_retries=1,
                  worker_plane_transport="requests", control_plane_transport="requests")  # responses mocks requests


@responses.activate
def test_control_plane_headers_and_start_body_match_fixture(client: Client) -> None:
    fixture = load_fixture("sdk-python/tests/fixtures/control-plane/workflow-start-parity.json")
    semantic = fixture["semantic_body"]
    responses.post(f"{BASE}/api/workflows", json={"workflow_id": semantic["workflow_id"], "run_id": "r1"})
    handle = client.start_workflow(
        semantic["workflow_type"], *semantic["input"], task_queue=semantic["task_queue"],
        workflow_id=semantic["workflow_id"], memo=semantic["memo"], search_attributes=semantic["search_attributes"],
        execution_timeout_seconds=semantic["execution_timeout_seconds"],
        run_timeout_seconds=semantic["run_timeout_seconds"], duplicate_policy=semantic["duplicate_policy"],
    )
    assert (handle.workflow_id, handle.run_id) == (semantic["workflow_id"], "r1")
    call = responses.calls[0]
    body = _body(call)
    for key, value in fixture["sdk_python"]["expected_body"].items():
        assert body[key] == value, key
    assert payloads.decode_envelope(body["input"]) == fixture["sdk_python"]["payload_envelope"]["decoded"]
    headers = call.request.headers
    assert call.request.method == fixture["request"]["method"]
    assert headers["Authorization"] == "Bearer secret-token"
    assert headers["X-Namespace"] == "orders"
    assert headers["X-Durable-Workflow-Control-Plane-Version"] == "2"
    assert "X-Durable-Workflow-Protocol-Version" not in headers


@pytest.mark.parametrize("operation", ["workflow-signal", "workflow-query", "workflow-update"])
@responses.activate
def test_message_routes_match_fixture(client: Client, operation: str) -> None:
    fixture = load_fixture(f"sdk-python/tests/fixtures/control-plane/{operation}-parity.json")
    args = fixture["sdk_python"]["args"]
    responses.get(f"{BASE}/api/cluster/info", json={"control_plane": {"version": "2", "request_contract": {
        "operations": {"update": {"fields": {"wait_for": {"canonical_values": ["accepted", "completed"]}}}}}}})
    responses.post(BASE + "/api" + fixture["request"]["path"], json={
        "result_envelope": payloads.envelope({"ok": 9007199254740993})})
    if operation == "workflow-signal":
        client.signal_workflow(args["workflow_id"], args["signal_name"], args=args["args"])
    elif operation == "workflow-query":
        assert client.query_workflow(args["workflow_id"], args["query_name"], args=args["args"])["result"] == {
            "ok": 9007199254740993}
    else:
        result = client.update_workflow(args["workflow_id"], args["update_name"], args=args["args"],
                                        wait_for=args["wait_for"])
        assert result["result"] == {"ok": 9007199254740993}
    call = responses.calls[-1]
    body = _body(call)
    for key, value in fixture["sdk_python"].get("expected_body", {}).items():
        assert body[key] == value
    assert payloads.decode_envelope(body["input"]) == fixture["sdk_python"]["payload_envelope"]["decoded"]
    if operation != "workflow-query":
        assert body["request_id"]


@responses.activate
def test_update_refuses_wait_for_the_server_does_not_offer(client: Client) -> None:
    responses.get(f"{BASE}/api/cluster/info", json={"control_plane": {"version": "2", "request_contract": {
        "operations": {"update": {"fields": {"wait_for": {"canonical_values": ["accepted"]}}}}}}})
    with pytest.raises(ValueError, match="wait_for"):
        client.update_workflow("wf", "set", args=[1], wait_for="completed")


@pytest.mark.parametrize("operation,call", [
    ("workflow-cancel", lambda c, a: c.cancel_workflow(a["workflow_id"], reason=a["reason"])),
    ("workflow-terminate", lambda c, a: c.terminate_workflow(a["workflow_id"], reason=a["reason"])),
])
@responses.activate
def test_cancel_and_terminate_match_fixture(client: Client, operation: str, call: Any) -> None:
    fixture = load_fixture(f"sdk-python/tests/fixtures/control-plane/{operation}-parity.json")
    responses.post(BASE + "/api" + fixture["request"]["path"], json={"outcome": "ok"})
    call(client, fixture["sdk_python"]["args"])
    assert _body(responses.calls[0]) == fixture["sdk_python"]["expected_body"]


@responses.activate
def test_history_list_and_worker_routes(client: Client) -> None:
    history = load_fixture("sdk-python/tests/fixtures/control-plane/workflow-history-parity.json")
    args = history["sdk_python"]["args"]
    responses.get(BASE + "/api" + history["request"]["path"], json={"events": [{"event_type": "WorkflowStarted"}],
                                                                      "next_page_token": None})
    events = list(client.iter_history(args["workflow_id"], args["run_id"]))
    assert [e["event_type"] for e in events] == ["WorkflowStarted"]

    listing = load_fixture("sdk-python/tests/fixtures/control-plane/workflow-list-parity.json")
    responses.get(f"{BASE}/api/workflows", json={"workflows": [{"workflow_id": "a", "status": "running"}]})
    kwargs = listing["sdk_python"]["args"]
    page = client.list_workflows(**kwargs)
    assert page.workflows[0].workflow_id == "a"
    query = responses.calls[-1].request.params
    assert query == {k: str(v) for k, v in kwargs.items()}

    workers = load_fixture("sdk-python/tests/fixtures/control-plane/worker-list-parity.json")
    responses.get(f"{BASE}/api/workers", json={"workers": []})
    client.list_workers(**workers["sdk_python"]["kwargs"])
    assert responses.calls[-1].request.params == workers["request"]["query"]


@responses.activate
def test_worker_plane_headers_and_task_outcome_shapes(client: Client) -> None:
    fixture = load_fixture("sdk-python/tests/fixtures/control-plane/query-task-complete-parity.json")
    kwargs = fixture["sdk_python"]["kwargs"]
    responses.post(BASE + "/api" + fixture["request"]["path"], json={"outcome": "completed"})
    client.complete_query_task(kwargs["query_task_id"], lease_owner=kwargs["lease_owner"],
                               query_task_attempt=kwargs["query_task_attempt"], result=kwargs["result"])
    call = responses.calls[0]
    assert _body(call) == fixture["sdk_python"]["request_body"]  # byte-exact Avro envelope included
    assert call.request.headers["X-Durable-Workflow-Protocol-Version"] == "1.20"
    assert "X-Durable-Workflow-Control-Plane-Version" not in call.request.headers

    fail = load_fixture("sdk-python/tests/fixtures/control-plane/activity-fail-parity.json")
    responses.post(BASE + "/api" + fail["request"]["path"], json={"outcome": "failed"})
    request = fail["request"]["body"]
    client.fail_activity_task(fail["semantic_body"]["task_id"], activity_attempt_id=request["activity_attempt_id"],
                              lease_owner=request["lease_owner"], failure=request["failure"])
    assert _body(responses.calls[-1]) == request


@responses.activate
def test_protocol_version_override_is_read_once_per_client(monkeypatch: pytest.MonkeyPatch) -> None:
    responses.post(f"{BASE}/api/worker/heartbeat", json={})
    monkeypatch.setenv("DURABLE_WORKFLOW_WORKER_PROTOCOL_VERSION", "1.19")
    first = Client(BASE, token="t", transport_retries=1, worker_plane_transport="requests")
    first.heartbeat_worker({"worker_id": "w"})
    monkeypatch.delenv("DURABLE_WORKFLOW_WORKER_PROTOCOL_VERSION")
    first.heartbeat_worker({"worker_id": "w"})  # kept from this client's first worker-plane request
    Client(BASE, token="t", transport_retries=1, worker_plane_transport="requests").heartbeat_worker(
        {"worker_id": "w"})  # a new client reads the environment again
    sent = [call.request.headers["X-Durable-Workflow-Protocol-Version"] for call in responses.calls]
    assert sent == ["1.19", "1.19", "1.20"]


@responses.activate
def test_control_plane_version_override_is_read_once_per_client(monkeypatch: pytest.MonkeyPatch) -> None:
    responses.get(f"{BASE}/api/workflows/wf", json={"workflow_id": "wf", "status": "running"})
    monkeypatch.setenv("DURABLE_WORKFLOW_CONTROL_PLANE_VERSION", "3")
    first = Client(BASE, token="t", transport_retries=1, control_plane_transport="requests")
    first.describe_workflow("wf")
    monkeypatch.delenv("DURABLE_WORKFLOW_CONTROL_PLANE_VERSION")
    first.describe_workflow("wf")  # kept from this client's first control-plane request
    Client(BASE, token="t", transport_retries=1, control_plane_transport="requests").describe_workflow("wf")
    sent = [call.request.headers["X-Durable-Workflow-Control-Plane-Version"] for call in responses.calls]
    assert sent == ["3", "3", "2"]


@responses.activate
def test_credentials_and_namespace_set_on_a_client_go_with_its_next_request() -> None:
    """Header sets are kept per plane, but a changed token or namespace is sent at the next request."""
    responses.get(f"{BASE}/api/workflows/wf", json={"workflow_id": "wf", "status": "running"})
    responses.post(f"{BASE}/api/worker/heartbeat", json={})
    responses.post(f"{BASE}/api/worker/activity-tasks/poll", json={"task": None})
    client = Client(BASE, token="one", transport_retries=1, worker_plane_transport="requests",
                    control_plane_transport="requests")
    client.describe_workflow("wf")
    client.heartbeat_worker({"worker_id": "w"})
    client.token, client.namespace = "two", "orders"
    client.describe_workflow("wf")
    client.heartbeat_worker({"worker_id": "w"})
    client.worker_token = "wrk"
    client.heartbeat_worker({"worker_id": "w"})
    client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=0)
    client.describe_workflow("wf")
    sent = [(call.request.headers["Authorization"], call.request.headers["X-Namespace"], call.request.headers["Accept"])
            for call in responses.calls]
    poll_accept = "application/vnd.durable-workflow.poll.v1+json, application/json;q=0.9"
    assert sent == [("Bearer one", "default", "application/json"), ("Bearer one", "default", "application/json"),
                    ("Bearer two", "orders", "application/json"), ("Bearer two", "orders", "application/json"),
                    ("Bearer wrk", "orders", "application/json"), ("Bearer wrk", "orders", poll_accept),
                    ("Bearer two", "orders", "application/json")]


@pytest.mark.parametrize("params", [
    {"page_size": 1000, "wait_new_event": "1", "next_page_token": None},
    {"next_page_token": "MTI=", "query": "a b&c", "status": "running"},
    {"flag": True, "ratio": 1.5, "ids": ["a", "b c"], "empty": [], "raw": b"x y", "accent": "\u00fcn"},
    {"none": None},
    {"empty": []},
])
def test_query_strings_are_urlencodes_own(params: Dict[str, Any]) -> None:
    from urllib.parse import urlencode

    from sync_worker.client.transport import query_string

    kept = {key: value for key, value in params.items() if value is not None}
    assert query_string(params) == (urlencode(kept, doseq=True) if kept else None)


@responses.activate
def test_poll_body_and_empty_poll(client: Client) -> None:
    responses.post(f"{BASE}/api/worker/activity-tasks/poll", json={"task": None, "poll_status": "timeout"})
    task = client.poll_activity_task(worker_id="w1", task_queue="q", poll_request_id="activity-poll-1",
                                      timeout_seconds=99, build_id="b7")
    assert task is None
    call = responses.calls[0]
    assert _body(call) == {"worker_id": "w1", "task_queue": "q", "poll_request_id": "activity-poll-1",
                           "timeout_seconds": 60, "build_id": "b7"}
    assert "application/vnd.durable-workflow.poll.v1+json" in call.request.headers["Accept"]


@responses.activate
def test_poll_envelope_is_unwrapped_and_inner_errors_are_typed(client: Client) -> None:
    envelope = {"schema": "durable-workflow.poll-transport.v1", "status": 429, "headers": {"retry-after": "3"},
                "body": {"reason": "long_poll_capacity_exhausted", "poll_status": "long_poll_capacity_exhausted",
                         "task": None, "task_kind": "workflow_task", "task_queue": "q", "retryable": True,
                         "retry_after_seconds": 3}}
    responses.post(f"{BASE}/api/worker/workflow-tasks/poll", body="  \n " + json.dumps(envelope),
                   content_type="application/vnd.durable-workflow.poll.v1+json")
    with pytest.raises(errors.BackpressureError) as caught:
        client.poll_workflow_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=1)
    assert poll_capacity_delay(caught.value, "workflow_task", "q") == 3
    assert poll_capacity_delay(caught.value, "activity_task", "q") is None


def test_tokens_by_plane() -> None:
    only_control = Client(BASE, control_token="c")
    with pytest.raises(ValueError, match="worker"):
        only_control.heartbeat_worker({"worker_id": "w"})
    only_worker = Client(BASE, worker_token="w")
    with pytest.raises(ValueError, match="control"):
        only_worker.describe_workflow("wf")
    for bad in ("http://x/api", "http://x/?a=1", "ftp://x", "http://x#frag"):
        with pytest.raises(ValueError):
            Client(bad)
    assert "secret" not in repr(Client(BASE, token="secret"))


@responses.activate
def test_discovery_prefers_worker_token_and_caches() -> None:
    responses.get(f"{BASE}/api/cluster/info", json={"limits": {"max_payload_bytes": 65536}})
    client = Client(BASE, control_token="ctl", worker_token="wrk", control_plane_transport="requests")
    assert client.cluster_info()["limits"]["max_payload_bytes"] == 65536
    client.cluster_info()
    assert len(responses.calls) == 1
    headers = responses.calls[0].request.headers
    assert headers["Authorization"] == "Bearer wrk"
    assert headers["X-Durable-Workflow-Protocol-Version"] == "1.20"
    assert client.failure_report_limit() == 65536
    assert Client(BASE, failure_report_limit_bytes=5_000_000).failure_report_limit() == 1_048_576


@pytest.mark.parametrize("status,body,operation,expected", [
    (401, {"reason": "unauthorized"}, "", errors.Unauthorized),
    (403, {"reason": "forbidden"}, "", errors.Forbidden),
    (404, {"reason": "namespace_not_found"}, "", errors.NamespaceNotFound),
    (404, {"reason": "workflow_not_found"}, "", errors.WorkflowNotFound),
    (404, {}, "workflow.describe", errors.WorkflowNotFound),
    (404, {"reason": "task_not_found"}, "activity-tasks.complete", errors.NotFound),
    (404, {"reason": "unknown_signal"}, "workflow.signal", errors.SignalFailed),
    (404, {"reason": "rejected_unknown_query"}, "workflow.query", errors.QueryFailed),
    (409, {"reason": "duplicate_not_allowed"}, "workflow.start", errors.WorkflowAlreadyStarted),
    (409, {"reason": "run_not_active"}, "workflow.signal", errors.SignalFailed),
    (409, {"reason": "query_rejected"}, "workflow.query", errors.QueryFailed),
    (409, {"reason": "task_not_leased"}, "workflow-tasks.complete", errors.Conflict),
    (422, {"reason": "validation_failed", "errors": {"x": ["bad"]}}, "", errors.InvalidArgument),
    (422, {"reason": "invalid_signal_arguments"}, "", errors.SignalFailed),
    (429, {"reason": "busy", "retry_after_seconds": 4}, "", errors.BackpressureError),
    (503, {"reason": "backend_unavailable"}, "", errors.ServerUnavailable),
    (504, {"reason": "query_worker_timeout"}, "workflow.query", errors.QueryFailed),
    (500, "<html>oops</html>", "", errors.ServerError),
])
def test_status_mapping(status: int, body: Any, operation: str, expected: type) -> None:
    from sync_worker.client.transport import raise_for_status

    with pytest.raises(errors.ServerError) as caught:
        raise_for_status(status, body, route="/x", operation=operation)
    assert type(caught.value) is expected
    assert caught.value.status == status
    if isinstance(body, dict):
        assert caught.value.reason() == body.get("reason")
        if "retry_after_seconds" in body:
            assert caught.value.retry_after_seconds == body["retry_after_seconds"]
    raise_for_status(200, {}, route="/x")


@responses.activate
def test_failure_reports_are_bounded_before_sending(client: Client) -> None:
    responses.post(f"{BASE}/api/worker/activity-tasks/t1/fail", json={"outcome": "failed"})
    client.fail_activity_task("t1", activity_attempt_id="a1", lease_owner="w1", failure={
        "message": "m" * 200_000, "stack_trace": "s" * 300_000, "type": "ValueError", "non_retryable": True})
    raw = responses.calls[0].request.body
    assert len(raw) <= 1_048_576
    sent = json.loads(raw)
    assert sent["failure"]["type"] == "ValueError" and sent["failure"]["non_retryable"] is True
    assert len(sent["failure"]["message"].encode()) == 63_488
    assert sent["failure"]["stack_trace"].endswith("\n[truncated]")
    assert sent["failure"]["diagnostics"]["failure_report"]["omitted_fields"] == {
        "message": 200_000, "stack_trace": 300_000}


@responses.activate
def test_deregistration_receipts(client: Client) -> None:
    token = "0123456789abcdef0123456789abcdef"
    responses.post(f"{BASE}/api/worker/registrations/w1/deregister", json={
        "worker_id": "w1", "outcome": "deregistered", "recovered_workflow_task_count": 0,
        "registration_token": token})
    assert client.deregister_worker_fenced("w1", token, timeout=5)["outcome"] == "deregistered"
    assert _body(responses.calls[0]) == {"registration_token": token}

    responses.post(f"{BASE}/api/worker/registrations/w2/deregister", json={"worker_id": "w2", "outcome": "x"})
    with pytest.raises(errors.ServerError) as caught:
        client.deregister_worker_fenced("w2", token, timeout=5)
    assert caught.value.reason() == "invalid_worker_deregistration_response"

    responses.delete(f"{BASE}/api/worker/registrations/w3", status=404, json={"reason": "worker_not_found"})
    assert client.deregister_worker_legacy("w3", timeout=5)["outcome"] == "already_deregistered"
    assert responses.calls[-1].request.body is None


@responses.activate
def test_unencodable_activity_result_is_refused_before_sending(client: Client) -> None:
    import datetime

    with pytest.raises(errors.PayloadEncodeError, match=r"\$\.when: datetime is not a payload value"):
        client.complete_activity_task("t", activity_attempt_id="a", lease_owner="w",
                                      result={"when": datetime.datetime.now()})
    assert len(responses.calls) == 0
