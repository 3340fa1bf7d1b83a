"""Query tasks: ephemeral, in memory. A control-plane query waits (bounded) for a worker's answer."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Deque, Dict, Optional, Sequence, Tuple

from ..protocol import reasons
from .engine import Engine
from .store import Row
from .util import ApiError, iso, new_id

_KNOWN_409 = ("query_rejected", "query_workflow_state_unavailable", "query_payload_decode_failed",
              "query_workflow_type_not_registered", "query_result_encode_failed", "query_result_completion_failed")


class _QueryTask:
    def __init__(self, namespace: str, run: Row, name: str, arguments: Any, admitted_at: float,
                 deadline: float) -> None:
        self.query_task_id = new_id("qt")
        self.namespace = namespace
        self.run_id = run["run_id"]
        self.queue = run["task_queue"]
        self.workflow_type = str(run["workflow_type"])
        self.name = name
        self.arguments = arguments
        self.deadline = deadline  # wall clock: lease_expires_at for the worker
        self.admitted_at = admitted_at
        self.state = "queued"
        self.lease_owner: Optional[str] = None
        self.outcome: Optional[Dict[str, Any]] = None
        self.done = threading.Event()


class QueryBroker:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._queued: Dict[Tuple[str, str], Deque[_QueryTask]] = {}
        self._by_id: Dict[str, _QueryTask] = {}

    def ask(self, namespace: str, run: Row, name: str, arguments: Any) -> Dict[str, Any]:
        timeout = self.engine.config.query_timeout_seconds
        admitted = self.engine.now()
        task = _QueryTask(namespace, run, name, arguments, admitted, admitted + timeout)
        with self.engine.lock:
            self._by_id[task.query_task_id] = task
            self._queued.setdefault((namespace, task.queue), deque()).append(task)
            self.engine.notify(namespace, "query", task.queue)
        finished = task.done.wait(timeout)
        with self.engine.lock:
            self._by_id.pop(task.query_task_id, None)
            queue = self._queued.get((namespace, task.queue))
            if queue is not None and task in queue:
                queue.remove(task)
        if not finished or task.outcome is None:
            raise ApiError(504, "query_worker_timeout",
                           f"no worker answered query {name!r} within {timeout:g} s", query_name=name,
                           workflow_id=run["workflow_id"], run_id=run["run_id"])
        outcome = task.outcome
        if outcome["kind"] == "completed":
            return {"query_name": name, "workflow_id": run["workflow_id"], "run_id": run["run_id"],
                    "result": outcome.get("result"), "result_envelope": outcome.get("result_envelope")}
        failure = outcome.get("failure") or {}
        reason = failure.get("reason") or "query_rejected"
        message = failure.get("message") or "query rejected"
        extra = {"query_name": name, "workflow_id": run["workflow_id"], "run_id": run["run_id"],
                 "failure": failure}
        if reason in ("rejected_unknown_query", "query_not_found"):
            raise ApiError(404, "rejected_unknown_query", message, **extra)
        raise ApiError(409, reason if reason in _KNOWN_409 else "query_rejected", message, **extra)

    def in_flight(self) -> int:
        """Queries asked and not answered yet (queued or leased to a worker)."""
        with self.engine.lock:
            return len(self._by_id)

    def claim(self, namespace: str, queue: str, worker_id: str,
              workflow_types: Optional[Sequence[str]] = None) -> Optional[Dict[str, Any]]:
        """Lease the next live query on ``queue`` of a workflow type the worker registered (``None``: any).

        The caller holds the engine lock. Queries of other types stay queued, in order, for a
        worker that runs them (routed like workflow tasks, see ``routing``).
        """
        pending = self._queued.get((namespace, queue))
        if not pending:
            return None
        allowed = None if workflow_types is None else set(workflow_types)
        ts = self.engine.now()
        for stale in [t for t in pending if t.done.is_set() or t.deadline <= ts + 0.2]:
            pending.remove(stale)
        for task in list(pending):
            if allowed is not None and task.workflow_type not in allowed:
                continue
            pending.remove(task)
            run = self.engine.get_run(task.run_id)
            if run is None:
                continue
            task.state = "leased"
            task.lease_owner = worker_id
            return {
                "query_task_id": task.query_task_id, "query_task_attempt": 1, "lease_owner": worker_id,
                "task_queue": queue, "namespace": namespace, "lease_expires_at": iso(task.deadline),
                "query_admitted_at": iso(task.admitted_at), "query_deadline_at": iso(task.deadline),
                "server_time": iso(self.engine.now()), "workflow_type": run["workflow_type"], "query_name": task.name,
                "payload_codec": "avro", "workflow_arguments": run["input"], "query_arguments": task.arguments,
                "history_events": self.engine.history(run["run_id"]), "workflow_id": run["workflow_id"],
                "run_id": run["run_id"],
                **({"observability_context": run["observability_context"]}
                   if run.get("observability_context") is not None else {}),
            }
        return None

    def _leased(self, query_task_id: str, body: Dict[str, Any], namespace: Optional[str]) -> _QueryTask:
        task = self._by_id.get(query_task_id)
        if task is None or task.done.is_set() or (namespace is not None and task.namespace != namespace):
            raise ApiError(404, "query_task_not_found", f"query task {query_task_id} was not found or has ended")
        if task.state != "leased":
            raise ApiError(409, "query_task_not_leased", f"query task {query_task_id} is not leased")
        if body.get("lease_owner") != task.lease_owner:
            raise ApiError(409, reasons.LEASE_OWNER_MISMATCH, f"query task {query_task_id} is leased to another worker")
        if body.get("query_task_attempt", 1) != 1:
            raise ApiError(409, "query_task_attempt_mismatch", "query_task_attempt does not match")
        if task.deadline <= self.engine.now():
            raise ApiError(409, "query_task_timed_out", f"query task {query_task_id} timed out")
        return task

    def complete(self, query_task_id: str, body: Dict[str, Any], *, namespace: Optional[str] = None
                 ) -> Dict[str, Any]:
        from .payload_checks import check_payload

        with self.engine.lock:
            task = self._leased(query_task_id, body, namespace)
            envelope = body.get("result_envelope")
            if envelope is not None:
                check_payload(envelope, "result_envelope")
            task.outcome = {"kind": "completed", "result": body.get("result"), "result_envelope": envelope}
            task.done.set()
        return {"query_task_id": query_task_id, "outcome": "completed"}

    def fail(self, query_task_id: str, body: Dict[str, Any], *, namespace: Optional[str] = None) -> Dict[str, Any]:
        with self.engine.lock:
            task = self._leased(query_task_id, body, namespace)
            failure = body.get("failure") if isinstance(body.get("failure"), dict) else {}
            task.outcome = {"kind": "failed", "failure": failure}
            task.done.set()
        return {"query_task_id": query_task_id, "outcome": "failed"}
