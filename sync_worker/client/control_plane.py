"""Control-plane routes of :class:`sync_worker.Client`: workflows, standalone activities, workers.

Payload fields (input, output, results) are Avro envelopes on the wire; these methods take and
return plain Python values. Blocking waits (:meth:`ControlPlane.get_result`) poll ``describe``
and read the terminal history event, and end with ``TimeoutError`` at their deadline without
touching the durable run.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from .. import errors, payloads
from ..cancel import CancelToken
from .base import ClientBase, segment
from .negotiation import update_wait_for_values
from .transport import RetryMode

TERMINAL_STATUSES = frozenset({"completed", "failed", "terminated", "canceled", "cancelled", "timed_out"})


def _decode_field(raw: Dict[str, Any], *names: str) -> Any:
    codec = raw.get("payload_codec")
    for name in names:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, dict) and "blob" in value:
            return payloads.decode_envelope(value)
        if isinstance(value, str) and codec == payloads.CODEC:
            return payloads.decode_envelope(value, codec=codec)
        return value
    return None


def _mapping(value: object) -> Dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


@dataclass(frozen=True)
class WorkflowExecution:
    """What ``describe`` says about a workflow's newest run."""

    workflow_id: str
    run_id: Optional[str]
    workflow_type: Optional[str]
    status: Optional[str]
    task_queue: Optional[str]
    namespace: Optional[str]
    memo: Dict[str, Any]
    search_attributes: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_body(cls, raw: Dict[str, Any]) -> WorkflowExecution:
        return cls(
            workflow_id=str(raw.get("workflow_id", "")),
            run_id=raw.get("run_id"),
            workflow_type=raw.get("workflow_type"),
            status=raw.get("status"),
            task_queue=raw.get("task_queue"),
            namespace=raw.get("namespace"),
            memo=_mapping(raw.get("memo")),
            search_attributes=_mapping(raw.get("search_attributes")),
            raw=raw,
        )

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def input(self) -> Any:
        return _decode_field(self.raw, "input_envelope", "input")

    @property
    def output(self) -> Any:
        return _decode_field(self.raw, "output_envelope", "output")


@dataclass(frozen=True)
class WorkflowList:
    workflows: List[WorkflowExecution]
    next_page_token: Optional[str]


class WorkflowHandle:
    """A workflow by id (and optionally one run): result, signal, query, update, cancel."""

    def __init__(self, client: ControlPlane, workflow_id: str, run_id: Optional[str] = None) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"WorkflowHandle({self.workflow_id!r}, run_id={self.run_id!r})"

    def describe(self) -> WorkflowExecution:
        return self.client.describe_workflow(self.workflow_id)

    def result(self, timeout: Optional[float] = None, *, poll_interval: float = 0.5) -> Any:
        """Block until the workflow's final run closes; follows continue-as-new."""
        return self.client.get_result(self.workflow_id, timeout=timeout, poll_interval=poll_interval)

    def signal(self, name: str, *args: Any, request_id: Optional[str] = None) -> Dict[str, Any]:
        return self.client.signal_workflow(self.workflow_id, name, args, request_id=request_id)

    def query(self, name: str, *args: Any) -> Any:
        return self.client.query_workflow(self.workflow_id, name, args)

    def update(self, name: str, *args: Any, wait_for: str = "completed") -> Dict[str, Any]:
        return self.client.update_workflow(self.workflow_id, name, args, wait_for=wait_for)

    def cancel(self, reason: Optional[str] = None) -> Dict[str, Any]:
        return self.client.cancel_workflow(self.workflow_id, reason=reason)

    def terminate(self, reason: Optional[str] = None) -> Dict[str, Any]:
        return self.client.terminate_workflow(self.workflow_id, reason=reason)


class ControlPlane(ClientBase):
    """Workflows, standalone activities and worker records, as an operator sees them."""

    # -- workflows -----------------------------------------------------------------------

    def start_workflow(
        self,
        workflow_type: str,
        *args: Any,
        task_queue: str,
        workflow_id: Optional[str] = None,
        execution_timeout_seconds: int = 3600,
        run_timeout_seconds: int = 600,
        duplicate_policy: Optional[str] = None,
        memo: Optional[Mapping[str, Any]] = None,
        search_attributes: Optional[Mapping[str, Any]] = None,
        build_id: Optional[str] = None,
    ) -> WorkflowHandle:
        """Start a workflow run; the positional ``args`` are its ``run(self, ctx, *args)`` arguments."""
        body: Dict[str, Any] = {
            "workflow_id": workflow_id or f"wf-{uuid.uuid4().hex}",
            "workflow_type": workflow_type,
            "task_queue": task_queue,
            "input": payloads.envelope(list(args)),
            "execution_timeout_seconds": int(execution_timeout_seconds),
            "run_timeout_seconds": int(run_timeout_seconds),
        }
        optional = {"duplicate_policy": duplicate_policy, "memo": dict(memo) if memo else None,
                    "search_attributes": dict(search_attributes) if search_attributes else None,
                    "build_id": build_id}
        body.update({k: v for k, v in optional.items() if v is not None})
        response = self._call("control", "POST", "/workflows", route="/workflows", body=body,
                              retry=RetryMode.CONNECT_ONLY, operation="workflow.start")
        response = response if isinstance(response, dict) else {}
        return WorkflowHandle(self, str(response.get("workflow_id") or body["workflow_id"]), response.get("run_id"))

    def get_workflow_handle(self, workflow_id: str, run_id: Optional[str] = None) -> WorkflowHandle:
        return WorkflowHandle(self, workflow_id, run_id)

    def describe_workflow(self, workflow_id: str, run_id: Optional[str] = None) -> WorkflowExecution:
        """The newest run (or the given run) of a workflow."""
        if run_id:
            path, route = f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}", "/workflows/{id}/runs/{runId}"
        else:
            path, route = f"/workflows/{segment(workflow_id)}", "/workflows/{id}"
        body = self._call("control", "GET", path, route=route, operation="workflow.describe")
        return WorkflowExecution.from_body(body if isinstance(body, dict) else {})

    def list_workflows(
        self,
        *,
        workflow_type: Optional[str] = None,
        status: Optional[str] = None,
        query: Optional[str] = None,
        page_size: Optional[int] = None,
        next_page_token: Optional[str] = None,
    ) -> WorkflowList:
        body = self._call("control", "GET", "/workflows", route="/workflows", params={
            "workflow_type": workflow_type, "status": status, "query": query, "page_size": page_size,
            "next_page_token": next_page_token}, operation="workflow.list")
        body = body if isinstance(body, dict) else {}
        items = [WorkflowExecution.from_body(item) for item in body.get("workflows", []) if isinstance(item, dict)]
        return WorkflowList(items, body.get("next_page_token"))

    def list_runs(self, workflow_id: str) -> List[Dict[str, Any]]:
        body = self._call("control", "GET", f"/workflows/{segment(workflow_id)}/runs", route="/workflows/{id}/runs",
                          operation="workflow.runs")
        runs = body.get("runs") if isinstance(body, dict) else None
        return [run for run in runs or [] if isinstance(run, dict)]

    def get_history(
        self, workflow_id: str, run_id: str, *, page_size: Optional[int] = None, next_page_token: Optional[str] = None
    ) -> Dict[str, Any]:
        """One page of a run's history: ``{"events": [...], "next_page_token": ...}``."""
        body = self._call(
            "control", "GET", f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}/history",
            route="/workflows/{id}/runs/{runId}/history",
            params={"page_size": page_size, "next_page_token": next_page_token}, operation="workflow.history",
        )
        return body if isinstance(body, dict) else {}

    def iter_history(self, workflow_id: str, run_id: str, *, page_size: int = 1000) -> Iterator[Dict[str, Any]]:
        """Every event of a run, paging as needed."""
        token: Optional[str] = None
        seen = set()
        while True:
            page = self.get_history(workflow_id, run_id, page_size=page_size, next_page_token=token)
            yield from (event for event in page.get("events", []) if isinstance(event, dict))
            token = page.get("next_page_token")
            if not token or token in seen:
                return
            seen.add(token)

    def get_result(
        self,
        workflow_id: str,
        *,
        run_id: Optional[str] = None,
        timeout: Optional[float] = None,
        poll_interval: float = 0.5,
        cancel: Optional[CancelToken] = None,
    ) -> Any:
        """Block until the run closes and return its result (or raise its failure).

        Without ``run_id`` this follows the newest run, so a continue-as-new chain yields
        the final run's result. Raises ``TimeoutError`` at ``timeout`` (the run goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            execution = self.describe_workflow(workflow_id, run_id)
            if execution.is_terminal and execution.run_id:
                return self._terminal_outcome(workflow_id, execution)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"workflow {workflow_id} has not reached a terminal state (status={execution.status!r}) "
                    f"after {timeout} s"
                )
            wait = poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic()))
            if cancel is not None:
                if cancel.wait(wait):
                    raise errors.WorkerShutdown("get_result interrupted")
            else:
                time.sleep(wait)

    def _terminal_outcome(self, workflow_id: str, execution: WorkflowExecution) -> Any:
        assert execution.run_id is not None
        events = list(self.iter_history(workflow_id, execution.run_id))
        for event in reversed(events):
            kind = event.get("event_type") or event.get("type")
            payload = _mapping(event.get("payload"))
            if kind == "WorkflowCompleted":
                return _decode_field(payload, "output", "result")
            if kind == "WorkflowFailed":
                raise errors.WorkflowFailed(str(payload.get("message") or "workflow failed"),
                                            payload.get("exception_class"))
            if kind == "WorkflowCancelled":
                raise errors.WorkflowCancelled(str(payload.get("reason") or "workflow was cancelled"))
            if kind == "WorkflowTerminated":
                raise errors.WorkflowTerminated(str(payload.get("reason") or "workflow was terminated"))
            if kind == "WorkflowTimedOut":
                raise errors.WorkflowTimedOut(str(payload.get("message") or "workflow execution timed out"))
        return execution.output

    def signal_workflow(
        self,
        workflow_id: str,
        name: str,
        args: Sequence[Any] = (),
        *,
        run_id: Optional[str] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Send a signal; ``request_id`` makes a repeated send the same signal."""
        body: Dict[str, Any] = {"request_id": request_id or f"sync-worker-signal-{uuid.uuid4().hex}"}
        if args:
            body["input"] = payloads.envelope(list(args))
        base = f"/workflows/{segment(workflow_id)}" + (f"/runs/{segment(run_id)}" if run_id else "")
        response = self._call("control", "POST", f"{base}/signal/{segment(name)}",
                              route="/workflows/{id}/signal/{name}", body=body, operation="workflow.signal")
        result = response if isinstance(response, dict) else {}
        result.setdefault("request_id", body["request_id"])
        return result

    def query_workflow(self, workflow_id: str, name: str, args: Sequence[Any] = (), *,
                       run_id: Optional[str] = None) -> Any:
        """Ask the workflow's worker to answer a query; returns the decoded value (exact int64)."""
        body: Dict[str, Any] = {}
        if args:
            body["input"] = payloads.envelope(list(args))
        base = f"/workflows/{segment(workflow_id)}" + (f"/runs/{segment(run_id)}" if run_id else "")
        response = self._call("control", "POST", f"{base}/query/{segment(name)}", route="/workflows/{id}/query/{name}",
                              body=body, retry=RetryMode.CONNECT_ONLY, operation="workflow.query")
        response = response if isinstance(response, dict) else {}
        envelope = response.get("result_envelope")
        if isinstance(envelope, dict) and "blob" in envelope:
            return payloads.decode_envelope(envelope)
        return response.get("result")

    def update_workflow(
        self,
        workflow_id: str,
        name: str,
        args: Sequence[Any] = (),
        *,
        wait_for: str = "completed",
        wait_timeout_seconds: Optional[int] = None,
        request_id: Optional[str] = None,
        run_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Apply an update; the response's ``result`` is decoded from its envelope."""
        allowed = update_wait_for_values(self.cluster_info())
        if allowed is not None and wait_for not in allowed:
            raise ValueError(f"wait_for={wait_for!r} is not one of the server's values {allowed}")
        body: Dict[str, Any] = {
            "wait_for": wait_for, "request_id": request_id or f"sync-worker-update-{uuid.uuid4().hex}"}
        if args:
            body["input"] = payloads.envelope(list(args))
        if wait_timeout_seconds is not None:
            body["wait_timeout_seconds"] = int(wait_timeout_seconds)
        base = f"/workflows/{segment(workflow_id)}" + (f"/runs/{segment(run_id)}" if run_id else "")
        response = self._call("control", "POST", f"{base}/update/{segment(name)}",
                              route="/workflows/{id}/update/{name}", body=body, operation="workflow.update")
        result = response if isinstance(response, dict) else {}
        envelope = result.get("result_envelope")
        if isinstance(envelope, dict) and "blob" in envelope:
            result["result"] = payloads.decode_envelope(envelope)
        elif isinstance(result.get("result"), dict) and "blob" in result["result"]:
            result["result"] = payloads.decode_envelope(result["result"])
        result.setdefault("request_id", body["request_id"])
        return result

    def append_message_stream(
        self, workflow_id: str, stream_name: str, *args: Any, message_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Append one message to a workflow's durable message stream (``message_id`` deduplicates)."""
        body: Dict[str, Any] = {"message_id": message_id or f"sync-worker-message-{uuid.uuid4().hex}"}
        if args:
            body["input"] = payloads.envelope(list(args))
        response = self._call(
            "control", "POST", f"/workflows/{segment(workflow_id)}/message-streams/{segment(stream_name)}/messages",
            route="/workflows/{id}/message-streams/{stream}/messages", body=body, operation="workflow.message_stream",
        )
        result = response if isinstance(response, dict) else {}
        result.setdefault("message_id", body["message_id"])
        return result

    def cancel_workflow(self, workflow_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """Cancel the workflow's current run (it closes as cancelled at once)."""
        return self._command(workflow_id, "cancel", reason)

    def terminate_workflow(self, workflow_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """Terminate the workflow's current run."""
        return self._command(workflow_id, "terminate", reason)

    def _command(self, workflow_id: str, action: str, reason: Optional[str]) -> Dict[str, Any]:
        body = {"reason": reason} if reason is not None else {}
        response = self._call("control", "POST", f"/workflows/{segment(workflow_id)}/{action}",
                              route=f"/workflows/{{id}}/{action}", body=body, retry=RetryMode.CONNECT_ONLY,
                              operation=f"workflow.{action}")
        return response if isinstance(response, dict) else {}

    # -- standalone activities -------------------------------------------------------------

    def start_activity(
        self,
        activity_type: str,
        *args: Any,
        task_queue: str,
        activity_id: Optional[str] = None,
        retry_policy: Optional[Mapping[str, Any]] = None,
        start_to_close_timeout_seconds: Optional[int] = None,
        schedule_to_start_timeout_seconds: Optional[int] = None,
        schedule_to_close_timeout_seconds: Optional[int] = None,
        heartbeat_timeout_seconds: Optional[int] = None,
        business_key: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Run one activity as a top-level durable job; returns the server's receipt."""
        body: Dict[str, Any] = {
            "activity_type": activity_type, "task_queue": task_queue, "input": payloads.envelope(list(args)),
            "activity_id": activity_id or f"act-{uuid.uuid4().hex}",
        }
        optional = {
            "retry_policy": dict(retry_policy) if retry_policy else None,
            "start_to_close_timeout_seconds": start_to_close_timeout_seconds,
            "schedule_to_start_timeout_seconds": schedule_to_start_timeout_seconds,
            "schedule_to_close_timeout_seconds": schedule_to_close_timeout_seconds,
            "heartbeat_timeout_seconds": heartbeat_timeout_seconds,
            "business_key": business_key,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        response = self._call("control", "POST", "/activities", route="/activities", body=body,
                              retry=RetryMode.CONNECT_ONLY, operation="activity.start")
        result = response if isinstance(response, dict) else {}
        result.setdefault("activity_id", body["activity_id"])
        return result

    def describe_activity(self, activity_id: str) -> Dict[str, Any]:
        """A standalone activity's state; ``result`` is decoded when present."""
        raw = self._call("control", "GET", f"/activities/{segment(activity_id)}", route="/activities/{id}",
                         operation="activity.describe")
        body = _mapping(raw)
        if body.get("result") is not None:
            body["result"] = _decode_field(body, "result")
        return body

    def list_activities(self, *, status: Optional[str] = None, page_size: Optional[int] = None,
                        next_page_token: Optional[str] = None) -> Dict[str, Any]:
        body = self._call("control", "GET", "/activities", route="/activities", params={
            "status": status, "page_size": page_size, "next_page_token": next_page_token},
            operation="activity.list")
        return body if isinstance(body, dict) else {}

    def get_activity_result(self, activity_id: str, *, timeout: Optional[float] = None,
                            poll_interval: float = 0.5) -> Any:
        """Block until a standalone activity closes; its result, or ``WorkflowFailed``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            described = self.describe_activity(activity_id)
            status = described.get("status")
            if status == "completed":
                return described.get("result")
            if status == "failed":
                raise errors.WorkflowFailed(f"standalone activity {activity_id} failed",
                                            described.get("exception_class"))
            if status in ("cancelled", "canceled"):
                raise errors.WorkflowCancelled(f"standalone activity {activity_id} was cancelled")
            if status == "terminated":
                raise errors.WorkflowTerminated(f"standalone activity {activity_id} was terminated")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"standalone activity {activity_id} still {status!r} after {timeout} s")
            time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic())))

    def cancel_activity(self, activity_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """Cancel a standalone activity (through its host run)."""
        return self._command(activity_id, "cancel", reason)

    # -- worker records (operator) --------------------------------------------------------------

    def list_workers(self, *, task_queue: Optional[str] = None, status: Optional[str] = None) -> Dict[str, Any]:
        body = self._call("control", "GET", "/workers", route="/workers",
                          params={"task_queue": task_queue, "status": status}, operation="worker.list")
        return body if isinstance(body, dict) else {}

    def describe_worker(self, worker_id: str) -> Dict[str, Any]:
        body = self._call("control", "GET", f"/workers/{segment(worker_id)}", route="/workers/{id}",
                          operation="worker.describe")
        return body if isinstance(body, dict) else {}

    def deregister_worker(self, worker_id: str) -> Dict[str, Any]:
        """Operator action: retire a worker record (not used by normal worker shutdown)."""
        body = self._call("control", "DELETE", f"/workers/{segment(worker_id)}", route="/workers/{id}",
                          retry=RetryMode.NEVER, operation="worker.deregister")
        return body if isinstance(body, dict) else {}
