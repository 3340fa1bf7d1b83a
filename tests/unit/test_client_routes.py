"""Every Client route not covered by the fixture-shape tests: path, method, body and decoding."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any, Dict

import pytest
import responses

from sync_worker import errors, payloads
from sync_worker.client import Client

BASE = "http://dw.test"
API = BASE + "/api"

# The minimal cluster-info document the published SDK accepts (protocol §1.3).
CLUSTER_INFO: Dict[str, Any] = {
    "version": "dev-server",
    "control_plane": {"version": "2", "request_contract": {
        "schema": "durable-workflow.v2.control-plane-request.contract", "version": 1}},
    "worker_protocol": {"version": "1.20", "server_capabilities": {
        "query_tasks": True,
        "worker_deregistration_fencing": {
            "supported": True, "schema": "durable-workflow.v2.worker-deregistration.v1",
            "endpoint": "/worker/registrations/{workerId}/deregister", "receipt_retention_seconds": 3600}}},
    "auth_composition_contract": {
        "schema": "durable-workflow.v2.auth-composition.contract", "version": 1,
        "precedence": {"connection_values": ["flag", "env", "profile"], "profile_selection": ["flag", "env"]},
        "canonical_environment": {
            "server_url": "DURABLE_WORKFLOW_SERVER_URL", "namespace": "DURABLE_WORKFLOW_NAMESPACE",
            "auth_token": "DURABLE_WORKFLOW_AUTH_TOKEN", "tls_verify": "DURABLE_WORKFLOW_TLS_VERIFY",
            "profile": "DW_ENV"},
        "auth_material": {"token": {"status": "supported", "effective_config_value": "redacted"},
                          "mtls": {"status": "reserved"}, "signed_headers": {"status": "reserved"}},
        "effective_config": {"required_fields": ["server_url", "namespace", "profile", "auth", "tls", "identity"]},
        "redaction": {"never_echo": ["bearer_tokens", "private_keys", "raw_authorization_headers"]},
    },
    "limits": {"max_payload_bytes": 2097152},
}


def _body(index: int = -1) -> Any:
    raw = responses.calls[index].request.body
    return None if raw is None else json.loads(raw)


@pytest.fixture
def client() -> Client:
    # responses mocks requests, so the worker plane goes through it here; the e2e suite covers urllib3
    return Client(BASE, token="t", transport_retries=1, worker_plane_transport="requests",
                  control_plane_transport="requests")  # responses plays the server


@responses.activate
def test_health_ready_and_compatibility(client: Client) -> None:
    responses.get(f"{API}/health", json={"status": "serving"})
    responses.get(f"{API}/ready", json={"status": "ready"})
    responses.get(f"{API}/cluster/info", json=CLUSTER_INFO)
    assert client.health()["status"] == "serving"
    assert client.ready()["status"] == "ready"
    assert client.validate_worker_compatibility()["worker_protocol"]["version"] == "1.20"
    assert client.server_capabilities()["query_tasks"] is True


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["worker_protocol"].update(version="1.19"), "cannot serve requested"),
    (lambda d: d["worker_protocol"].update(version="2.30"), "cannot serve requested"),
    (lambda d: d["control_plane"].update(version="3"), "control_plane.version"),
    (lambda d: d.pop("auth_composition_contract"), "auth_composition_contract is missing"),
    (lambda d: d["auth_composition_contract"]["redaction"].update(never_echo=[]), "never_echo"),
    (lambda d: d["worker_protocol"]["server_capabilities"]["worker_deregistration_fencing"].pop("schema"),
     "fencing is advertised but incomplete"),
])
@responses.activate
def test_incompatible_servers_are_refused(client: Client, mutate: Any, needle: str) -> None:
    info = copy.deepcopy(CLUSTER_INFO)
    mutate(info)
    responses.get(f"{API}/cluster/info", json=info)
    with pytest.raises(RuntimeError, match="Server compatibility error") as caught:
        client.validate_worker_compatibility()
    assert needle in str(caught.value)


@responses.activate
def test_describe_and_result_follow_terminal_history(client: Client) -> None:
    output = {"n": 9007199254740993}
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r2", "status": "completed",
                                                "output": payloads.envelope(output), "memo": {"a": 1}})
    responses.get(f"{API}/workflows/wf1/runs/r2/history", json={
        "events": [{"event_type": "WorkflowStarted", "payload": {}},
                   {"event_type": "WorkflowCompleted", "payload": {"output": payloads.encode(output),
                                                                   "payload_codec": "avro"}}],
        "next_page_token": None})
    described = client.describe_workflow("wf1")
    assert (described.run_id, described.is_terminal, described.output, described.memo) == ("r2", True, output,
                                                                                              {"a": 1})
    assert client.get_workflow_handle("wf1").result(timeout=5) == output


@responses.activate
def test_a_completed_run_s_result_comes_from_its_output_envelope_without_a_history_read(client: Client) -> None:
    output = {"n": 9007199254740993, "s": "caf\u00e9"}
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r2", "status": "completed",
                                                "payload_codec": "avro", "output": output,
                                                "output_envelope": payloads.envelope(output)})
    assert client.get_result("wf1", timeout=5) == output
    assert [call.request.url.split("/api")[1] for call in responses.calls] == ["/workflows/wf1"]


@responses.activate
def test_a_describe_without_the_output_envelope_reads_the_history(client: Client) -> None:
    output = {"big": "x" * 10}
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r2", "status": "completed",
                                                "payload_codec": "avro"})
    responses.get(f"{API}/workflows/wf1/runs/r2/history", json={
        "events": [{"event_type": "WorkflowCompleted", "payload": {"output": payloads.encode(output),
                                                                   "payload_codec": "avro"}}],
        "next_page_token": None})
    assert client.get_result("wf1", timeout=5) == output
    assert [call.request.url.split("/api")[1].split("?")[0] for call in responses.calls] == [
        "/workflows/wf1", "/workflows/wf1/runs/r2/history"]


@pytest.mark.parametrize("event,expected", [
    ({"event_type": "WorkflowFailed", "payload": {"message": "boom", "exception_class": "app.Boom"}},
     errors.WorkflowFailed),
    ({"event_type": "WorkflowCancelled", "payload": {"reason": "stop"}}, errors.WorkflowCancelled),
    ({"event_type": "WorkflowTerminated", "payload": {"reason": "kill"}}, errors.WorkflowTerminated),
    ({"event_type": "WorkflowTimedOut", "payload": {}}, errors.WorkflowTimedOut),
])
@responses.activate
def test_result_raises_the_terminal_outcome(client: Client, event: Dict[str, Any], expected: type) -> None:
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "failed"})
    responses.get(f"{API}/workflows/wf1/runs/r1/history", json={"events": [event]})
    with pytest.raises(expected):
        client.get_result("wf1", timeout=5)


@responses.activate
def test_result_times_out_without_touching_the_run(client: Client) -> None:
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "running"})
    with pytest.raises(TimeoutError, match="status='running'"):
        client.get_result("wf1", timeout=0.3, poll_interval=0.1)
    assert all(call.request.method == "GET" for call in responses.calls)


@responses.activate
def test_runs_workers_and_standalone_activities(client: Client) -> None:
    responses.get(f"{API}/workflows/wf1/runs", json={"runs": [{"run_id": "r1"}, {"run_id": "r2"}]})
    assert [r["run_id"] for r in client.list_runs("wf1")] == ["r1", "r2"]
    responses.get(f"{API}/workers/w1", json={"worker_id": "w1"})
    responses.delete(f"{API}/workers/w1", json={"worker_id": "w1", "outcome": "deregistered"})
    assert client.describe_worker("w1")["worker_id"] == "w1"
    assert client.deregister_worker("w1")["outcome"] == "deregistered"

    responses.post(f"{API}/activities", json={"activity_id": "a1", "workflow_run_id": "h1"})
    receipt = client.start_activity("greet", "ada", task_queue="q", activity_id="a1",
                                    retry_policy={"max_attempts": 2, "backoff_seconds": [1]},
                                    start_to_close_timeout_seconds=30)
    assert receipt["activity_id"] == "a1"
    sent = _body()
    assert payloads.decode_envelope(sent["input"]) == ["ada"]
    assert sent["retry_policy"] == {"max_attempts": 2, "backoff_seconds": [1]}
    assert sent["start_to_close_timeout_seconds"] == 30
    # The workflow spelling of the timeouts is accepted too (seconds or a timedelta, rounded up).
    client.start_activity("greet", "ada", task_queue="q", activity_id="a1", start_to_close_timeout=60,
                          schedule_to_close_timeout=timedelta(minutes=2), heartbeat_timeout=2.5)
    sent = _body()
    assert (sent["start_to_close_timeout_seconds"], sent["schedule_to_close_timeout_seconds"],
            sent["heartbeat_timeout_seconds"]) == (60, 120, 3)
    with pytest.raises(TypeError, match="pass start_to_close_timeout_seconds or start_to_close_timeout, not both"):
        client.start_activity("greet", task_queue="q", start_to_close_timeout=1, start_to_close_timeout_seconds=1)
    with pytest.raises(TypeError, match="heartbeat_timeout must be a number of seconds or a timedelta"):
        client.start_activity("greet", task_queue="q", heartbeat_timeout="5s")  # type: ignore[arg-type]
    responses.get(f"{API}/activities/a1", json={"activity_id": "a1", "status": "completed",
                                                "result": payloads.envelope("hi ada")})
    assert client.get_activity_result("a1", timeout=5) == "hi ada"
    responses.get(f"{API}/activities", json={"activities": [], "activity_count": 0})
    assert client.list_activities(status="running")["activity_count"] == 0
    assert responses.calls[-1].request.params == {"status": "running"}


@responses.activate
def test_workflow_task_routes(client: Client) -> None:
    responses.post(f"{API}/worker/workflow-tasks/poll", json={"task": {"task_id": "t1", "workflow_task_attempt": 1}})
    task = client.poll_workflow_task(worker_id="w", task_queue="q", poll_request_id="wf-poll-1", timeout_seconds=35)
    assert task == {"task_id": "t1", "workflow_task_attempt": 1}
    assert _body()["history_page_size"] == 500 and _body()["timeout_seconds"] == 35
    for action in ("history", "complete", "fail", "heartbeat"):
        responses.post(f"{API}/worker/workflow-tasks/t1/{action}", json={"ok": action})
    page = client.workflow_task_history("t1", lease_owner="w", workflow_task_attempt=1, next_history_page_token="MA==")
    assert page == {"ok": "history"}
    assert _body() == {"next_history_page_token": "MA==", "lease_owner": "w", "workflow_task_attempt": 1}
    commands = [{"type": "complete_workflow", "result": payloads.envelope(1)}]
    client.complete_workflow_task("t1", lease_owner="w", workflow_task_attempt=1, commands=commands)
    assert _body() == {"lease_owner": "w", "workflow_task_attempt": 1, "commands": commands}
    with pytest.raises(ValueError):
        client.complete_workflow_task("t1", lease_owner="w", workflow_task_attempt=1, commands=[])
    failure = {"message": "Workflow task waiting for scheduled history.", "type": "WorkflowTaskWaitingForHistory"}
    client.fail_workflow_task("t1", lease_owner="w", workflow_task_attempt=1, failure=failure)
    assert _body()["failure"] == failure
    client.heartbeat_workflow_task("t1", lease_owner="w", workflow_task_attempt=1)
    assert _body() == {"lease_owner": "w", "workflow_task_attempt": 1}


@responses.activate
def test_terminal_workflow_failure_is_bounded_inside_complete(client: Client) -> None:
    responses.post(f"{API}/worker/workflow-tasks/t1/complete", json={})
    command = {"type": "fail_workflow", "message": "x" * 100_000, "exception_type": "Boom",
               "exception_class": "app.Boom", "exception": {"type": "Boom", "details": "d" * 70_000}}
    client.complete_workflow_task("t1", lease_owner="w", workflow_task_attempt=1, commands=[command])
    sent = _body()["commands"][0]
    assert sent["exception_type"] == "Boom" and sent["exception_class"] == "app.Boom"
    assert len(sent["message"].encode()) <= 63_488 and "[truncated" in sent["message"]


@responses.activate
def test_activity_and_query_task_routes(client: Client) -> None:
    responses.post(f"{API}/worker/activity-tasks/t9/complete", json={})
    responses.post(f"{API}/worker/activity-tasks/t9/heartbeat", json={"cancel_requested": False, "can_continue": True})
    client.complete_activity_task("t9", activity_attempt_id="a9", lease_owner="w", result={"ok": b"\x00"})
    assert payloads.decode_envelope(_body()["result"]) == {"ok": b"\x00"}
    answer = client.heartbeat_activity_task("t9", activity_attempt_id="a9", lease_owner="w", details={"pct": 5})
    assert answer["can_continue"] is True
    assert _body() == {"activity_attempt_id": "a9", "lease_owner": "w", "details": {"pct": 5}}

    responses.post(f"{API}/worker/query-tasks/poll", json={"task": None})
    assert client.poll_query_task(worker_id="w", task_queue="q", poll_request_id="query-poll-1",
                                  timeout_seconds=0) is None
    assert _body()["timeout_seconds"] == 0
    responses.post(f"{API}/worker/query-tasks/q1/fail", json={})
    failure = {"message": "no handler", "reason": "rejected_unknown_query"}
    client.fail_query_task("q1", lease_owner="w", query_task_attempt=2, failure=failure)
    assert _body() == {"lease_owner": "w", "query_task_attempt": 2, "failure": failure}


@responses.activate
def test_registration_and_heartbeat_pass_the_runtime_body(client: Client) -> None:
    ack = {"worker_id": "w1", "registered": True, "registration_token": "a" * 32, "heartbeat_interval_seconds": 30}
    responses.post(f"{API}/worker/register", json=ack)
    responses.post(f"{API}/worker/heartbeat", json={"heartbeat_interval_seconds": 15})
    body = {"worker_id": "w1", "task_queue": "q", "runtime": "python", "capability_manifest": {}}
    assert client.register_worker(body) == ack
    assert _body() == body
    assert client.heartbeat_worker({"worker_id": "w1"})["heartbeat_interval_seconds"] == 15


def test_ids_are_percent_encoded_in_paths() -> None:
    from sync_worker.client.base import segment

    assert segment("order-231") == "order-231"
    assert segment("a/b c") == "a%2Fb%20c"


@responses.activate
def test_task_ids_in_outcome_paths_are_escaped_unless_url_safe(client: Client) -> None:
    for task_id, in_path in (("t-1_a.b~c", "t-1_a.b~c"), ("a/b c", "a%2Fb%20c"), ("é:1", "%C3%A9%3A1")):
        responses.post(f"{API}/worker/activity-tasks/{in_path}/complete", json={"ok": True})
        assert client.complete_activity_task(task_id, activity_attempt_id="a", lease_owner="w", result=None) == {
            "ok": True}
        assert responses.calls[-1].request.url == f"{API}/worker/activity-tasks/{in_path}/complete"
    responses.post(f"{API}/worker/activity-tasks/t2/fail", json=["not", "an", "object"])
    assert client.fail_activity_task("t2", activity_attempt_id="a", lease_owner="w", failure={"message": "x"}) == {}


@responses.activate
def test_append_message_stream(client: Client) -> None:
    responses.post(f"{API}/workflows/wf1/message-streams/inbox/messages", json={"outcome": "appended"})
    receipt = client.append_message_stream("wf1", "inbox", {"n": 1}, message_id="m-1")
    assert receipt == {"outcome": "appended", "message_id": "m-1"}
    assert _body() == {"message_id": "m-1", "input": payloads.envelope([{"n": 1}])}
