"""A tiny raw-HTTP client for poking the dev server's wire protocol directly in tests."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import requests

from sync_worker.payloads import envelope

WORKER = {"X-Durable-Workflow-Protocol-Version": "1.20"}
CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2"}


class Raw:
    def __init__(self, url: str, namespace: str = "default") -> None:
        self.url = url
        self.session = requests.Session()
        self.namespace = namespace
        #: Workers this client registered (a poll needs a registration, as on the real server).
        self.registered: Set[Tuple[str, str]] = set()

    def call(self, method: str, path: str, body: Any = None, *, plane: str = "control",
             headers: Optional[Dict[str, str]] = None, timeout: float = 15) -> requests.Response:
        h = {**(WORKER if plane == "worker" else CONTROL), "X-Namespace": self.namespace, **(headers or {})}
        if path.endswith("-tasks/poll") and isinstance(body, dict):
            self.ensure_registered(body.get("worker_id"), body.get("task_queue"), h)
        elif path == "/worker/register" and isinstance(body, dict) and isinstance(body.get("worker_id"), str):
            self.registered.add((h.get("X-Namespace", self.namespace), body["worker_id"]))
        return self.session.request(method, f"{self.url}/api{path}", json=body, headers=h, timeout=timeout)

    def ensure_registered(self, worker_id: Any, task_queue: Any, headers: Dict[str, str]) -> None:
        """Register ``worker_id`` once before its first poll (tests about the wire, not registration)."""
        namespace = headers.get("X-Namespace", self.namespace)
        if not isinstance(worker_id, str) or not isinstance(task_queue, str):
            return
        if (namespace, worker_id) in self.registered:
            return
        self.registered.add((namespace, worker_id))
        self.session.post(f"{self.url}/api/worker/register", json={"worker_id": worker_id, "task_queue": task_queue},
                          headers={**headers, **WORKER}, timeout=15)

    def ok(self, method: str, path: str, body: Any = None, *, plane: str = "control") -> Any:
        resp = self.call(method, path, body, plane=plane)
        assert resp.status_code < 300, (resp.status_code, resp.text)
        return resp.json()

    # -- conveniences ----------------------------------------------------------------------------
    def start(self, workflow_id: str, workflow_type: str = "t", queue: str = "q", args: Any = None) -> Any:
        return self.ok("POST", "/workflows", {"workflow_id": workflow_id, "workflow_type": workflow_type,
                                              "task_queue": queue, "input": envelope(args or [])})

    def poll(self, queue: str = "q", worker_id: str = "w1", timeout: int = 2, kind: str = "workflow",
             **extra: Any) -> Any:
        return self.ok("POST", f"/worker/{kind}-tasks/poll",
                       {"worker_id": worker_id, "task_queue": queue, "timeout_seconds": timeout, **extra},
                       plane="worker")["task"]

    def complete(self, task: Dict[str, Any], commands: List[Dict[str, Any]]) -> requests.Response:
        return self.call("POST", f"/worker/workflow-tasks/{task['task_id']}/complete",
                         {"lease_owner": task["lease_owner"], "workflow_task_attempt": task["workflow_task_attempt"],
                          "commands": commands}, plane="worker")

    def fail(self, task: Dict[str, Any], failure: Dict[str, Any]) -> requests.Response:
        return self.call("POST", f"/worker/workflow-tasks/{task['task_id']}/fail",
                         {"lease_owner": task["lease_owner"], "workflow_task_attempt": task["workflow_task_attempt"],
                          "failure": failure}, plane="worker")

    def history(self, workflow_id: str) -> List[Dict[str, Any]]:
        run_id = self.ok("GET", f"/workflows/{workflow_id}")["run_id"]
        return list(self.ok("GET", f"/workflows/{workflow_id}/runs/{run_id}/history")["events"])

    def types(self, workflow_id: str) -> List[str]:
        return [e["event_type"] for e in self.history(workflow_id)]
