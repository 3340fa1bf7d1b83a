"""ServerParity ``namespace-isolation`` with the published SDK, unchanged: two named namespaces made
through its client, one task queue and the same worker id in both, authored ``parity.v1.one_activity``
runs, foreign control requests refused before they touch the original run, a workflow id reserved
across namespaces, and the first worker's shutdown leaving the second namespace's worker alone.

The case's parameters are those of durable-workflow/server ``tests/Fixtures/ServerParity/
namespace-isolation.json`` (not in the shared fixture copy, so they are written out here).
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

import requests
from durable_workflow import Client, Worker

from sync_worker.devserver import DevServer
from tests.conformance._parity_workflows import ACTIVITIES, WORKFLOWS
from tests.interop._sdk import run

INPUT = {"message": "namespace isolation λ", "count": 9007199254740993, "optional": None}
DESCRIPTION = "Shared namespace contract λ"
EXPECTED = ["StartAccepted", "WorkflowStarted", "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
            "WorkflowCompleted"]
QUEUE = "server-parity-v1"
CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2"}


def _get(server: DevServer, namespace: str, path: str) -> requests.Response:
    return requests.get(f"{server.url}/api{path}", headers={**CONTROL, "X-Namespace": namespace}, timeout=10)


def _state(server: DevServer, namespace: str, workflow_id: str) -> Dict[str, Any]:
    described = _get(server, namespace, f"/workflows/{workflow_id}").json()
    events = _get(server, namespace, f"/workflows/{workflow_id}/runs/{described['run_id']}/history").json()["events"]
    return {"workflow_id": described["workflow_id"], "namespace": described["namespace"],
            "status": described["status"], "run_id": described["run_id"], "events": events}


def test_namespace_isolation_with_the_published_sdk(dev_server: DevServer) -> None:
    root = "parity-namespace-isolation"
    names = [f"{root}-alpha", f"{root}-beta"]
    ids = [f"{root}-first", f"{root}-second"]
    worker_id = f"{root}-shared-worker"

    async def scenario() -> Tuple[List[Any], List[Dict[str, Any]], List[Tuple[int, Dict[str, Any]]], Any]:
        admin = Client(dev_server.url)
        created = [await admin.create_namespace(n.upper(), description=DESCRIPTION, retention_days=30) for n in names]
        described = [await admin.describe_namespace(n.upper()) for n in names]
        assert described == created
        listed = {n.name for n in (await admin.list_namespaces()).namespaces}
        assert set(names) <= listed
        clients = [Client(dev_server.url, namespace=n) for n in names]
        for client, workflow_id in zip(clients, ids):
            await client.start_workflow(workflow_type="parity.v1.one_activity", task_queue=QUEUE,
                                        workflow_id=workflow_id, input=[INPUT])
        before = [_state(dev_server, n, w) for n, w in zip(names, ids)]

        beta = {**CONTROL, "X-Namespace": names[1], "Content-Type": "application/json"}
        run_id = before[0]["run_id"]
        base = f"{dev_server.url}/api/workflows/{ids[0]}"
        refusals = [
            requests.get(base, headers=beta, timeout=10),
            requests.get(f"{base}/runs/{run_id}", headers=beta, timeout=10),
            requests.get(f"{base}/runs/{run_id}/history", headers=beta, timeout=10),
            requests.post(f"{base}/cancel", json={"reason": "foreign namespace must not cancel λ"}, headers=beta,
                          timeout=10),
            requests.post(f"{dev_server.url}/api/workflows", headers=beta, timeout=10,
                          json={"workflow_id": ids[0], "workflow_type": "parity.v1.one_activity", "task_queue": QUEUE}),
        ]
        after_refusals = [_state(dev_server, n, w) for n, w in zip(names, ids)]
        assert after_refusals == before

        workers = [Worker(c, task_queue=QUEUE, workflows=WORKFLOWS, activities=ACTIVITIES, worker_id=worker_id,
                          poll_timeout=2.0, shutdown_timeout=10.0) for c in clients]
        runners = [asyncio.create_task(w.run()) for w in workers]
        try:
            results = [await c.get_result(c.get_workflow_handle(w), timeout=30) for c, w in zip(clients, ids)]
            await workers[0].stop()
            await asyncio.wait_for(runners[0], timeout=15)
            heartbeat = requests.post(f"{dev_server.url}/api/worker/heartbeat", json={"worker_id": worker_id},
                                      headers={"X-Durable-Workflow-Protocol-Version": "1.20",
                                               "X-Namespace": names[1]}, timeout=10).json()
        finally:
            for worker, runner in zip(workers, runners):
                if not runner.done():
                    await worker.stop()
                    await asyncio.wait_for(runner, timeout=15)
            for client in [admin, *clients]:
                await client.aclose()
        return results, before, [(r.status_code, r.json()) for r in refusals], heartbeat

    results, before, refusals, heartbeat = run(scenario())
    assert results == [INPUT, INPUT]
    for namespace, workflow_id, original in zip(names, ids, before):
        assert original["status"] == "pending" and original["namespace"] == namespace
        assert [e["event_type"] for e in original["events"]] == ["StartAccepted", "WorkflowStarted"]
        final = _state(dev_server, namespace, workflow_id)
        assert final["run_id"] == original["run_id"] and final["events"][:2] == original["events"]
        assert [e["event_type"] for e in final["events"]] == EXPECTED
    assert [(status, body["reason"]) for status, body in refusals] == [
        (404, "instance_not_found"), (404, "run_not_found"), (404, "run_not_found"), (404, "instance_not_found"),
        (409, "workflow_id_reserved_in_namespace")]
    assert all(body["workflow_id"] == ids[0] for _, body in refusals)
    assert refusals[-1][1]["outcome"] == "rejected_workflow_id_reserved_in_namespace"
    assert refusals[-1][1]["message"] == f"Workflow [{ids[0]}] is already reserved in another namespace."
    assert heartbeat["acknowledged"] is True
    for name in names:
        metadata = _get(dev_server, "default", f"/namespaces/{name}").json()
        assert (metadata["name"], metadata["description"], metadata["status"], metadata["retention_mode"],
                metadata["retention_days"], metadata["external_payload_storage"]) == (
            name, DESCRIPTION, "active", "bounded", 30, None)
