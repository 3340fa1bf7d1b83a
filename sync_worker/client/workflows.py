"""Workflow routes of :class:`sync_worker.Client`: start, describe, list, runs, history, result.

Signatures follow ``durable_workflow.sync.Client`` 2.12 (keyword names, defaults, result
dataclasses); sync_worker's own conveniences (positional start arguments, ``iter_history``,
``list_runs``, ``get_result`` by id) sit beside them. Payloads are Avro envelopes on the wire;
these methods take and return plain Python values.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .. import errors, payloads
from ..cancel import CancelToken
from ..failure_reports import task_failure_note
from .base import ClientBase, segment
from .handles import WorkflowHandle
from .results import WorkflowExecution, WorkflowList, WorkflowRun, WorkflowRunList
from .results._common import body_of, decode_payload, mapping, opt_str
from .transport import RetryMode


def args_list(args: Optional[Sequence[Any]], what: str = "args") -> List[Any]:
    """The SDK's ``args``/``input``: ``None`` or a list of positional arguments."""
    if args is None:
        return []
    if isinstance(args, (list, tuple)):
        return list(args)
    raise TypeError(
        f"{what} must be a list of arguments (e.g. [{args!r}]), not {type(args).__name__}; "
        "this is the published SDK's meaning"
    )


class WorkflowsMixin(ClientBase):
    """Starting workflows and reading their state."""

    #: ``get_result`` waits on the run's history (``wait_new_event``) between describes; a client whose
    #: waits must stay in its ``cancel`` token's hands (the time-skipping environment's) turns it off.
    result_waits_on_history = True

    def start_workflow(
        self,
        workflow_type: str,
        *args: Any,
        task_queue: str,
        workflow_id: Optional[str] = None,
        input: Optional[List[Any]] = None,
        execution_timeout_seconds: int = 3600,
        run_timeout_seconds: int = 600,
        duplicate_policy: Optional[str] = None,
        memo: Optional[Mapping[str, Any]] = None,
        search_attributes: Optional[Mapping[str, Any]] = None,
        priority: Optional[int] = None,
        fairness_key: Optional[str] = None,
        fairness_weight: Optional[int] = None,
        build_id: Optional[str] = None,
        compatibility: Optional[str] = None,
    ) -> WorkflowHandle:
        """Start a workflow run and return its handle.

        Arguments go either positionally (``start_workflow("greeter", "ada", task_queue=...)``)
        or, as in the published SDK, as ``input=[...]``; not both. Without ``workflow_id`` a
        random one is chosen.
        """
        if args and input is not None:
            raise TypeError("pass the workflow's arguments positionally or as input=[...], not both")
        arguments = list(args) if args else args_list(input, "input")
        workflow_id = workflow_id or f"wf-{uuid.uuid4().hex}"
        body: Dict[str, Any] = {
            "workflow_id": workflow_id,
            "workflow_type": workflow_type,
            "task_queue": task_queue,
            "input": payloads.envelope(arguments) if arguments else {"codec": payloads.CODEC, "blob": _NO_ARGUMENTS},
            "execution_timeout_seconds": int(execution_timeout_seconds),
            "run_timeout_seconds": int(run_timeout_seconds),
        }
        # the optional fields that are set, in this order
        if duplicate_policy is not None:
            body["duplicate_policy"] = duplicate_policy
        if memo is not None:
            body["memo"] = dict(memo)
        if search_attributes is not None:
            body["search_attributes"] = dict(search_attributes)
        if priority is not None:
            body["priority"] = priority
        if fairness_key is not None:
            body["fairness_key"] = fairness_key
        if fairness_weight is not None:
            body["fairness_weight"] = fairness_weight
        if build_id is not None:
            body["build_id"] = build_id
        if compatibility is not None:
            body["compatibility"] = compatibility
        call = self._call_about("workflow.start", workflow_id, body, name=workflow_type,
                                workflow_type=workflow_type, task_queue=task_queue)
        response = body_of(self._workflow_call(call, lambda sent: self._call(
            "control", "POST", "/workflows", route="/workflows", body=sent, retry=RetryMode.CONNECT_ONLY,
            operation="workflow.start")))
        return WorkflowHandle(self,  # type: ignore[arg-type]  # the mixin is always part of a Client
                              str(response.get("workflow_id") or workflow_id), response.get("run_id"),
                              str(response.get("workflow_type") or workflow_type))

    def get_workflow_handle(self, workflow_id: str, run_id: Optional[str] = None,
                            workflow_type: str = "") -> WorkflowHandle:
        """A handle for an existing workflow (no request is made)."""
        return WorkflowHandle(self, workflow_id, run_id, workflow_type)  # type: ignore[arg-type]

    def describe_workflow(self, workflow_id: str, run_id: Optional[str] = None) -> WorkflowExecution:
        """The newest run of a workflow (or the given run)."""
        if run_id:
            path, route = f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}", "/workflows/{id}/runs/{runId}"
        else:
            path, route = f"/workflows/{segment(workflow_id)}", "/workflows/{id}"
        body = self._call("control", "GET", path, route=route, operation="workflow.describe")
        return WorkflowExecution.from_dict(body, workflow_id=workflow_id)

    def list_workflows(
        self,
        *,
        workflow_type: Optional[str] = None,
        status: Optional[str] = None,
        query: Optional[str] = None,
        page_size: Optional[int] = None,
        next_page_token: Optional[str] = None,
    ) -> WorkflowList:
        """One page of workflows; pass ``next_page_token`` back for the next."""
        body = body_of(self._call("control", "GET", "/workflows", route="/workflows", params={
            "workflow_type": workflow_type, "status": status, "query": query, "page_size": page_size,
            "next_page_token": next_page_token}, operation="workflow.list"))
        items = [WorkflowExecution.from_dict(item, decode=False) for item in body.get("workflows") or []
                 if isinstance(item, dict)]
        token = body.get("next_page_token")
        return WorkflowList(items, token if isinstance(token, str) else None)

    def list_workflow_runs(self, workflow_id: str) -> WorkflowRunList:
        """Every run of a workflow execution chain, oldest first."""
        body = self._call("control", "GET", f"/workflows/{segment(workflow_id)}/runs", route="/workflows/{id}/runs",
                          operation="workflow.runs")
        return WorkflowRunList.from_dict(body, workflow_id=workflow_id)

    def list_runs(self, workflow_id: str) -> List[Dict[str, Any]]:
        """The runs as the server's JSON objects (see :meth:`list_workflow_runs` for dataclasses)."""
        return [run.raw or {} for run in self.list_workflow_runs(workflow_id).runs]

    def describe_workflow_run(self, workflow_id: str, run_id: str) -> WorkflowRun:
        """One run's status, payloads and what can be done with it."""
        body = self._call("control", "GET", f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}",
                          route="/workflows/{id}/runs/{runId}", operation="workflow.show_run")
        return WorkflowRun.from_dict(body, workflow_id=workflow_id, run_id=run_id)

    def get_history(
        self, workflow_id: str, run_id: str, *, page_size: Optional[int] = None, next_page_token: Optional[str] = None
    ) -> Dict[str, Any]:
        """One page of a run's history: ``{"events": [...], "next_page_token": ...}``."""
        return body_of(self._call(
            "control", "GET", f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}/history",
            route="/workflows/{id}/runs/{runId}/history",
            params={"page_size": page_size, "next_page_token": next_page_token}, operation="workflow.history",
        ))

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

    def export_history(self, workflow_id: str, run_id: str) -> Dict[str, Any]:
        """The run's history as a replay bundle (``durable-workflow.v2.history-export``)."""
        return body_of(self._call(
            "control", "GET", f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}/history/export",
            route="/workflows/{id}/runs/{runId}/history/export", operation="workflow.history_export"))

    def get_result(
        self,
        handle: Union[WorkflowHandle, str],
        *,
        poll_interval: float = 0.5,
        timeout: Optional[float] = 30.0,
        run_id: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Any:
        """Block until the run closes and return its result (or raise its failure).

        ``handle`` is a :class:`WorkflowHandle` (as in the SDK) or a workflow id. Without a
        run id this follows the newest run, so a continue-as-new chain yields the final run's
        result. Raises ``TimeoutError`` at ``timeout`` seconds (``None``: no deadline); the run
        goes on.
        """
        workflow_id = handle if isinstance(handle, str) else handle.workflow_id
        deadline = None if timeout is None else time.monotonic() + timeout
        follow = self.result_waits_on_history  # wait on the run's history between describes
        known = run_id or (None if isinstance(handle, str) else handle.run_id)
        if follow and known:
            # A run we know (the start's): wait on its history at once, without a describe first. Its
            # closing event answers; a continue-as-new, the deadline or a refused wait goes on as below
            # (describe, then the newest run). A refusal here (a run the server does not know: 404)
            # is the describe's to report, so it does not turn the wait off.
            try:
                closing, codec = self._follow_history(workflow_id, known, deadline, poll_interval, cancel)
            except errors.ServerError as exc:
                follow = exc.status is None or not 400 <= exc.status < 500 or exc.status == 404
            except errors.TransportError:
                pass
            else:
                if closing and codec:  # the run's codec, from its WorkflowStarted event (else: describe)
                    found, value = _outcome_of(workflow_id, closing, codec)
                    if found:
                        return value
        while True:
            execution = self.describe_workflow(workflow_id, run_id)
            if execution.is_terminal and execution.run_id:
                envelope = (execution.raw or {}).get("output_envelope") if execution.status == "completed" else None
                if _inline(envelope):
                    # The describe's ``output_envelope`` is the run's stored output, the same payload
                    # as its WorkflowCompleted event (server WorkflowController::show ->
                    # PayloadEnvelopes::workerEnvelope): decoded as that event's would be, it saves
                    # the history read. Externally stored or absent output takes the history path.
                    return decode_payload(envelope, opt_str((execution.raw or {}).get("payload_codec"))
                                          or execution.payload_codec)
                return self._terminal_outcome(workflow_id, execution)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"workflow {workflow_id} has not reached a terminal state (status={execution.status!r}) "
                    f"after {timeout} s{task_failure_note(execution.raw or {})}"
                )
            if follow and execution.run_id:
                try:
                    closing, _ = self._follow_history(workflow_id, execution.run_id, deadline, poll_interval,
                                                      cancel)
                except (errors.TransportError, errors.ServerError) as exc:
                    # A server that refuses the wait (4xx) is polled by describe from now on; a failed
                    # wait (a timeout at the deadline, an outage) goes back to describe after the
                    # usual pause, retried as usual.
                    follow = not (isinstance(exc, errors.ServerError) and exc.status is not None
                                  and 400 <= exc.status < 500)
                else:
                    if closing:
                        found, value = _outcome_of(workflow_id, closing, execution.payload_codec)
                        if found:
                            return value
                    continue  # continued as new, or the deadline came: describe again
            wait = poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic()))
            if cancel is not None:
                if cancel.wait(wait):
                    raise errors.WorkerShutdown("get_result interrupted")
            else:
                time.sleep(wait)

    def _follow_history(self, workflow_id: str, run_id: str, deadline: Optional[float], poll_interval: float,
                        cancel: Optional[CancelToken]) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str]]:
        """Read the run's history with ``wait_new_event`` until it holds a closing event; return the
        events from the first closing one on (``None``: the deadline came first), and the run's payload
        codec as its ``WorkflowStarted`` event records it (``None``: not seen).

        The history route's ``wait_new_event`` holds the read until an event after
        ``next_page_token`` exists (server HistoryController::show through LongPoller::until; the
        server's own test follows a run with ``base64(last sequence)`` as the token, as here), so the
        result needs no describe polling: one read per batch of events the run records. A server
        that answers at once with nothing new (no wait support) is read every ``poll_interval``.
        """
        last = 0
        codec: Optional[str] = None
        token: Optional[str] = None
        path = f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}/history"
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None, codec
            page = body_of(self._call(
                "control", "GET", path, route="/workflows/{id}/runs/{runId}/history",
                params={"wait_new_event": "1", "page_size": 1000, "next_page_token": token},
                operation="workflow.history", retry=RetryMode.NEVER, cancel=cancel,
                read_timeout=None if remaining is None else min(self.timeout, remaining + 0.05)))
            # One pass: the events after ``last``; the run's codec from a WorkflowStarted before the
            # first closing event; the events from that closing one on are the answer.
            fresh: List[Dict[str, Any]] = []
            closing = -1
            for event in page.get("events") or ():
                if not isinstance(event, dict):
                    continue
                sequence = event.get("sequence")
                if not isinstance(sequence, int) or sequence <= last:
                    continue
                if closing < 0:
                    kind = event.get("event_type") or event.get("type")
                    if kind in _CLOSING_EVENTS:
                        closing = len(fresh)
                    elif kind == "WorkflowStarted":
                        codec = opt_str((mapping(event.get("payload")) or {}).get("payload_codec")) or codec
                fresh.append(event)
            if closing >= 0:
                return fresh[closing:], codec
            if fresh:
                last = fresh[-1]["sequence"]
            more = page.get("next_page_token")
            token = more if fresh and isinstance(more, str) and more else (
                base64.b64encode(str(last).encode("ascii")).decode("ascii") if last else None)
            if not fresh:  # the server did not wait (or its wait ran out): pace the reads
                wait = poll_interval if remaining is None else max(0.0, min(poll_interval, remaining))
                if cancel is not None:
                    if cancel.wait(wait):
                        raise errors.WorkerShutdown("get_result interrupted")
                else:
                    time.sleep(wait)

    def _terminal_outcome(self, workflow_id: str, execution: WorkflowExecution) -> Any:
        assert execution.run_id is not None
        events = list(self.iter_history(workflow_id, execution.run_id))
        found, value = _outcome_of(workflow_id, list(reversed(events)), execution.payload_codec)
        return value if found else execution.output


#: The input of a start without arguments (its blob is a constant).
_NO_ARGUMENTS = payloads.encode([])

#: The events that close a run (a continue-as-new closes it too; its result is the next run's).
_CLOSING_EVENTS = frozenset({"WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowTerminated",
                             "WorkflowTimedOut", "WorkflowContinuedAsNew"})


def _outcome_of(workflow_id: str, events: List[Dict[str, Any]], codec: Optional[str]) -> Tuple[bool, Any]:
    """The outcome the first terminal event of ``events`` records: ``(True, result)``, or its failure
    raised; ``(False, None)`` when none is there."""
    for event in events:
        kind = event.get("event_type") or event.get("type")
        payload = mapping(event.get("payload")) or {}
        if kind == "WorkflowCompleted":
            for name in ("output", "result"):
                if payload.get(name) is not None:
                    return True, decode_payload(payload[name], payload.get("payload_codec") or codec)
            return True, None
        if kind == "WorkflowFailed":
            failure_type = payload.get("exception_class") or payload.get("exception_type")
            message = str(payload.get("message") or "")
            detail = ": ".join(str(part) for part in (failure_type, message) if part)
            raise errors.WorkflowFailed(f"workflow {workflow_id} failed" + (f": {detail}" if detail else ""),
                                        failure_type)
        if kind == "WorkflowCancelled":
            raise errors.WorkflowCancelled(str(payload.get("reason") or "workflow was cancelled"))
        if kind == "WorkflowTerminated":
            raise errors.WorkflowTerminated(str(payload.get("reason") or "workflow was terminated"))
        if kind == "WorkflowTimedOut":
            raise errors.WorkflowTimedOut(str(payload.get("message") or "workflow execution timed out"))
    return False, None


def _inline(envelope: Any) -> bool:
    """An output envelope that holds its value (not an external-storage reference)."""
    if isinstance(envelope, str):
        return True
    return isinstance(envelope, dict) and "blob" in envelope and not any(
        key.startswith("external") for key in envelope)
