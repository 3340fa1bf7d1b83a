"""Worker-plane calls are namespace-checked, role tokens split the planes, and the leases and
timeouts tests and demos need short are flags of ``sync-worker devserver`` (issue 9)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from typing import Dict, Iterator

import pytest
import requests

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import CONTROL, WORKER, Raw


@pytest.fixture
def two_namespaces() -> Iterator[DevServer]:
    with DevServer(namespaces=("default", "team-a")) as server:
        yield server


def test_activity_task_calls_are_refused_from_another_namespace(two_namespaces: DevServer) -> None:
    raw = Raw(two_namespaces.url)
    other = Raw(two_namespaces.url, namespace="team-a")
    raw.start("wf-ns")
    task = raw.poll()
    assert raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                                "start_to_close_timeout": 30}]).status_code == 200
    act = raw.poll(kind="activity")
    claim = {"activity_attempt_id": act["activity_attempt_id"], "lease_owner": act["lease_owner"]}
    base = f"/worker/activity-tasks/{act['task_id']}"
    for action, body in (("heartbeat", claim), ("complete", {**claim, "result": envelope(1)}),
                         ("fail", {**claim, "failure": {"message": "x"}})):
        resp = other.call("POST", f"{base}/{action}", body, plane="worker")
        assert (resp.status_code, resp.json()["reason"]) == (404, "task_not_found"), (action, resp.text)
    assert "ActivityCompleted" not in raw.types("wf-ns")
    assert raw.call("POST", f"{base}/heartbeat", claim, plane="worker").status_code == 200
    assert raw.call("POST", f"{base}/complete", {**claim, "result": envelope(1)}, plane="worker").status_code == 200
    assert raw.types("wf-ns")[-1] == "ActivityCompleted"


def test_workflow_task_calls_are_refused_from_another_namespace(two_namespaces: DevServer) -> None:
    raw = Raw(two_namespaces.url)
    other = Raw(two_namespaces.url, namespace="team-a")
    raw.start("wf-ns2")
    task = raw.poll()
    body = {"lease_owner": task["lease_owner"], "workflow_task_attempt": task["workflow_task_attempt"],
            "commands": [{"type": "complete_workflow", "result": envelope(1)}]}
    resp = other.call("POST", f"/worker/workflow-tasks/{task['task_id']}/complete", body, plane="worker")
    assert (resp.status_code, resp.json()["reason"]) == (404, "task_not_found")
    assert raw.complete(task, body["commands"]).status_code == 200


def _headers(token: str, plane: str) -> Dict[str, str]:
    return {"Authorization": f"Bearer {token}", **(WORKER if plane == "worker" else CONTROL)}


@pytest.fixture
def role_server() -> Iterator[DevServer]:
    with DevServer(token="shared", worker_token="w-tok", control_token="c-tok") as server:
        yield server


def test_role_tokens_split_the_planes(role_server: DevServer) -> None:
    url = role_server.url + "/api"
    start = {"workflow_id": "wf-role", "workflow_type": "t", "task_queue": "q", "input": envelope([])}
    poll = {"worker_id": "w1", "task_queue": "q", "timeout_seconds": 0}
    assert requests.post(f"{url}/worker/register", json={"worker_id": "w1", "task_queue": "q"},
                         headers=_headers("w-tok", "worker"), timeout=5).status_code == 201
    # the worker credential cannot start or terminate workflows
    refused = requests.post(f"{url}/workflows", json=start, headers=_headers("w-tok", "control"), timeout=5)
    assert (refused.status_code, refused.json()["reason"]) == (403, "forbidden")
    assert requests.get(f"{url}/workflows", headers=_headers("w-tok", "control"), timeout=5).status_code == 403
    # the control credential cannot poll
    refused = requests.post(f"{url}/worker/workflow-tasks/poll", json=poll, headers=_headers("c-tok", "worker"),
                            timeout=5)
    assert (refused.status_code, refused.json()["reason"]) == (403, "forbidden")
    # each works on its own plane, and both may read cluster info
    assert requests.post(f"{url}/workflows", json=start, headers=_headers("c-tok", "control"),
                         timeout=5).status_code == 201
    task = requests.post(f"{url}/worker/workflow-tasks/poll", json={**poll, "timeout_seconds": 2},
                         headers=_headers("w-tok", "worker"), timeout=10).json()["task"]
    assert task is not None and task["workflow_id"] == "wf-role"
    for token in ("w-tok", "c-tok", "shared"):
        assert requests.get(f"{url}/cluster/info", headers=_headers(token, "worker"), timeout=5).status_code == 200
    # the shared development token still opens every plane; an unknown one is a 401
    assert requests.post(f"{url}/workflows/wf-role/terminate", json={}, headers=_headers("shared", "control"),
                         timeout=5).status_code == 200
    assert requests.get(f"{url}/workflows", headers=_headers("nope", "control"), timeout=5).status_code == 401


@pytest.mark.parametrize("header, status", [
    ("bearer shared", 200), ("BEARER shared", 200), ("Bearer   shared ", 200),  # RFC 9110: scheme case-insensitive
    ("Basic shared", 401), ("shared", 401), ("Bearer", 401), ("Bearer sharedX", 401), ("", 401),
])
def test_the_bearer_scheme_is_case_insensitive(role_server: DevServer, header: str, status: int) -> None:
    response = requests.get(role_server.url + "/api/workflows", headers={"Authorization": header, **CONTROL},
                            timeout=5)
    assert response.status_code == status, response.text


def test_sync_worker_client_with_role_tokens(role_server: DevServer) -> None:
    from sync_worker import Client

    client = Client(role_server.url, control_token="c-tok", worker_token="w-tok")
    client.start_workflow("t", workflow_id="wf-client-role", task_queue="q")
    client.register_worker({"worker_id": "w1", "task_queue": "q"})
    assert client.poll_workflow_task(worker_id="w1", task_queue="q", poll_request_id="p1",
                                     timeout_seconds=2) is not None
    swapped = Client(role_server.url, control_token="w-tok", worker_token="c-tok")
    from sync_worker.errors import Forbidden

    with pytest.raises(Forbidden):
        swapped.start_workflow("t", workflow_id="wf-client-role-2", task_queue="q")


def test_cli_role_tokens_from_the_environment_and_short_leases() -> None:
    env = dict(os.environ, DW_WORKER_TOKEN="env-w", DW_OPERATOR_TOKEN="env-c")
    env.pop("DURABLE_WORKFLOW_AUTH_TOKEN", None)
    env.pop("DW_AUTH_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from sync_worker.cli import main; main()", "devserver", "--port", "0",
         "--workflow-task-lease", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 20
        while url is None and time.monotonic() < deadline:
            found = re.search(r"listening on (http://\S+)", proc.stderr.readline())
            url = found.group(1) if found else None
        assert url is not None, "the dev server never logged its URL"
        api = url + "/api"
        start = {"workflow_id": "wf-lease", "workflow_type": "t", "task_queue": "q", "input": envelope([])}
        assert requests.post(f"{api}/workflows", json=start, headers=_headers("env-w", "control"),
                             timeout=5).status_code == 403
        assert requests.post(f"{api}/workflows", json=start, headers=_headers("env-c", "control"),
                             timeout=5).status_code == 201
        poll = {"worker_id": "w1", "task_queue": "q", "timeout_seconds": 5}
        for worker_id in ("w1", "w2"):
            assert requests.post(f"{api}/worker/register", json={"worker_id": worker_id, "task_queue": "q"},
                                 headers=_headers("env-w", "worker"), timeout=5).status_code == 201
        first = requests.post(f"{api}/worker/workflow-tasks/poll", json=poll, headers=_headers("env-w", "worker"),
                              timeout=10).json()["task"]
        assert first is not None
        leased_at = time.monotonic()
        # the worker "dies": with a one-second lease the task comes back within a few seconds, not a minute
        again = requests.post(f"{api}/worker/workflow-tasks/poll", json={**poll, "worker_id": "w2"},
                              headers=_headers("env-w", "worker"), timeout=15).json()["task"]
        assert again is not None and again["task_id"] == first["task_id"]
        assert again["workflow_task_attempt"] == first["workflow_task_attempt"] + 1
        assert time.monotonic() - leased_at < 8
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
