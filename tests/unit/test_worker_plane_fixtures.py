"""The worker-plane control-plane fixtures (task polls, completions, failures, history, registration)
through our Client's worker-plane methods: path and body as the fixture's ``request`` (or
``sdk_python.request_body`` / ``expected_body`` with the payload decoded). ``responses`` plays
the server; the fixtures are read at run time.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List

import pytest
import responses

from sync_worker import payloads
from sync_worker.client import Client
from tests._fixtures import fixture_paths, load_fixture

BASE = "http://dw.test"
FOLDER = "sdk-python/tests/fixtures/control-plane"
WORKER_PLANE = ("workflow-task.", "query-task.", "activity.", "worker.register")


def _failure(kw: Dict[str, Any]) -> Dict[str, Any]:
    """The SDK's ``message=, failure_type=, ...`` keywords as the failure object our methods take."""
    names = {"message": "message", "reason": "reason", "failure_type": "type", "stack_trace": "stack_trace",
             "non_retryable": "non_retryable"}
    return {wire: kw[name] for name, wire in names.items() if name in kw}


CALLS: Dict[str, Callable[[Client, Dict[str, Any]], Any]] = {
    "workflow-task.poll": lambda c, kw: c.poll_workflow_task(
        worker_id=kw["worker_id"], task_queue=kw["task_queue"], poll_request_id="p-1", timeout_seconds=5),
    "workflow-task.complete": lambda c, kw: c.complete_workflow_task(
        kw["task_id"], lease_owner=kw["lease_owner"], workflow_task_attempt=kw["workflow_task_attempt"],
        commands=kw["commands"]),
    "workflow-task.fail": lambda c, kw: c.fail_workflow_task(
        kw["task_id"], lease_owner=kw["lease_owner"], workflow_task_attempt=kw["workflow_task_attempt"],
        failure=_failure(kw)),
    "workflow-task.history": lambda c, kw: c.workflow_task_history(
        kw["task_id"], lease_owner=kw["lease_owner"], workflow_task_attempt=kw["workflow_task_attempt"],
        next_history_page_token=kw["next_history_page_token"]),
    "query-task.poll": lambda c, kw: c.poll_query_task(
        worker_id=kw["worker_id"], task_queue=kw["task_queue"], poll_request_id="p-1", timeout_seconds=5),
    "query-task.complete": lambda c, kw: c.complete_query_task(
        kw["query_task_id"], lease_owner=kw["lease_owner"], query_task_attempt=kw["query_task_attempt"],
        result=kw["result"]),
    "query-task.fail": lambda c, kw: c.fail_query_task(
        kw["query_task_id"], lease_owner=kw["lease_owner"], query_task_attempt=kw["query_task_attempt"],
        failure=_failure(kw)),
    "activity.complete": lambda c, kw: c.complete_activity_task(
        kw["task_id"], activity_attempt_id=kw["activity_attempt_id"], lease_owner=kw["lease_owner"],
        result=kw["result"]),
    "activity.fail": lambda c, kw: c.fail_activity_task(
        kw["task_id"], activity_attempt_id=kw["activity_attempt_id"], lease_owner=kw["lease_owner"],
        failure=_failure(kw)),
    "worker.register": lambda c, kw: c.register_worker(dict(kw)),
}


def _fixtures() -> List[Any]:
    out = []
    for path in fixture_paths(FOLDER, "*-parity.json"):
        operation = json.loads(path.read_text(encoding="utf-8"))["operation"]
        if operation.startswith(WORKER_PLANE):
            out.append(pytest.param(path.name, id=operation))
    return out


def test_every_worker_plane_operation_is_covered() -> None:
    assert {p.id for p in _fixtures()} == set(CALLS)


@pytest.mark.parametrize("name", _fixtures())
@responses.activate
def test_worker_plane_request_matches_fixture(name: str) -> None:
    fixture = load_fixture(f"{FOLDER}/{name}")
    operation, request, sdk = fixture["operation"], fixture["request"], fixture["sdk_python"]
    client = Client(BASE, token="wt", namespace="orders-prod", transport_retries=1,
                    worker_plane_transport="requests")  # responses mocks requests; e2e covers urllib3
    responses.get(f"{BASE}/api/cluster/info", json={"worker_protocol": {"version": "1.20"},
                                                    "control_plane": {"version": "2"}})
    reply = fixture.get("response_body") or {}
    responses.add(request["method"], f"{BASE}/api{request['path']}", json=reply)
    CALLS[operation](client, dict(sdk.get("kwargs") or {}))
    calls = [c for c in responses.calls if not c.request.url.endswith("/cluster/info")]
    assert len(calls) == 1
    sent = calls[0].request
    assert (sent.method, sent.url) == (request["method"], f"{BASE}/api{request['path']}")
    assert sent.headers["X-Durable-Workflow-Protocol-Version"] == "1.20"
    assert sent.headers["X-Namespace"] == "orders-prod"
    body = json.loads(sent.body)
    if "request_body" in sdk:  # byte-exact, Avro envelope included
        assert body == sdk["request_body"]
    elif operation.endswith(".poll"):  # ours adds the poll's identity and hold time
        assert {k: body[k] for k in request["body"]} == request["body"]
        assert body["poll_request_id"] == "p-1" and body["timeout_seconds"] == 5
    elif "body" in request:
        assert body == request["body"]
    if "expected_body" in sdk:
        assert {k: body[k] for k in sdk["expected_body"]} == sdk["expected_body"]
    envelope = sdk.get("payload_envelope")
    if envelope is not None:
        assert payloads.decode_envelope(body[envelope["field"]]) == envelope["decoded"]
