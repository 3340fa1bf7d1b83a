"""Namespace administration and isolation on the dev server, over real sockets.

Isolation follows ServerParity ``namespace-isolation``: a workflow id stays reserved across
namespaces, and foreign reads, mutations and worker completions are refused before they touch
the original run.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Iterator

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30) as srv:
        yield srv


def _snapshot(raw: Raw, workflow_id: str) -> Dict[str, Any]:
    described = raw.ok("GET", f"/workflows/{workflow_id}")
    return {"status": described["status"], "run_id": described["run_id"], "events": raw.history(workflow_id)}


def test_create_describe_list_update_delete(server: DevServer) -> None:
    raw = Raw(server.url)
    created = raw.call("POST", "/namespaces", {"name": "Billing", "description": "Billing workflows",
                                               "retention_days": 90})
    assert created.status_code == 201
    body = created.json()
    assert {k: body[k] for k in ("name", "description", "retention_days", "status")} == {
        "name": "billing", "description": "Billing workflows", "retention_days": 90, "status": "active"}
    assert body["retention_mode"] == "bounded" and body["external_payload_storage"] is None
    assert raw.ok("GET", "/namespaces/BILLING") == body  # names are case-insensitive
    assert [n["name"] for n in raw.ok("GET", "/namespaces")["namespaces"]] == ["default", "billing"]

    updated = raw.ok("PUT", "/namespaces/billing", {"description": "Billing workflows and reports",
                                                   "retention_days": 120})
    assert (updated["description"], updated["retention_days"]) == ("Billing workflows and reports", 120)
    assert updated["created_at"] == body["created_at"]

    billing = Raw(server.url, namespace="billing")
    billing.start("wf-billing")
    billing.ok("POST", "/worker/register", {"worker_id": "w-b", "task_queue": "q"}, plane="worker")
    deleted = raw.ok("DELETE", "/namespaces/billing")
    assert deleted == {"name": "billing", "status": "deleted", "deleted": {
        "workflow_runs": 1, "workflow_schedules": 0, "search_attribute_definitions": 0,
        "workflow_worker_registrations": 1}}
    gone = billing.call("GET", "/workflows/wf-billing")
    assert (gone.status_code, gone.json()["reason"]) == (404, "namespace_not_found")
    assert raw.call("GET", "/namespaces/billing").json()["reason"] == "namespace_not_found"
    # the id is free again once its namespace is gone
    assert raw.call("POST", "/workflows", {"workflow_id": "wf-billing", "workflow_type": "t",
                                           "task_queue": "q"}).status_code == 201


@pytest.mark.parametrize("body, field", [
    ({}, "name"), ({"name": "has space"}, "name"), ({"name": "x" * 129}, "name"), ({"name": 7}, "name"),
    ({"name": "ok", "retention_days": 0}, "retention_days"), ({"name": "ok", "retention_days": 366}, "retention_days"),
    ({"name": "ok", "retention_days": "30"}, "retention_days"),
    ({"name": "ok", "retention_days": True}, "retention_days"),
    ({"name": "ok", "description": ["x"]}, "description"), ({"name": "ok", "description": "d" * 1001}, "description"),
])
def test_bad_input_is_a_422_with_the_field(server: DevServer, body: Dict[str, Any], field: str) -> None:
    resp = Raw(server.url).call("POST", "/namespaces", body)
    assert resp.status_code == 422
    assert resp.json()["reason"] == "validation_failed" and field in resp.json()["errors"]
    assert [n["name"] for n in Raw(server.url).ok("GET", "/namespaces")["namespaces"]] == ["default"]


def test_refusals(server: DevServer) -> None:
    raw = Raw(server.url)
    raw.ok("POST", "/namespaces", {"name": "team-a"})
    again = raw.call("POST", "/namespaces", {"name": "TEAM-A"})
    assert (again.status_code, again.json()["reason"]) == (409, "namespace_already_exists")
    assert raw.call("PUT", "/namespaces/ghost", {}).json()["reason"] == "namespace_not_found"
    assert raw.call("DELETE", "/namespaces/ghost").status_code == 404
    storage = raw.call("PUT", "/namespaces/team-a/external-storage", {"driver": "s3", "enabled": True})
    assert (storage.status_code, storage.json()["reason"]) == (422, "external_payload_storage_unsupported")
    raw.ok("DELETE", "/namespaces/team-a")
    last = raw.call("DELETE", "/namespaces/default")
    assert (last.status_code, last.json()["reason"]) == (409, "namespace_in_use")
    not_json = raw.session.post(f"{server.url}/api/namespaces", data="{", headers={
        "X-Durable-Workflow-Control-Plane-Version": "2", "Content-Type": "application/json"})
    assert (not_json.status_code, not_json.json()["reason"]) == (400, "malformed_json")


def test_foreign_control_requests_are_refused_before_touching_the_run(server: DevServer) -> None:
    admin = Raw(server.url)
    for name in ("ns-alpha", "ns-beta"):
        admin.ok("POST", "/namespaces", {"name": name, "description": "Shared namespace contract λ",
                                         "retention_days": 30})
    alpha, beta = Raw(server.url, "ns-alpha"), Raw(server.url, "ns-beta")
    alpha.start("peer-first")
    before = _snapshot(alpha, "peer-first")
    run_id = before["run_id"]
    refusals = [
        (beta.call("GET", "/workflows/peer-first"), 404, "instance_not_found"),
        (beta.call("GET", f"/workflows/peer-first/runs/{run_id}"), 404, "run_not_found"),
        (beta.call("GET", f"/workflows/peer-first/runs/{run_id}/history"), 404, "run_not_found"),
        (beta.call("POST", "/workflows/peer-first/cancel", {"reason": "foreign namespace must not cancel λ"}),
         404, "instance_not_found"),
        (beta.call("POST", "/workflows/peer-first/signal/go", {"input": envelope([])}), 404, "instance_not_found"),
        (beta.call("POST", "/workflows/peer-first/terminate", {}), 404, "instance_not_found"),
        (beta.call("POST", "/workflows", {"workflow_id": "peer-first", "workflow_type": "t", "task_queue": "q"}),
         409, "workflow_id_reserved_in_namespace"),
    ]
    for resp, status, reason in refusals:
        assert (resp.status_code, resp.json()["reason"]) == (status, reason), resp.text
        assert resp.json()["workflow_id"] == "peer-first"
    reserved = refusals[-1][0].json()
    assert reserved["outcome"] == "rejected_workflow_id_reserved_in_namespace"
    assert reserved["message"] == "Workflow [peer-first] is already reserved in another namespace."
    assert _snapshot(alpha, "peer-first") == before
    assert before["status"] == "pending" and [e["event_type"] for e in before["events"]] == [
        "StartAccepted", "WorkflowStarted"]


def test_foreign_worker_completions_are_refused_and_same_worker_id_is_per_namespace(server: DevServer) -> None:
    admin = Raw(server.url)
    for name in ("ns-alpha", "ns-beta"):
        admin.ok("POST", "/namespaces", {"name": name})
    alpha, beta = Raw(server.url, "ns-alpha"), Raw(server.url, "ns-beta")
    for side in (alpha, beta):
        assert side.ok("POST", "/worker/register", {"worker_id": "shared-worker", "task_queue": "q"},
                       plane="worker")["namespace"] in ("ns-alpha", "ns-beta")
    alpha.start("peer-first")
    beta.start("peer-second")
    assert beta.poll(worker_id="shared-worker", timeout=0)["workflow_id"] == "peer-second"
    task = alpha.poll(worker_id="shared-worker", timeout=1)
    assert task["workflow_id"] == "peer-first"
    commands = [{"type": "schedule_activity", "activity_type": "act", "arguments": envelope([]), "queue": "q"}]
    before = _snapshot(alpha, "peer-first")
    foreign = beta.complete(task, commands)
    assert (foreign.status_code, foreign.json()["reason"]) == (404, "task_not_found")
    assert _snapshot(alpha, "peer-first") == before
    assert alpha.complete(task, commands).status_code == 200

    act = alpha.poll(worker_id="shared-worker", timeout=1, kind="activity")
    body = {"activity_attempt_id": act["activity_attempt_id"], "lease_owner": act["lease_owner"],
            "result": envelope("done")}
    before = _snapshot(alpha, "peer-first")
    for op in ("complete", "fail"):
        refused = beta.call("POST", f"/worker/activity-tasks/{act['task_id']}/{op}",
                            {**body, "failure": {"message": "x"}}, plane="worker")
        assert (refused.status_code, refused.json()["reason"]) == (404, "task_not_found")
    assert _snapshot(alpha, "peer-first") == before
    assert alpha.call("POST", f"/worker/activity-tasks/{act['task_id']}/complete", body,
                      plane="worker").status_code == 200

    alpha.ok("DELETE", "/worker/registrations/shared-worker", plane="worker")
    heartbeat = beta.ok("POST", "/worker/heartbeat", {"worker_id": "shared-worker"}, plane="worker")
    assert heartbeat["acknowledged"] is True  # the first deregistration leaves the other namespace's worker


def test_created_namespaces_survive_a_restart() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "dw.sqlite3")
        with DevServer(db=db) as first:
            Raw(first.url).ok("POST", "/namespaces", {"name": "kept", "retention_days": 7})
            Raw(first.url, "kept").start("wf-kept")
        with DevServer(db=db) as second:
            assert Raw(second.url).ok("GET", "/namespaces/kept")["retention_days"] == 7
            assert Raw(second.url, "kept").ok("GET", "/workflows/wf-kept")["status"] == "pending"
