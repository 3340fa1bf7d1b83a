"""An in-memory stand-in for the worker plane of ``Client`` (no HTTP).

Used only where the brief allows a fake (the workflow-task path with a tiny fake
registry, and shutdown edge cases that a real server cannot be made to produce on
demand). Everything else runs end to end against the dev server.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from sync_worker.cancel import CancelToken
from sync_worker.errors import WorkerShutdown

TOKEN = "0123456789abcdef0123456789abcdef"


class FakeClient:
    namespace = "default"
    timeout = 5.0
    transport_retries = 1

    def __init__(self, *, fenced: bool = True, query_tasks: bool = False) -> None:
        self.fenced = fenced
        self.query_tasks = query_tasks
        self.lock = threading.Lock()
        self.calls: List[tuple] = []
        self.activity_tasks: queue.Queue[Dict[str, Any]] = queue.Queue()
        self.workflow_tasks: queue.Queue[Dict[str, Any]] = queue.Queue()
        self.query_tasks_queue: queue.Queue[Dict[str, Any]] = queue.Queue()
        self.register_error: Optional[BaseException] = None
        self.deregister_error: Optional[BaseException] = None
        self.complete_errors: List[BaseException] = []
        self.poll_errors: List[BaseException] = []

    def record(self, *call: Any) -> None:
        with self.lock:
            self.calls.append(call)

    def names(self) -> List[str]:
        with self.lock:
            return [c[0] for c in self.calls]

    def find(self, name: str) -> List[tuple]:
        with self.lock:
            return [c for c in self.calls if c[0] == name]

    # discovery / registration
    def validate_worker_compatibility(self, *, refresh: bool = True) -> Dict[str, Any]:
        self.record("cluster_info")
        return {}

    def server_capabilities(self) -> Dict[str, Any]:
        caps: Dict[str, Any] = {"query_tasks": self.query_tasks}
        if self.fenced:
            caps["worker_deregistration_fencing"] = {"supported": True}
        return caps

    def register_worker(self, body: Dict[str, Any], *, cancel: Any = None) -> Dict[str, Any]:
        self.record("register", body)
        if self.register_error is not None:
            raise self.register_error
        return {"worker_id": body["worker_id"], "registered": True, "registration_token": TOKEN}

    def heartbeat_worker(self, body: Dict[str, Any], *, cancel: Any = None) -> Dict[str, Any]:
        self.record("heartbeat", body)
        return {}

    def deregister_worker_fenced(self, worker_id: str, token: str, *, timeout: float) -> Dict[str, Any]:
        self.record("deregister_fenced", worker_id, token)
        if self.deregister_error is not None:
            raise self.deregister_error
        return {"worker_id": worker_id, "outcome": "deregistered", "registration_token": token}

    def deregister_worker_legacy(self, worker_id: str, *, timeout: float) -> Dict[str, Any]:
        self.record("deregister_legacy", worker_id)
        return {"worker_id": worker_id, "outcome": "deregistered"}

    def clone(self) -> FakeClient:
        return self

    def close(self) -> None:
        self.record("close")

    # polls
    def _poll(self, source: queue.Queue[Dict[str, Any]], kind: str, cancel: Optional[CancelToken]) -> Any:
        self.record("poll", kind, time.monotonic())
        with self.lock:
            error = self.poll_errors.pop(0) if self.poll_errors and kind == "activity" else None
        if error is not None:
            raise error
        while True:
            if cancel is not None and cancel.cancelled:
                raise WorkerShutdown("stop")
            try:
                return source.get(timeout=0.05)
            except queue.Empty:
                continue

    def poll_activity_task(self, *, cancel: Optional[CancelToken] = None, **kw: Any) -> Any:
        return self._poll(self.activity_tasks, "activity", cancel)

    def poll_workflow_task(self, *, cancel: Optional[CancelToken] = None, **kw: Any) -> Any:
        return self._poll(self.workflow_tasks, "workflow", cancel)

    def poll_query_task(self, *, cancel: Optional[CancelToken] = None, **kw: Any) -> Any:
        return self._poll(self.query_tasks_queue, "query", cancel)

    # outcomes
    def complete_activity_task(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("complete_activity", task_id, kw["result"])
        return {}

    def fail_activity_task(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("fail_activity", task_id, kw["failure"])
        return {}

    def heartbeat_activity_task(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("heartbeat_activity", task_id)
        return {}

    def workflow_task_history(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        token = kw["next_history_page_token"]
        self.record("history", task_id, token)
        if token == "loop":
            return {"history_events": [], "next_history_page_token": "loop"}
        return {"history_events": [{"event_type": f"page-{token}"}], "next_history_page_token": None}

    def complete_workflow_task(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("complete_workflow", task_id, kw["commands"])
        with self.lock:
            error = self.complete_errors.pop(0) if self.complete_errors else None
        if error is not None:
            raise error
        return {}

    def fail_workflow_task(self, task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("fail_workflow", task_id, kw["failure"])
        return {}

    def complete_query_task(self, query_task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("complete_query", query_task_id, kw["result"])
        return {}

    def fail_query_task(self, query_task_id: str, **kw: Any) -> Dict[str, Any]:
        self.record("fail_query", query_task_id, kw["failure"])
        return {}


def in_thread(call: Callable[[], Any]) -> Tuple[threading.Thread, List[BaseException]]:
    """``call`` on a started daemon thread; the list gets whatever it raised."""
    raised: List[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised
